// SPDX-License-Identifier: MIT
/* calloc ITERS MIB EVERY
 *
 * A zeroed buffer reused: each op callocs MIB MiB, writes one byte in every
 * EVERY-th page (1: the whole buffer is used; 256: a sparse table), reads
 * one byte back and frees it. The allocator must clear memory it reuses;
 * writing zeros over pages the program then leaves alone costs time and
 * makes them resident (peak RSS), and dropping pages the program then
 * writes makes it fault them in again. Minor page faults per op show which. */
#include "bench.h"

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 3, "ITERS MIB EVERY");
    uint64_t iters = arg_u64(argc, argv, 1, 100);
    uint64_t mib = arg_u64(argc, argv, 2, 64);
    uint64_t every = arg_u64(argc, argv, 3, 1);
    if (mib < 1 || every < 1)
        bench_fail("need MIB >= 1 and EVERY >= 1");
    size_t n = (size_t)mib << 20, step = (size_t)every * 4096;
    unsigned sum = 0;

    long f0 = minor_faults();
    double t0 = now_sec();
    for (uint64_t i = 0; i < iters; i++) {
        unsigned char *p = calloc(1, n);
        if (p == NULL)
            bench_fail("calloc(%zu) failed", n);
        if (p[n / 2 + 1] != 0)
            bench_fail("calloc(%zu) not zero", n);
        for (size_t k = 0; k < n; k += step)
            p[k] = (unsigned char)(i + 1);
        sum += p[(size_t)(i * step) % n];
        free(p);
    }
    double secs = now_sec() - t0;
    long faults = minor_faults() - f0;

    res_begin("calloc");
    res_u64("iters", iters);
    res_u64("mib", mib);
    res_u64("every", every);
    res_rate(secs, iters);
    res_f64("faults_per_op", (double)faults / (double)iters);
    res_u64("check", sum);
    res_end();
    return 0;
}
