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
 * goes as a linked list.
 *
 * A batch whose blocks all lie in one span -- the usual case: a consumer
 * frees a producer's blocks in the order they were made -- is a run: its
 * list, already linked and tagged as the span's own list would be, goes
 * onto the span whole, and the owner touches two of its blocks instead of
 * every one (xmalloc-test's 64-byte blocks, too small to carry the others'
 * addresses, were a chain of dependent cache misses: docs/perf.md §66). Its
 * first block holds the count and the last block. In the inbox, a link to a
 * carrier has bit 0 set, a link to a run bit 1. */
#include "internal.h"

enum { INBOX_CARRIER = 1, INBOX_RUN = 2, INBOX_BITS = 3 };

typedef struct hz_carrier_s {
  hz_block_t block;            /* link to the next batch, free tag */
  uint64_t count;
  hz_block_t *blocks[];        /* the batch's other blocks */
} hz_carrier_t;

typedef struct hz_run_s {
  hz_block_t block;            /* link to the run's next block, free tag */
  uint64_t count;              /* blocks in the run, this one included */
  hz_block_t *last;            /* whose link is the next batch's */
} hz_run_t;

/* Addresses a block of `size` bytes can carry. */
static inline size_t carrier_room(size_t size) {
  return HZ_CHECKED || size < sizeof(hz_carrier_t) ? 0 : (size - sizeof(hz_carrier_t)) / sizeof(hz_block_t *);
}

/* Whether the n blocks of o are a run: blocks of at least a run's header,
 * all in the span of the first. (Blocks in transit keep their spans.) */
static bool outbox_is_run(const hz_outbox_t *o, uint32_t n) {
  if (HZ_CHECKED || n < 2 || o->carrier_size < sizeof(hz_run_t)) return false;
  const hz_span_t *s = hz_span_of(o->blocks[0]);
  if (hz_span_push_to(s) != s) return false;
  uintptr_t base = hz_span_base(s), len = (uintptr_t)s->slice_count * HZ_SLICE_SIZE;
  for (uint32_t i = 1; i < n; i++)
    if ((uintptr_t)o->blocks[i] - base >= len) return false;
  return true;
}

static void outbox_send(hz_heap_t *h, hz_outbox_t *o) {
  hz_heap_t *owner = o->owner;
  uint32_t n = o->count;
  hz_block_t *first, *last;
  if (outbox_is_run(o, n)) {
    /* Relinked oldest first (lines still in this cache), so that the
     * owner's mallocs hand the blocks out in the order it made them, as a
     * fresh span's: xmalloc-test's 64-byte blocks ran 2.5-4% faster than
     * newest first (docs/perf.md §66). */
    for (uint32_t i = 0; i + 1 < n; i++) o->blocks[i]->next = hz_next_encode(o->blocks[i], o->blocks[i + 1]);
    hz_run_t *r = (hz_run_t *)o->blocks[0];
    r->count = n;
    r->last = last = o->blocks[n - 1];
    first = (hz_block_t *)((uintptr_t)r | INBOX_RUN);
  } else if (n > 1 && carrier_room(o->carrier_size) >= n - 1) {
    hz_carrier_t *c = (hz_carrier_t *)o->blocks[o->carrier];
    o->blocks[o->carrier] = o->blocks[n - 1];
    c->count = n - 1;
    for (uint32_t i = 0; i < n - 1; i++) c->blocks[i] = o->blocks[i];
    last = &c->block;
    first = (hz_block_t *)((uintptr_t)c | INBOX_CARRIER);
  } else {
    /* newest first, as when blocks were pushed on a list one by one (the
     * other order made xmalloc-test, blocks of up to 64 bytes, 4-15%
     * slower): each block was linked to the one before as it came */
    first = o->blocks[n - 1];
    last = o->blocks[0];
  }
  hz_block_t *old = atomic_load_explicit(&owner->inbox, memory_order_relaxed);
  do {
    last->next = hz_next_encode(last, old);
    hz_block_retag(last);
  } while (!atomic_compare_exchange_weak_explicit(&owner->inbox, &old, first, memory_order_release,
                                                  memory_order_relaxed));
  /* How long blocks have waited there (stash.c, hz_stash_adopt): the send
   * that finds the inbox empty starts the clock; the owner's take ends it. */
  if (old == NULL) {
    __atomic_store_n(&owner->inbox_since_ms, hz_os_now_ms(), __ATOMIC_RELAXED);
    if (h != NULL) h->behind[o - h->outbox] = NULL;
  } else if (h != NULL) {
    bool behind = hz_os_now_ms() - __atomic_load_n(&owner->inbox_since_ms, __ATOMIC_RELAXED) >= HZ_BEHIND_MS;
    h->behind[o - h->outbox] = behind ? owner : NULL;
  }
  o->owner = NULL;
  o->count = o->bytes = o->carrier_size = 0;
  /* An owner that idles would keep the batch: the purge thread looks
   * (hz_remote_trim). (Read first: the flag's line stays shared.) */
  if (!atomic_load_explicit(&hz_purge_pending, memory_order_relaxed))
    atomic_store_explicit(&hz_purge_pending, 1, memory_order_seq_cst);
}

