// SPDX-License-Identifier: MIT
/* remote_fan OWNERS BLOCKS ROUNDS [SIZE]
 *
 * Remote frees from many owners at once: OWNERS threads each allocate BLOCKS
 * blocks of SIZE bytes (default 64) and end; then the main thread frees them
 * all, taking one block from each owner in turn, so consecutive frees go to
 * different owners (heaps outlive their threads). Repeated ROUNDS times; one op is one remote
 * free. An allocator that batches remote frees per owner keeps its batches
 * only while the owners don't collide in its per-thread outboxes: under
 * callgrind, the instructions per op show that. */
#include "bench.h"

static uint32_t owners, blocks;
static size_t size;
static void ***sets;

static void fill(uint32_t i)
{
    /* the first malloc sets the thread's heap up: before the barrier, so
     * no owner ends (and hands its heap on) before all have one */
    sets[i][0] = malloc(size);
    phase_begin();
    for (uint32_t k = 1; k < blocks; k++) {
        sets[i][k] = malloc(size);
        if (sets[i][k] == NULL || sets[i][0] == NULL)
            bench_fail("out of memory");
        *(volatile char *)sets[i][k] = (char)k;
    }
    phase_end();
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 3, "OWNERS BLOCKS ROUNDS [SIZE]");
    owners = (uint32_t)arg_u64(argc, argv, 1, 8);
    blocks = (uint32_t)arg_u64(argc, argv, 2, 10000);
    uint64_t rounds = arg_u64(argc, argv, 3, 10);
    size = (size_t)arg_u64(argc, argv, 4, 64);
    if (owners < 1 || blocks < 1)
        bench_fail("need OWNERS >= 1 and BLOCKS >= 1");
    sets = xzalloc64(owners, sizeof *sets);
    for (uint32_t i = 0; i < owners; i++)
        sets[i] = xzalloc64(blocks, sizeof **sets);
    double secs = 0;
    for (uint64_t r = 0; r < rounds; r++) {
        run_parallel(owners, fill, NULL);
        double t0 = now_sec();
        for (uint32_t k = 0; k < blocks; k++)
            for (uint32_t i = 0; i < owners; i++)
                free(sets[i][k]);
        secs += now_sec() - t0;
    }
    res_begin("remote_fan");
    res_u64("owners", owners);
    res_u64("blocks", blocks);
    res_rate(secs, rounds * owners * blocks);
    res_end();
    return 0;
}
