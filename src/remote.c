// SPDX-License-Identifier: MIT
/* Cross-thread frees.
 *
 * A block freed by a thread other than its span's owner never touches the
 * owner's span lists (they are the owner's alone, unlocked). Instead the
 * freeing thread collects such blocks in a small outbox per owner heap and
 * hands a whole batch over with one compare-and-swap onto the owner's inbox.
 * The owner takes its inbox with one exchange in its malloc slow path and
 * returns each block to its span. No locks, one atomic per batch. */
#include "internal.h"

/* A batch goes when it has 32 blocks or 64 KiB: large blocks must not wait
 * in a thread's outbox by the megabyte. */
#define HZ_OUTBOX_BATCH 32
#define HZ_OUTBOX_BYTES (64 * 1024)

static void outbox_send(hz_outbox_t *o) {
  hz_heap_t *owner = o->owner;
  hz_block_t *old = atomic_load_explicit(&owner->inbox, memory_order_relaxed);
  do {
    o->tail->next = hz_next_encode(o->tail, old);
    hz_block_retag(o->tail);
  } while (!atomic_compare_exchange_weak_explicit(&owner->inbox, &old, o->head, memory_order_release,
                                                  memory_order_relaxed));
  o->owner = NULL;
  o->head = o->tail = NULL;
  o->count = o->bytes = 0;
}

void hz_remote_flush(hz_heap_t *h) {
  if (h->outbox_used == 0) return;
  for (int i = 0; i < HZ_OUTBOX; i++)
    if (h->outbox[i].owner) outbox_send(&h->outbox[i]);
  h->outbox_used = 0;
}

_Atomic uint64_t hz_remote_orphans[HZ_NCLASS + 1];
_Atomic int64_t hz_remote_orphan_large_bytes;

/* A remote free counts as a free from the moment free() is called: here, in
 * the freeing heap (large blocks as large frees too), and the owner counts
 * it back when it arrives, so statistics can subtract the blocks in transit
 * from the blocks its spans still hold. */
void hz_remote_free(hz_heap_t *h, hz_span_t *s, hz_block_t *b) {
  hz_heap_t *owner = s->heap;
  b->tag = hz_free_tag(b);
  if (h == &hz_heap_empty) h = hz_heap_get(); /* a thread that only frees */
  if (h == NULL || h == &hz_heap_empty || !h->live) {
    /* the thread is exiting or out of memory: hand the block over alone */
    atomic_fetch_add_explicit(&hz_remote_orphans[s->cls], 1, memory_order_relaxed);
    if (s->kind == HZ_SPAN_LARGE)
      atomic_fetch_sub_explicit(&hz_remote_orphan_large_bytes, s->block_size, memory_order_relaxed);
    hz_outbox_t one = {owner, b, b, 1, 0};
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
    o->tail = b;
  }
  b->next = hz_next_encode(b, o->head);
  hz_block_retag(b);
  o->head = b;
  o->bytes += s->block_size;
  if (++o->count >= HZ_OUTBOX_BATCH || o->bytes >= HZ_OUTBOX_BYTES) {
    outbox_send(o);
    h->outbox_used--;
  }
  hz_heap_leave(h);
}

bool hz_remote_drain(hz_heap_t *h) {
  hz_block_t *b = atomic_exchange_explicit(&h->inbox, NULL, memory_order_acquire);
  if (b == NULL) return false;
  while (b != NULL) {
#if HZ_CHECKED
    hz_checked_link(b, hz_span_of(b)->block_size);
#endif
    hz_block_t *next = hz_next_decode(b, b->next);
    hz_heap_block_returned(hz_span_of(b), b);
    b = next;
  }
  return true;
}