void hz_remote_flush(hz_heap_t *h) {
  if (h->outbox_used == 0) return;
  for (int i = 0; i < HZ_OUTBOX; i++)
    if (h->outbox[i].owner) outbox_send(h, &h->outbox[i]);
  h->outbox_used = 0;
}

static void outbox_put(hz_outbox_t *o, hz_block_t *b, uint32_t size) {
  if (size > o->carrier_size) {
    o->carrier = o->count;
    o->carrier_size = size;
  }
  if (o->count != 0) {
    b->next = hz_next_encode(b, o->blocks[o->count - 1]);
    hz_block_retag(b);
  }
  o->blocks[o->count] = b;
  __atomic_store_n(&o->count, o->count + 1, __ATOMIC_RELEASE); /* (see hz_remote_put) */
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
    outbox_send(NULL, &one);
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
    if (o->owner) outbox_send(h, o);
    else h->outbox_used++;
    o->owner = owner;
  }
  outbox_put(o, b, s->block_size);
  if (o->count >= HZ_OUTBOX_BATCH || o->bytes >= HZ_OUTBOX_BYTES) {
    outbox_send(h, o);
    h->outbox_used--;
  }
  hz_heap_leave(h);
}

/* Calls fn on every block of the inbox chain from m: a carrier after the
 * blocks it carries, and after its link was read (fn may reuse the block).
 * A run goes to run whole if it takes it (true; it moves m on), else block
 * by block as a list. */
static inline __attribute__((always_inline)) void inbox_walk(uintptr_t m, void (*fn)(void *, hz_block_t *),
                                                             bool (*run)(void *, hz_run_t *, uintptr_t *),
                                                             void *ctx) {
  while (m != 0) {
    hz_block_t *b = (hz_block_t *)(m & ~(uintptr_t)INBOX_BITS);
    if ((m & INBOX_RUN) && run != NULL && run(ctx, (hz_run_t *)b, &m)) continue;
#if HZ_CHECKED
    hz_checked_link(b, hz_span_of(b)->block_size);
#endif
    if (m & INBOX_CARRIER) {
      hz_carrier_t *c = (hz_carrier_t *)b;
      for (uint64_t i = 0, n = c->count; i < n; i++) fn(ctx, c->blocks[i]);
    }
    m = (uintptr_t)hz_next_decode(b, b->next);
    fn(ctx, b);
  }
}

static void drain_one(void *ctx, hz_block_t *b) {
  (void)ctx;
  hz_heap_block_drained(hz_span_of(b), b);
}

/* (a stashed class's blocks go onto its stash one by one) */
static bool drain_run(void *ctx, hz_run_t *r, uintptr_t *m) {
  (void)ctx;
  hz_span_t *s = hz_span_of(r);
  if (hz_span_push_to(s) != s) return false;
  hz_block_t *last = r->last;
  *m = (uintptr_t)hz_next_decode(last, last->next);
  hz_heap_blocks_returned(s, &r->block, last, (uint32_t)r->count);
  return true;
}

bool hz_remote_drain(hz_heap_t *h) {
  uintptr_t m = (uintptr_t)atomic_exchange_explicit(&h->inbox, NULL, memory_order_acquire);
  if (m == 0) return false;
  inbox_walk(m, drain_one, drain_run, NULL);
  return true;
}

