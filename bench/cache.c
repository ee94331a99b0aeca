// SPDX-License-Identifier: MIT
/* cache scratch|thrash THREADS ITERS OBJSIZE WRITES [SEED]
 *
 * False sharing caused by the allocator. Each of THREADS threads does ITERS
 * rounds of: allocate an OBJSIZE-byte object, store to its bytes in turn
 * WRITES times in all, check it, free it.
 *   thrash  (active false sharing): the threads allocate their objects
 *           themselves; an allocator that hands objects of different threads
 *           out of one cache line makes their writes fight over it.
 *   scratch (passive false sharing): the main thread first allocates one
 *           object per thread, back to back, and hands them out; each thread
 *           frees the one it got before its rounds, so an allocator that
 *           reuses freed memory for the freeing thread lets the threads'
 *           objects share the main thread's cache lines.
 * Besides the time, it counts, over all pairs of threads, the cache lines
 * that held objects of both (shared_line_pairs), and the threads that
 * shared any line (threads_sharing). */
#include "bench.h"

#include <stdio.h>

#define LINE 64
#define MAX_LINES 64                       /* distinct lines remembered per thread */

typedef struct {
    _Alignas(64) char *given;                           /* scratch: the object from main */
    uintptr_t lines[MAX_LINES];
    uint32_t n_lines;
} worker_t;

static uint64_t iters, objsize, writes;
static worker_t *workers;

static void note_line(worker_t *w, const void *p)
{
    uintptr_t first = (uintptr_t)p / LINE, last = ((uintptr_t)p + objsize - 1) / LINE;
    for (uintptr_t l = first; l <= last; l++) {
        uint32_t i = 0;
        while (i < w->n_lines && w->lines[i] != l)
            i++;
        if (i == w->n_lines && w->n_lines < MAX_LINES)
            w->lines[w->n_lines++] = l;
    }
}

static void worker(uint32_t id)
{
    worker_t *w = &workers[id];
    phase_begin();
    if (w->given)
        free(w->given);
    for (uint64_t i = 0; i < iters; i++) {
        volatile unsigned char *o = xmalloc(objsize);
        note_line(w, (const void *)o);
        for (uint64_t j = 0, k = 0; j < writes; j++) {
            o[k] = (unsigned char)j;
            if (++k == objsize)
                k = 0;
        }
        if (o[(writes - 1) % objsize] != (unsigned char)(writes - 1))
            bench_fail("object %p lost writes", (void *)o);
        free((void *)o);
    }
    phase_end();
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 5, "scratch|thrash THREADS ITERS OBJSIZE WRITES");
    int scratch = strcmp(argv[1], "scratch") == 0;
    if (!scratch && strcmp(argv[1], "thrash") != 0)
        bench_fail("mode must be scratch or thrash, not '%s'", argv[1]);
    uint32_t n_threads = (uint32_t)arg_u64(argc, argv, 2, 2);
    iters = arg_u64(argc, argv, 3, 1000);
    objsize = arg_u64(argc, argv, 4, 8);
    writes = arg_u64(argc, argv, 5, 10000);
    if (n_threads < 1 || objsize < 1 || writes < 1)
        bench_fail("need THREADS, OBJSIZE, WRITES >= 1");

    worker_t *w = workers = xzalloc64(n_threads, sizeof *w);
    for (uint32_t i = 0; i < n_threads && scratch; i++) {
        w[i].given = xmalloc(objsize);
        memset(w[i].given, (int)i, objsize);
    }
    double secs = run_parallel(n_threads, worker, NULL);

    /* Lines used by more than one thread. */
    uint64_t shared_line_pairs = 0, threads_sharing = 0;
    for (uint32_t a = 0; a < n_threads; a++) {
        int shares = 0;
        for (uint32_t i = 0; i < w[a].n_lines; i++) {
            for (uint32_t b = 0; b < n_threads; b++) {
                if (b == a)
                    continue;
                for (uint32_t j = 0; j < w[b].n_lines; j++) {
                    if (w[b].lines[j] != w[a].lines[i])
                        continue;
                    shares = 1;
                    if (b > a)
                        shared_line_pairs++;
                }
            }
        }
        threads_sharing += (uint64_t)shares;
    }

    res_begin(scratch ? "cache_scratch" : "cache_thrash");
    res_u64("threads", n_threads);
    res_u64("iters", iters);
    res_u64("objsize", objsize);
    res_u64("writes", writes);
    res_rate(secs, iters * n_threads);
    res_f64("writes_per_sec", (double)(iters * n_threads * writes) / secs);
    res_u64("shared_line_pairs", shared_line_pairs);
    res_u64("threads_sharing", threads_sharing);
    res_end();
    free(w);
    return 0;
}
