// SPDX-License-Identifier: MIT
/* prodcons THREADS ITERS MIN MAX [BATCH] [SEED]
 *
 * xmalloc-style producer/consumer: THREADS/2 producer threads only allocate
 * (and write), the others only free (after checking). Producers hand blocks
 * over in batches of BATCH through a bounded queue. ITERS blocks per
 * producer; with THREADS = 1 one producer and one consumer still run. An op is
 * one malloc or one free. */
#include "bench.h"

#include <stdio.h>

typedef struct batch {
    struct batch *next;
    uint32_t n;
    slot_t s[];
} batch_t;

#define QUEUE_MAX 64                      /* batches in flight before producers wait */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER, not_full = PTHREAD_COND_INITIALIZER;
static batch_t *q_head, *q_tail;
static uint32_t q_len, producers_left;
static uint64_t iters, batch_size, seed;
static size_dist_t dist;
static uint32_t n_prod;
static uint64_t *freed;                   /* per consumer, 8 apart: one cache line each */

static batch_t *batch_new(void)
{
    batch_t *b = xmalloc(sizeof *b + sizeof(slot_t) * batch_size);
    b->next = NULL;
    b->n = 0;
    return b;
}

static void enqueue(batch_t *b)
{
    pthread_mutex_lock(&lock);
    while (q_len >= QUEUE_MAX)
        pthread_cond_wait(&not_full, &lock);
    if (q_tail)
        q_tail->next = b;
    else
        q_head = b;
    q_tail = b;
    q_len++;
    pthread_cond_signal(&not_empty);
    pthread_mutex_unlock(&lock);
}

/* NULL once the queue is empty and every producer has finished. */
static batch_t *dequeue(void)
{
    pthread_mutex_lock(&lock);
    while (!q_head && producers_left > 0)
        pthread_cond_wait(&not_empty, &lock);
    batch_t *b = q_head;
    if (b) {
        q_head = b->next;
        if (!q_head)
            q_tail = NULL;
        q_len--;
        pthread_cond_signal(&not_full);
    }
    pthread_mutex_unlock(&lock);
    return b;
}

static void producer(uint32_t id)
{
    rng_t rng;
    rng_seed(&rng, seed, (uint64_t)id + 1);
    phase_begin();
    batch_t *b = batch_new();
    for (uint64_t i = 0; i < iters; i++) {
        slot_t *s = &b->s[b->n++];
        s->n = dist_size(&dist, (uint32_t)rng_next(&rng));
        s->p = blk_new(s->n);
        if (b->n == batch_size) {
            enqueue(b);
            b = batch_new();
        }
    }
    if (b->n)
        enqueue(b);
    else
        free(b);
    pthread_mutex_lock(&lock);
    if (--producers_left == 0)
        pthread_cond_broadcast(&not_empty);
    pthread_mutex_unlock(&lock);
    phase_end();
}

static void consumer(uint32_t id)
{
    phase_begin();
    batch_t *b;
    while ((b = dequeue()) != NULL) {
        for (uint32_t i = 0; i < b->n; i++)
            blk_free(b->s[i].p, b->s[i].n);
        freed[id * 8] += b->n;
        free(b);
    }
    phase_end();
}

static void worker(uint32_t i)
{
    if (i < n_prod)
        producer(i);
    else
        consumer(i - n_prod);
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 4, "THREADS ITERS MIN MAX [BATCH] [SEED]");
    uint32_t n_threads = (uint32_t)arg_u64(argc, argv, 1, 2);
    iters = arg_u64(argc, argv, 2, 1000000);
    dist = arg_dist(argc, argv, 3, 16, 2048);
    batch_size = arg_u64(argc, argv, 5, 256);
    seed = arg_u64(argc, argv, 6, 1);
    if (batch_size < 1)
        bench_fail("BATCH must be at least 1");
    n_prod = n_threads / 2 ? n_threads / 2 : 1;
    uint32_t n_cons = n_threads > n_prod ? n_threads - n_prod : 1;
    producers_left = n_prod;
    freed = xzalloc64(n_cons, 64);
    double secs = run_parallel(n_prod + n_cons, worker, NULL);

    uint64_t total_freed = 0;
    for (uint32_t i = 0; i < n_cons; i++)
        total_freed += freed[i * 8];
    if (total_freed != iters * n_prod)
        bench_fail("consumers freed %llu blocks of %llu", (unsigned long long)total_freed,
                   (unsigned long long)(iters * n_prod));
    uint64_t ops = 2 * total_freed;

    res_begin("prodcons");
    res_u64("threads", n_prod + n_cons);
    res_u64("producers", n_prod);
    res_u64("consumers", n_cons);
    res_u64("iters", iters);
    res_dist(&dist);
    res_u64("batch", batch_size);
    res_rate(secs, ops);
    res_end();
    free(freed);
    return 0;
}
