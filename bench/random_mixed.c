// SPDX-License-Identifier: MIT
/* random_mixed ITERS WS MIN MAX [SEED]
 *
 * A table of WS slots. Each iteration draws one random number: its low 32 bits
 * pick a slot, its high 32 bits a size. An occupied slot is checked and freed,
 * an empty one gets a new block of that size, which is written. Every
 * iteration is one operation. MIN may be the word "app" (MAX is then ignored):
 * 80% of sizes in 16..256, 15% in 257..2048, 5% in 2049..32768.
 *
 * Built a second time with -DBENCH_BUMP as random_mixed-bump: malloc and free
 * are then a LIFO list of fixed chunks, the baseline that `make
 * bench-instructions` subtracts to leave the allocator's own instructions. */
#include "bench.h"

#include <stdio.h>
#ifdef BENCH_BUMP
#include <sys/mman.h>
#endif

#ifdef BENCH_BUMP
static void *bump_head;

static void bump_init(size_t chunk, size_t count)
{
    chunk = (chunk + 15) & ~(size_t)15;
    char *a = mmap(NULL, chunk * count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED)
        bench_fail("mmap of the baseline pool failed");
    for (size_t i = count; i-- > 0;) {
        *(void **)(a + i * chunk) = bump_head;
        bump_head = a + i * chunk;
    }
}

static inline void *bm_malloc(size_t n)
{
    (void)n;
    void *p = bump_head;
    bump_head = *(void **)p;
    return p;
}

static inline void bm_free(void *p)
{
    *(void **)p = bump_head;
    bump_head = p;
}
#define ALLOC_NAME "baseline"
#else
#define bm_malloc malloc
#define bm_free free
#define ALLOC_NAME "malloc"
#endif

static uint64_t n_malloc, n_free;

/* The measured loop, by this name, is what callgrind counts
 * (--toggle-collect=bench_loop); the final frees are inside it so that the
 * counted mallocs and frees pair up exactly. Returns the seconds of the main
 * loop. */
__attribute__((noinline, noclone)) double bench_loop(slot_t *slots, uint64_t iters, uint32_t ws,
                                                     const size_dist_t *d, rng_t *rng)
{
    double t0 = now_sec();
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t x = rng_next(rng);
        slot_t *s = &slots[scale32((uint32_t)x, ws)];
        if (s->p) {
            blk_check(s->p, s->n);
            bm_free(s->p);
            s->p = NULL;
            n_free++;
        } else {
            size_t n = dist_size(d, (uint32_t)(x >> 32));
            void *p = bm_malloc(n);
            if (!p)
                bench_fail("malloc(%zu) returned NULL", n);
            blk_fill(p, n);
            s->p = p;
            s->n = n;
            n_malloc++;
        }
    }
    double secs = now_sec() - t0;
    for (uint32_t k = 0; k < ws; k++) {
        if (slots[k].p) {
            blk_check(slots[k].p, slots[k].n);
            bm_free(slots[k].p);
            n_free++;
        }
    }
    return secs;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 4, "ITERS WS MIN|app MAX [SEED]");
    uint64_t iters = arg_u64(argc, argv, 1, 20000000);
    uint32_t ws = (uint32_t)arg_u64(argc, argv, 2, 400);
    size_dist_t d = arg_dist(argc, argv, 3, 16, 2048);
    uint64_t seed = arg_u64(argc, argv, 5, 1);
    if (ws == 0)
        bench_fail("WS must be at least 1");
#ifdef BENCH_BUMP
    bump_init(dist_max(&d), ws);
#endif
    slot_t *slots = calloc(ws, sizeof *slots);
    if (!slots)
        bench_fail("out of memory");
    rng_t rng;
    rng_seed(&rng, seed, 0);

    double secs = bench_loop(slots, iters, ws, &d, &rng);
    free(slots);

    res_begin("random_mixed");
    res_str("alloc_impl", ALLOC_NAME);
    res_u64("iters", iters);
    res_u64("ws", ws);
    res_dist(&d);
    res_u64("seed", seed);
    res_rate(secs, iters);
    res_u64("mallocs", n_malloc);
    res_u64("frees", n_free);
    res_end();
    return 0;
}
