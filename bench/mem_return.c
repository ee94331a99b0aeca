// SPDX-License-Identifier: MIT
/* mem_return TOTAL_MB [FREE_PCT] [IDLE1] [IDLE2] [SEED]
 *
 * Does the allocator give memory back? Builds a working set of TOTAL_MB MiB
 * (default 1024) of mixed sizes (70% 16..256 bytes, 20% up to 4 KiB, 9% up
 * to 64 KiB, 1% up to 1 MiB), every byte written; frees FREE_PCT percent
 * (default 90) of the blocks in random order; then idles. The resident set
 * (/proc/self/statm) is read before, at the peak, right after the frees, after
 * IDLE1 and IDLE2 seconds of idling (default 1 and 5, counted from the end of
 * the frees), and after malloc_trim(0) where the allocator has one (looked up
 * with dlsym, so it works on any allocator; null where the object that serves
 * malloc has none). live_pages_mb: the pages that hold a byte of a live block
 * where this allocator placed them -- what no allocator that keeps this
 * layout can go below (the program's own pages, rss_start_mb, come on top). */
#include "bench.h"

#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

static double mib(size_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

static int by_first_page(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* Bytes of the pages that hold a byte of one of the blocks. Ranges are
 * sorted by their first page and merged, so shared pages count once. */
static size_t pages_holding(const slot_t *blk, size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = 0;
    uintptr_t *r = xmalloc(sizeof *r * 2 * (n ? n : 1));
    for (size_t i = 0; i < n; i++) {
        r[2 * i] = (uintptr_t)blk[i].p / page;
        r[2 * i + 1] = ((uintptr_t)blk[i].p + blk[i].n - 1) / page;
    }
    qsort(r, n, 2 * sizeof *r, by_first_page);
    uintptr_t end = 0; /* one past the last page counted */
    for (size_t i = 0; i < n; i++) {
        uintptr_t first = r[2 * i] > end ? r[2 * i] : end, last = r[2 * i + 1];
        if (last >= first) {
            pages += last - first + 1;
            end = last + 1;
        }
    }
    free(r);
    return pages * page;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 1, "TOTAL_MB [FREE_PCT] [IDLE1] [IDLE2] [SEED]");
    uint64_t total = arg_u64(argc, argv, 1, 1024) << 20;
    uint32_t free_pct = (uint32_t)arg_u64(argc, argv, 2, 90);
    double idle1 = arg_f64(argc, argv, 3, 1.0), idle2 = arg_f64(argc, argv, 4, 5.0);
    uint64_t seed = arg_u64(argc, argv, 5, 1);
    if (free_pct > 100 || idle2 < idle1)
        bench_fail("need FREE_PCT <= 100 and IDLE1 <= IDLE2");

    size_dist_t d = { DIST_MIXED_LARGE, 16, 1u << 20 };
    rng_t rng;
    rng_seed(&rng, seed, 0);
    size_t rss_start = rss_bytes();

    size_t cap = 1024, n = 0, bytes = 0;
    slot_t *blk = xmalloc(sizeof *blk * cap);
    double t0 = now_sec();
    while (bytes < total) {
        if (n == cap) {
            cap *= 2;
            blk = realloc(blk, sizeof *blk * cap);
            if (!blk)
                bench_fail("out of memory");
        }
        size_t sz = dist_size(&d, (uint32_t)rng_next(&rng));
        void *p = xmalloc(sz);
        memset(p, 0x5a, sz);
        blk_fill(p, sz);
        blk[n].p = p;
        blk[n].n = sz;
        bytes += sz;
        n++;
    }
    double build_secs = now_sec() - t0;
    size_t rss_peak = rss_bytes();

    /* Shuffle, then free the first FREE_PCT percent. */
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(((unsigned __int128)rng_next(&rng) * (i + 1)) >> 64);
        slot_t t = blk[i];
        blk[i] = blk[j];
        blk[j] = t;
    }
    size_t n_free = (size_t)((double)n * free_pct / 100.0);
    t0 = now_sec();
    for (size_t i = 0; i < n_free; i++)
        blk_free(blk[i].p, blk[i].n);
    double t_freed = now_sec();
    double free_secs = t_freed - t0;
    size_t rss_after = rss_bytes();
    size_t live_pages = pages_holding(blk + n_free, n - n_free);
    sleep_sec(idle1 - (now_sec() - t_freed));
    size_t rss_idle1 = rss_bytes();
    sleep_sec(idle2 - (now_sec() - t_freed));
    size_t rss_idle2 = rss_bytes();

    /* Only a malloc_trim from the object that serves malloc counts: without
     * one of its own, the allocator would be handed glibc's, which trims
     * glibc's unused heap. */
    int (*trim)(size_t) = (int (*)(size_t))dlsym(RTLD_DEFAULT, "malloc_trim");
    Dl_info info;
    if (trim && (!dladdr((void *)trim, &info) || !info.dli_fname ||
                 strcmp(info.dli_fname, bench_malloc_owner()) != 0))
        trim = NULL;
    size_t rss_trim = 0;
    if (trim) {
        trim(0);
        rss_trim = rss_bytes();
    }
    size_t live = 0;
    for (size_t i = n_free; i < n; i++) {
        live += blk[i].n;
        blk_free(blk[i].p, blk[i].n);
    }
    free(blk);

    res_begin("mem_return");
    res_u64("total_mb", total >> 20);
    res_u64("free_pct", free_pct);
    res_u64("blocks", n);
    res_f64("idle1_s", idle1);
    res_f64("idle2_s", idle2);
    res_f64("build_secs", build_secs);
    res_f64("free_secs", free_secs);
    res_f64("live_mb", mib(live));
    res_f64("live_pages_mb", mib(live_pages));
    res_f64("rss_start_mb", mib(rss_start));
    res_f64("rss_peak_mb", mib(rss_peak));
    res_f64("rss_after_free_mb", mib(rss_after));
    res_f64("rss_idle1_mb", mib(rss_idle1));
    res_f64("rss_idle2_mb", mib(rss_idle2));
    if (trim)
        res_f64("rss_trim_mb", mib(rss_trim));
    else
        res_null("rss_trim_mb");
    res_end();
    return 0;
}
