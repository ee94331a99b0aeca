// SPDX-License-Identifier: MIT
/* larson THREADS ROUNDS OPS BLOCKS [MIN] [MAX] [SEED]
 *
 * A server-like pattern: THREADS chains run at once. Each chain owns an array
 * of BLOCKS blocks (MIN..MAX bytes, default 8..1024), first allocated by the
 * main thread. A round is one thread replacing OPS random blocks of the array
 * (check and free the old one, allocate and write a new one: one op). At the
 * end of its round the thread hands the array to a thread it creates for the
 * next round and exits, so blocks are freed by threads other than the one
 * that allocated them and threads keep coming and going. The main thread
 * frees what is left at the end. */
#include "bench.h"

#include <stdio.h>

typedef struct {
    slot_t *blk;
    uint32_t nblk, round;
    rng_t rng;
    pthread_t *tids;                      /* one per round */
    uint64_t ops;
} chain_t;

static uint32_t rounds;
static uint64_t ops_per_round;
static size_dist_t dist;

static void *round_worker(void *arg)
{
    chain_t *c = arg;
    for (uint64_t i = 0; i < ops_per_round; i++) {
        uint64_t x = rng_next(&c->rng);
        slot_t *s = &c->blk[scale32((uint32_t)x, c->nblk)];
        blk_free(s->p, s->n);
        s->n = dist_size(&dist, (uint32_t)(x >> 32));
        s->p = blk_new(s->n);
    }
    c->ops += ops_per_round;
    if (++c->round < rounds)
        bench_spawn(&c->tids[c->round], round_worker, c);
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 4, "THREADS ROUNDS OPS BLOCKS [MIN] [MAX] [SEED]");
    uint32_t n_threads = (uint32_t)arg_u64(argc, argv, 1, 2);
    rounds = (uint32_t)arg_u64(argc, argv, 2, 50);
    ops_per_round = arg_u64(argc, argv, 3, 20000);
    uint32_t nblk = (uint32_t)arg_u64(argc, argv, 4, 1000);
    dist = arg_dist(argc, argv, 5, 8, 1024);
    uint64_t seed = arg_u64(argc, argv, 7, 1);
    if (n_threads < 1 || rounds < 1 || nblk < 1)
        bench_fail("need THREADS, ROUNDS, BLOCKS >= 1");

    chain_t *chains = calloc(n_threads, sizeof *chains);
    if (!chains)
        bench_fail("out of memory");
    for (uint32_t t = 0; t < n_threads; t++) {
        chain_t *c = &chains[t];
        rng_seed(&c->rng, seed, t + 1);
        c->nblk = nblk;
        c->blk = xmalloc(sizeof *c->blk * nblk);
        c->tids = xmalloc(sizeof *c->tids * rounds);
        for (uint32_t k = 0; k < nblk; k++) {
            c->blk[k].n = dist_size(&dist, (uint32_t)rng_next(&c->rng));
            c->blk[k].p = blk_new(c->blk[k].n);
        }
    }

    double t0 = now_sec();
    for (uint32_t t = 0; t < n_threads; t++)
        bench_spawn(&chains[t].tids[0], round_worker, &chains[t]);
    /* tids[r + 1] is written by thread r before it exits, so joining r first
     * makes it visible here. */
    for (uint32_t t = 0; t < n_threads; t++)
        for (uint32_t r = 0; r < rounds; r++)
            bench_join(chains[t].tids[r]);
    double secs = now_sec() - t0;

    uint64_t ops = 0;
    for (uint32_t t = 0; t < n_threads; t++) {
        chain_t *c = &chains[t];
        ops += c->ops;
        for (uint32_t k = 0; k < nblk; k++)
            blk_free(c->blk[k].p, c->blk[k].n);
        free(c->blk);
        free(c->tids);
    }
    free(chains);

    res_begin("larson");
    res_u64("threads", n_threads);
    res_u64("rounds", rounds);
    res_u64("ops_per_round", ops_per_round);
    res_u64("blocks", nblk);
    res_dist(&dist);
    res_rate(secs, ops);
    res_u64("threads_created", (uint64_t)n_threads * rounds);
    res_end();
    return 0;
}
