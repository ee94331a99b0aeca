// SPDX-License-Identifier: MIT
/* thread_churn THREADS BLOCKS [MIN] [MAX] [SEED] [KEEP]
 *
 * A thread-per-task program's shape: THREADS threads run one after another
 * (each created once the one before has been joined); each allocates and
 * writes BLOCKS blocks of MIN..MAX bytes (default 64 KiB .. 1 MiB), frees
 * them, four times, and exits. What a thread freed is there for the next
 * one: an allocator that hands an exiting thread's memory back to the OS,
 * or keeps it where the next thread cannot reach it, faults it in again in
 * every thread (minor page faults per thread are reported). KEEP (default
 * 0: none): every KEEP-th block of a thread's last round outlives it (a
 * result handed on), freed by main after the last thread. Timed from the
 * first thread's creation to the last one's join; an op is one malloc and
 * its free. */
#include "bench.h"

#include <stdio.h>

#define ROUNDS 4

static uint32_t blocks, keep;
static uint64_t seed;
static size_dist_t dist;
static slot_t *kept; /* threads run one at a time */
static uint64_t kept_n;

static void *task(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    rng_t rng;
    rng_seed(&rng, seed, id + 1);
    slot_t *blk = xmalloc(sizeof *blk * blocks);
    for (int r = 0; r < ROUNDS; r++) {
        for (uint32_t i = 0; i < blocks; i++) {
            blk[i].n = dist_size(&dist, (uint32_t)rng_next(&rng));
            blk[i].p = blk_new(blk[i].n);
        }
        for (uint32_t i = 0; i < blocks; i++) {
            if (keep && r == ROUNDS - 1 && i % keep == 0)
                kept[kept_n++] = blk[i];
            else
                blk_free(blk[i].p, blk[i].n);
        }
    }
    free(blk);
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 2, "THREADS BLOCKS [MIN] [MAX] [SEED] [KEEP]");
    uint64_t threads = arg_u64(argc, argv, 1, 1000);
    blocks = (uint32_t)arg_u64(argc, argv, 2, 8);
    dist = arg_dist(argc, argv, 3, 64 << 10, 1 << 20);
    seed = arg_u64(argc, argv, 5, 1);
    keep = (uint32_t)arg_u64(argc, argv, 6, 0);
    if (threads < 1 || blocks < 1)
        bench_fail("need THREADS, BLOCKS >= 1");
    if (keep)
        kept = xmalloc(sizeof *kept * (threads * ((blocks + keep - 1) / keep)));

    long f0 = minor_faults();
    double t0 = now_sec();
    for (uint64_t i = 0; i < threads; i++) {
        pthread_t t;
        bench_spawn(&t, task, (void *)(uintptr_t)i);
        bench_join(t);
    }
    double secs = now_sec() - t0;
    long faults = minor_faults() - f0;
    for (uint64_t i = 0; i < kept_n; i++)
        blk_free(kept[i].p, kept[i].n);
    free(kept);

    res_begin("thread_churn");
    res_u64("threads", threads);
    res_u64("blocks", blocks);
    res_u64("keep", keep);
    res_dist(&dist);
    res_rate(secs, threads * blocks * ROUNDS);
    res_f64("faults_per_thread", (double)faults / (double)threads);
    res_end();
    return 0;
}
