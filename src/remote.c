// SPDX-License-Identifier: MIT
/* Cross-thread frees.
 *
 * A block freed by a thread other than its span's owner never touches the
 * owner's span lists (they are the owner's alone, unlocked). Instead the
 * freeing thread collects such blocks in a small outbox per owner heap and
 * hands a whole batch over with one compare-and-swap onto the owner's inbox.
 * The owner takes its inbox with one exchange in its malloc slow path and
 * returns each block to its span. No locks, one atomic per batch.
 *
 * A batch travels as an array of block addresses written into its largest
 * block (the carrier), so that the owner reads a few consecutive lines and
 * then only stores into the blocks, instead of following a link through
 * every block: each link was a cache miss on a line the freeing thread had
 * just written, one after the other (docs/perf.md §21). A batch whose
 * largest block cannot hold the others' addresses (blocks of 16 bytes), and
 * every batch of the checked build (whose free blocks hold a fill pattern),
 * goes as a linked list. In the inbox, a link to a carrier has bit 0 set. */
#include "internal.h"

/* A batch goes when it has 32 blocks or 64 KiB: large blocks must not wait
 * in a thread's outbox by the megabyte. */
#define HZ_OUTBOX_BYTES (64 * 1024)

typedef struct hz_carrier_s {
  hz_block_t block;            /* link to the next batch, free tag */
  uint64_t count;
  hz_block_t *blocks[];        /* the batch's other blocks */
} hz_carrier_t;

/* Addresses a block of `size` bytes can carry. */
static inline size_t carrier_room(size_t size) {
  return HZ_CHECKED || size < sizeof(hz_carrier_t) ? 0 : (size - sizeof(hz_carrier_t)) / sizeof(hz_block_t *);
}

static void outbox_send(hz_outbox_t *o) {
  hz_heap_t *owner = o->owner;
  uint32_t n = o->count;
  hz_block_t *first, *last;
  if (n > 1 && carrier_room(o->carrier_size) >= n - 1) {
    hz_carrier_t *c = (hz_carrier_t *)o->blocks[o->carrier];
    o->blocks[o->carrier] = o->blocks[n - 1];
    c->count = n - 1;
    for (uint32_t i = 0; i < n - 1; i++) c->blocks[i] = o->blocks[i];
    last = &c->block;
    first = (hz_block_t *)((uintptr_t)c | 1);
  } else {
    /* newest first, as when blocks were pushed on a list one by one: the
     * other order made xmalloc-test (blocks of up to 64 bytes) 4-15% slower */
    for (uint32_t i = n - 1; i > 0; i--) {
      o->blocks[i]->next = hz_next_encode(o->blocks[i], o->blocks[i - 1]);
      hz_block_retag(o->blocks[i]);
    }
    first = o->blocks[n - 1];
    last = o->blocks[0];
  }
  hz_block_t *old = atomic_load_explicit(&owner->inbox, memory_order_relaxed);
  do {
    last->next = hz_next_encode(last, old);
    hz_block_retag(last);
  } while (!atomic_compare_exchange_weak_explicit(&owner->inbox, &old, first, memory_order_release,
                                                  memory_order_relaxed));
  o->owner = NULL;
  o->count = o->bytes = o->carrier_size = 0;
}

void hz_remote_flush(hz_heap_t *h) {
  if (h->outbox_used == 0) return;
  for (int i = 0; i < HZ_OUTBOX; i++)
    if (h->outbox[i].owner) outbox_send(&h->outbox[i]);
  h->outbox_used = 0;
}

static void outbox_put(hz_outbox_t *o, hz_block_t *b, uint32_t size) {
  if (size > o->carrier_size) {
    o->carrier = o->count;
    o->carrier_size = size;
  }
  o->blocks[o->count++] = b;
  o->bytes += size;
}

_Atomic uint64_t hz_remote_orphans[HZ_NCLASS + 1];
_Atomic int64_t hz_remote_orphan_large_bytes;

/* A remote free counts as a free from the moment free() is called: here, in
 * the freeing heap (large blocks as large frees too), and the owner counts
 * it back when it arrives, so statistics can subtract the blocks in transit
 * from the blocks its spans still hold. */
void hz_remote_free(hz_heap_t *h, hz_span_t *s, hz_block_t *b) {
  hz_heap_t *owner = s->heap;
  b->tag = hz_block_tag(s, b);
  if (h == &hz_heap_empty) h = hz_heap_get(); /* a thread that only frees */
  if (h == NULL || h == &hz_heap_empty || !h->live) {
    /* the thread is exiting or out of memory: hand the block over alone */
    atomic_fetch_add_explicit(&hz_remote_orphans[s->cls], 1, memory_order_relaxed);
    if (s->kind == HZ_SPAN_LARGE)
      atomic_fetch_sub_explicit(&hz_remote_orphan_large_bytes, s->block_size, memory_order_relaxed);
    hz_outbox_t one = {.owner = owner};
    outbox_put(&one, b, 0);
    outbox_send(&one);
    return;
  }
  hz_heap_enter(h);
  h->n.remote_free[s->cls]++;
  if (s->kind == HZ_SPAN_LARGE) {
    h->n.large_frees++;
    h->n.large_bytes -= s->block_size;
    h->n.remote_large_sent += s->block_size;
  }
  hz_outbox_t *o = &h->outbox[hz_heap_slot(owner) % HZ_OUTBOX];
  if (o->owner != owner) {
    if (o->owner) outbox_send(o);
    else h->outbox_used++;
    o->owner = owner;
  }
  outbox_put(o, b, s->block_size);
  if (o->count >= HZ_OUTBOX_BATCH || o->bytes >= HZ_OUTBOX_BYTES) {
    outbox_send(o);
    h->outbox_used--;
  }
  hz_heap_leave(h);
}

bool hz_remote_drain(hz_heap_t *h) {
  uintptr_t m = (uintptr_t)atomic_exchange_explicit(&h->inbox, NULL, memory_order_acquire);
  if (m == 0) return false;
  while (m != 0) {
    hz_block_t *b = (hz_block_t *)(m & ~(uintptr_t)1);
#if HZ_CHECKED
    hz_checked_link(b, hz_span_of(b)->block_size);
#endif
    if (m & 1) { /* (the carrier goes back last: until then its span holds a block out) */
      hz_carrier_t *c = (hz_carrier_t *)b;
      for (uint64_t i = 0, n = c->count; i < n; i++) hz_heap_block_returned(hz_span_of(c->blocks[i]), c->blocks[i]);
    }
    m = (uintptr_t)hz_next_decode(b, b->next);
    hz_heap_block_returned(hz_span_of(b), b);
  }
  return true;
}