/* ---- an idle owner's inbox (the purge thread's idle trim, heap.c) ----
 * Blocks freed by other threads wait in the inbox until the owner's next
 * slow path; an owner that idles makes none, and they stayed resident
 * however long it idled. The trim, holding the heap's claim (the owner's
 * slow paths wait), takes the inbox and returns the blocks of every span
 * that has no other block out: the owner holds no live block of such a
 * span, so its free fast path cannot touch it (a second free of an inbox
 * block stops at its free tag), and the span is not a current one, the
 * only kind its malloc fast path pops. Emptied spans go the usual way
 * (spare, span cache, pool), where the trim returns their pages. The other
 * blocks go back into the inbox as a list, and the pages inside them but
 * the first (which holds the link) go back too: the inbox is the trim's
 * while it holds the claim. (Only blocks that came since the last trim:
 * those after the list it left were purged then.) */
enum { TRIM_DECIDED = 1u << 31, TRIM_ADOPT = 1u << 30, TRIM_COUNT = TRIM_ADOPT - 1 };

typedef struct {
  hz_heap_t *heap;
  hz_block_t *keep, *keep_last;
  hz_block_t *seen; /* the list the last trim left, the chain's tail */
  bool fresh;       /* before it */
  size_t adopted;
} trim_ctx_t;

static void trim_count(void *ctx, hz_block_t *b) {
  (void)ctx;
  hz_span_of(b)->trim_inbox++;
}

static void trim_one(void *ctx, hz_block_t *b) {
  trim_ctx_t *t = ctx;
  hz_span_t *s = hz_span_of(b);
  if (b == t->seen) t->fresh = false;
  uint32_t n = s->trim_inbox;
  if (!(n & TRIM_DECIDED)) {
    bool current = s->kind == HZ_SPAN_SMALL && t->heap->cur[s->cls] == s, alone = false;
    /* (a current span's count is the malloc fast path's, not to be read) */
    if (s->heap == t->heap && !current) {
      /* (hz_span_used's sum, its count read with acquire: the owner may
       * be freeing into the span, and its push is then seen whole, see
       * hz_span_push) */
      uint32_t used = (uint32_t)(__atomic_load_n(&s->uses, __ATOMIC_ACQUIRE) + 1 + (s->unlisted ? HZ_UNLISTED_BIAS : 0));
      /* A span leaves its list full, and any block back relists it; so an
       * unlisted span with a block back is one whose owner has just freed
       * into it and waits, in the slow path's entry, to relist it: the
       * span is the owner's again then, not to be retired under it (it
       * was: the span went into the cache and back onto its class list,
       * and the cache list became a circle). */
      bool pending = s->unlisted && used != s->capacity;
      alone = !pending && (n & TRIM_COUNT) == used;
    }
    n |= TRIM_DECIDED | (alone ? TRIM_ADOPT : 0);
  }
  n--; /* (the count: zero again once the span's last block went by) */
  s->trim_inbox = (n & TRIM_COUNT) ? n : 0;
  if (n & TRIM_ADOPT) {
    hz_heap_block_returned(s, b); /* (may retire the span: its count is reset first) */
    t->adopted++;
    return;
  }
  b->next = hz_next_encode(b, t->keep);
  hz_block_retag(b);
  if (t->keep == NULL) t->keep_last = b;
  t->keep = b;
  if (t->fresh) hz_heap_block_purge(b, s->block_size); /* (a carrier's list was read: its blocks went first) */
}

/* True if blocks were returned. Not in the checked build, whose drain
 * verifies fills that the trim would have to keep too. */
bool hz_remote_trim(hz_heap_t *h) {
  if (HZ_CHECKED) return false;
  uintptr_t m = (uintptr_t)atomic_load_explicit(&h->inbox, memory_order_relaxed);
  if (m == 0 || m == (uintptr_t)h->trim_inbox) return false;
  m = (uintptr_t)atomic_exchange_explicit(&h->inbox, NULL, memory_order_acquire);
  trim_ctx_t t = {.heap = h, .seen = h->trim_inbox, .fresh = true};
  inbox_walk(m, trim_count, NULL, NULL);
  inbox_walk(m, trim_one, NULL, &t);
  if (t.keep != NULL) {
    hz_block_t *old = atomic_load_explicit(&h->inbox, memory_order_relaxed);
    do {
      t.keep_last->next = hz_next_encode(t.keep_last, old);
      hz_block_retag(t.keep_last);
    } while (!atomic_compare_exchange_weak_explicit(&h->inbox, &old, t.keep, memory_order_release,
                                                    memory_order_relaxed));
  }
  h->trim_inbox = t.keep; /* (what the next look finds unless more came) */
  return t.adopted != 0;
}
