// SPDX-License-Identifier: MIT
/* handoff PAIRS ITERS MAX [LARGE_EVERY] [LARGE_MAX] [SEED]
 *
 * Message passing between threads: PAIRS sender threads each hand ITERS
 * messages to a receiver thread of their own through a bounded queue of 128
 * messages (a channel), and the receiver frees them: every free is a
 * remote one. A message is three blocks, as a Rust program sends a
 * (Vec<u8>, String, Box<[u64; 8]>) over a channel: a buffer of 1..MAX
 * bytes, one in LARGE_EVERY of 1..LARGE_MAX bytes; a string of 10..110
 * bytes; a record of 64 bytes. Every block is written (blk_fill) and
 * checked before its free. Op: a malloc or a free.
 *
 * The memory to watch is maxrss_kb: a sender's blocks come back to it from
 * its receiver, large ones of ever different sizes (docs/perf.md §46). */
#include "bench.h"

#include <stdio.h>

#define QUEUE 128

typedef struct {
    slot_t buf, str, rec;
} msg_t;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    msg_t q[QUEUE];
    uint32_t head, len;
    int done;
    uint64_t freed;
} __attribute__((aligned(64))) chan_t;

static chan_t *chans;
static uint32_t pairs;
static uint64_t iters, large_every, seed;
static uint32_t max_size, large_max;

static void send_msg(chan_t *c, const msg_t *m)
{
    pthread_mutex_lock(&c->lock);
    while (c->len == QUEUE)
        pthread_cond_wait(&c->not_full, &c->lock);
    c->q[(c->head + c->len) % QUEUE] = *m;
    c->len++;
    pthread_cond_signal(&c->not_empty);
    pthread_mutex_unlock(&c->lock);
}

/* 0 once the channel is empty and its sender has finished. */
static int recv_msg(chan_t *c, msg_t *m)
{
    pthread_mutex_lock(&c->lock);
    while (c->len == 0 && !c->done)
        pthread_cond_wait(&c->not_empty, &c->lock);
    int got = c->len != 0;
    if (got) {
        *m = c->q[c->head];
        c->head = (c->head + 1) % QUEUE;
        c->len--;
        pthread_cond_signal(&c->not_full);
    }
    pthread_mutex_unlock(&c->lock);
    return got;
}

static void sender(uint32_t id)
{
    chan_t *c = &chans[id];
    rng_t rng;
    rng_seed(&rng, seed, (uint64_t)id + 1);
    phase_begin();
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t r = rng_next(&rng);
        uint32_t most = large_every && i % large_every == 0 ? large_max : max_size;
        msg_t m;
        m.buf.n = 1 + scale32((uint32_t)r, most);
        m.str.n = 10 + scale32((uint32_t)(r >> 32), 101);
        m.rec.n = 64;
        m.buf.p = blk_new(m.buf.n);
        m.str.p = blk_new(m.str.n);
        m.rec.p = blk_new(m.rec.n);
        send_msg(c, &m);
    }
    pthread_mutex_lock(&c->lock);
    c->done = 1;
    pthread_cond_signal(&c->not_empty);
    pthread_mutex_unlock(&c->lock);
    phase_end();
}

static void receiver(uint32_t id)
{
    chan_t *c = &chans[id];
    msg_t m;
    phase_begin();
    while (recv_msg(c, &m)) {
        blk_free(m.buf.p, m.buf.n);
        blk_free(m.str.p, m.str.n);
        blk_free(m.rec.p, m.rec.n);
        c->freed++;
    }
    phase_end();
}

static void worker(uint32_t i)
{
    if (i < pairs)
        sender(i);
    else
        receiver(i - pairs);
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 3, "PAIRS ITERS MAX [LARGE_EVERY] [LARGE_MAX] [SEED]");
    pairs = (uint32_t)arg_u64(argc, argv, 1, 8);
    iters = arg_u64(argc, argv, 2, 200000);
    max_size = (uint32_t)arg_u64(argc, argv, 3, 2000);
    large_every = arg_u64(argc, argv, 4, 50);
    large_max = (uint32_t)arg_u64(argc, argv, 5, 300000);
    seed = arg_u64(argc, argv, 6, 1);
    if (pairs < 1 || max_size < 1 || large_max < 1)
        bench_fail("PAIRS, MAX and LARGE_MAX must be at least 1");
    chans = xzalloc64(pairs, sizeof *chans);
    for (uint32_t i = 0; i < pairs; i++) {
        pthread_mutex_init(&chans[i].lock, NULL);
        pthread_cond_init(&chans[i].not_empty, NULL);
        pthread_cond_init(&chans[i].not_full, NULL);
    }
    double secs = run_parallel(2 * pairs, worker, NULL);

    uint64_t freed = 0;
    for (uint32_t i = 0; i < pairs; i++)
        freed += chans[i].freed;
    if (freed != iters * pairs)
        bench_fail("receivers freed %llu messages of %llu", (unsigned long long)freed,
                   (unsigned long long)(iters * pairs));
    res_begin("handoff");
    res_u64("pairs", pairs);
    res_u64("iters", iters);
    res_u64("max", max_size);
    res_u64("large_every", large_every);
    res_u64("large_max", large_max);
    res_rate(secs, 6 * freed);
    res_end();
    free(chans);
    return 0;
}
