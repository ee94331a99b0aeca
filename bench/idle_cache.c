// SPDX-License-Identifier: MIT
/* idle_cache COUNT [SIZE] [IDLE] [REMOTE]
 *
 * What a thread keeps after freeing while it idles: the main thread allocates
 * COUNT blocks of SIZE bytes (64 KiB by default), writes them, frees them
 * all, and then makes no call at all for IDLE seconds (default 2). Reports the
 * resident set above the starting one after the frees and after the idle
 * time (MiB): what the allocator keeps cached for the thread, which only a
 * background purge can give back. REMOTE 1: another thread frees the
 * blocks and exits, as a consumer frees a producer's blocks; the main
 * thread idles as before (the blocks wait for it, their owner). */
#include "bench.h"

#include <string.h>

typedef struct {
    void **b;
    uint64_t count;
} frees_t;

static void *free_all(void *arg)
{
    const frees_t *f = arg;
    for (uint64_t i = 0; i < f->count; i++)
        free(f->b[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 1, "COUNT [SIZE] [IDLE] [REMOTE]");
    uint64_t count = arg_u64(argc, argv, 1, 64);
    size_t size = (size_t)arg_u64(argc, argv, 2, 64 << 10);
    double idle = arg_f64(argc, argv, 3, 2.0);
    int remote = arg_u64(argc, argv, 4, 0) != 0;
    void **b = xzalloc64(count ? count : 1, sizeof *b);
    size_t rss_start = rss_bytes();
    for (uint64_t i = 0; i < count; i++) {
        b[i] = xmalloc(size);
        memset(b[i], 1, size);
    }
    size_t rss_peak = rss_bytes();
    frees_t frees = { b, count };
    if (remote) {
        pthread_t t;
        bench_spawn(&t, free_all, &frees);
        bench_join(t);
    } else {
        free_all(&frees);
    }
    size_t rss_freed = rss_bytes();
    sleep_sec(idle);
    size_t rss_idle = rss_bytes();
    double mib = 1024.0 * 1024.0;
    res_begin("idle_cache");
    res_u64("count", count);
    res_u64("size", size);
    res_u64("remote", remote);
    res_f64("peak_mb", ((double)rss_peak - (double)rss_start) / mib);
    res_f64("freed_mb", ((double)rss_freed - (double)rss_start) / mib);
    res_f64("idle_mb", ((double)rss_idle - (double)rss_start) / mib);
    res_end();
    return 0;
}
