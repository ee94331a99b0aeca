// SPDX-License-Identifier: MIT
/* realloc_growth append|double ITERS NSTR MAXLEN [SEED]
 *
 * NSTR strings live at once. Each iteration appends 1..32 bytes to a random
 * string (one op). In "append" mode every append reallocs the string to its
 * exact new length; in "double" mode the capacity doubles when it runs out.
 * A string that reaches its random target length (16..MAXLEN) is checked,
 * freed and started again. The appended bytes are written, and after every
 * realloc the first byte and the last byte written before it are checked, so
 * a realloc that loses or misplaces the contents fails the run. */
#include "bench.h"

#include <stdio.h>

typedef struct {
    unsigned char *buf;
    size_t len, cap, target;
    unsigned char first, last;
} str_t;

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 2, "append|double ITERS NSTR MAXLEN [SEED]");
    int doubling = strcmp(argv[1], "double") == 0;
    if (!doubling && strcmp(argv[1], "append") != 0)
        bench_fail("mode must be append or double, not '%s'", argv[1]);
    uint64_t iters = arg_u64(argc, argv, 2, 5000000);
    uint32_t nstr = (uint32_t)arg_u64(argc, argv, 3, 64);
    uint32_t maxlen = (uint32_t)arg_u64(argc, argv, 4, 16384);
    uint64_t seed = arg_u64(argc, argv, 5, 1);
    if (nstr < 1 || maxlen < 16)
        bench_fail("need NSTR >= 1 and MAXLEN >= 16");

    rng_t rng;
    rng_seed(&rng, seed, 0);
    str_t *s = calloc(nstr, sizeof *s);
    if (!s)
        bench_fail("out of memory");
    size_dist_t target = { DIST_UNIFORM, 16, maxlen };
    uint64_t reallocs = 0, moves = 0, completed = 0;

    double t0 = now_sec();
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t x = rng_next(&rng);
        str_t *t = &s[scale32((uint32_t)x, nstr)];
        size_t add = 1 + ((x >> 32) & 31);
        if (!t->buf)
            t->target = dist_size(&target, (uint32_t)rng_next(&rng));
        size_t need = t->len + add + 1;
        if (need > t->cap) {
            size_t cap = need;
            if (doubling) {
                cap = t->cap ? t->cap : 16;
                while (cap < need)
                    cap *= 2;
            }
            unsigned char *nb = realloc(t->buf, cap);
            if (!nb)
                bench_fail("realloc(%zu) returned NULL", cap);
            reallocs++;
            moves += (t->buf != NULL && nb != t->buf);
            if (t->len && (nb[0] != t->first || nb[t->len - 1] != t->last))
                bench_fail("realloc to %zu bytes lost the contents", cap);
            t->buf = nb;
            t->cap = cap;
        }
        unsigned char v = (unsigned char)(i | 1);
        memset(t->buf + t->len, v, add);
        if (!t->len)
            t->first = v;
        t->len += add;
        t->buf[t->len] = 0;
        t->last = v;
        if (t->len >= t->target) {
            if (t->buf[0] != t->first || t->buf[t->len - 1] != t->last)
                bench_fail("string of %zu bytes lost its contents", t->len);
            free(t->buf);
            memset(t, 0, sizeof *t);
            completed++;
        }
    }
    double secs = now_sec() - t0;
    for (uint32_t k = 0; k < nstr; k++)
        free(s[k].buf);
    free(s);

    res_begin("realloc_growth");
    res_str("mode", doubling ? "double" : "append");
    res_u64("iters", iters);
    res_u64("nstr", nstr);
    res_u64("maxlen", maxlen);
    res_rate(secs, iters);
    res_u64("reallocs", reallocs);
    res_f64("moved_ratio", reallocs ? (double)moves / (double)reallocs : 0.0);
    res_u64("strings_completed", completed);
    res_end();
    return 0;
}
