// SPDX-License-Identifier: MIT
/* idle_cache COUNT [SIZE] [IDLE]
 *
 * What a thread keeps after freeing while it idles: the main thread allocates
 * COUNT blocks of SIZE bytes (64 KiB by default), writes them, frees them
 * all, and then makes no call at all for IDLE seconds (default 2). Reports the
 * resident set above the starting one after the frees and after the idle
 * time (MiB): what the allocator keeps cached for the thread, which only a
 * background purge can give back. */
#include "bench.h"

#include <string.h>

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 1, "COUNT [SIZE] [IDLE]");
    uint64_t count = arg_u64(argc, argv, 1, 64);
    size_t size = (size_t)arg_u64(argc, argv, 2, 64 << 10);
    double idle = arg_f64(argc, argv, 3, 2.0);
    void **b = xzalloc64(count ? count : 1, sizeof *b);
    size_t rss_start = rss_bytes();
    for (uint64_t i = 0; i < count; i++) {
        b[i] = xmalloc(size);
        memset(b[i], 1, size);
    }
    size_t rss_peak = rss_bytes();
    for (uint64_t i = 0; i < count; i++)
        free(b[i]);
    size_t rss_freed = rss_bytes();
    sleep_sec(idle);
    size_t rss_idle = rss_bytes();
    double mib = 1024.0 * 1024.0;
    res_begin("idle_cache");
    res_u64("count", count);
    res_u64("size", size);
    res_f64("peak_mb", ((double)rss_peak - (double)rss_start) / mib);
    res_f64("freed_mb", ((double)rss_freed - (double)rss_start) / mib);
    res_f64("idle_mb", ((double)rss_idle - (double)rss_start) / mib);
    res_end();
    return 0;
}
