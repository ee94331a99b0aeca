// SPDX-License-Identifier: MIT
/* Returning memory over time: the purge thread and hz_collect.
 *
 * This layer drives the ones below it (arenas, huge cache, abandoned heaps);
 * none of them calls up here. When memory starts waiting for its purge
 * delay, arena.c and large.c only raise hz_purge_pending. The thread is
 * started from a safe point (hz_purge_poll in alloc.c's slow paths, after
 * the work is done): pthread_create allocates the new thread's TLS, so it
 * must never run with an allocator lock held or a heap half changed, and a
 * nested malloc from inside it finds the thread already starting. Nor, in
 * a threaded program, from the free of a small, huge or sampled block, or
 * of a large one that an earlier owner of the heap allocated: glibc frees
 * a joined thread's TLS (its vector; a dlopen'ed library's __thread data)
 * while it holds the lock pthread_create takes (tests/threads/join,
 * join_tls, join_adopted; alloc.c); while the
 * thread is not running, such frees purge what waits over HZ_PURGE_BUDGET
 * themselves (arena.c). errno is kept: this runs inside malloc and free.
 *
 * The thread wakes every purge delay and returns what has waited long
 * enough. So a program that frees and then idles gets its memory back
 * without calling the allocator again. Since frees cannot start it, it is
 * started at a threaded program's first safe points, whether memory waits
 * or not, and it stays while owners are active and HZ_PURGE_LINGER_MS after
 * (a thread that allocated for a while and then freed it all before idling
 * kept it all: the thread had gone, nothing having waited, docs/perf.md
 * §61); it then leaves HZ_PURGE_RESTART for the next safe point to start it
 * again. It leaves at once when no thread has a heap: a program whose last
 * thread ends (main calling pthread_exit, a child forked from a thread) is
 * kept alive by it for one purge delay at most. */
#include "internal.h"

enum { PURGE_IDLE, PURGE_RUNNING };
#define hz_purge_state hz_purge_running /* (arena.c reads it: HZ_PURGE_BUDGET) */
static _Atomic uint64_t hz_purge_retry_ms; /* after a failed start */
static _Atomic bool purge_cannot_sleep;     /* the OS refused the thread its sleep: no thread */
_Atomic uint64_t hz_purge_epoch;

#define HZ_PURGE_LINGER_MS 1000

/* Nothing to do at this look, since *quiet (ms; 0: from now): stay for the
 * frees yet to come, unless no thread has a heap any more (the thread count
 * in /proc still has a main thread that ended with pthread_exit). */
static bool purge_linger(uint64_t *quiet) {
  uint64_t now = hz_os_now_ms();
  if (*quiet == 0) *quiet = now;
  return now - *quiet < HZ_PURGE_LINGER_MS && hz_heaps_live();
}

static void *purge_thread_main(void *arg) {
  (void)arg;
  static hz_hot_const const char name[] = "hakozuna-purge";
  hz_os_thread_name(name);
  bool looked_again = false;
  uint64_t quiet = 0;
  for (;;) {
    long delay = hz_opt(HZ_OPTION_PURGE_DELAY);
    atomic_store_explicit(&hz_purge_pending, 0, memory_order_seq_cst);
    if (delay > 0 && !hz_os_sleep_ms(delay)) { /* (a sandbox: purge_cannot_sleep) */
      atomic_store_explicit(&purge_cannot_sleep, true, memory_order_relaxed);
      atomic_store_explicit(&hz_purge_pending, 1, memory_order_relaxed); /* (for the next safe point) */
      atomic_store_explicit(&hz_purge_state, PURGE_IDLE, memory_order_seq_cst);
      hz_verbose("the purge thread cannot sleep (the system call is refused); purging from allocating threads only");
      return NULL;
    }
    hz_arena_purge(false);
    bool huge_left = hz_huge_purge(false);
    /* (all at once when no thread has a heap: the process is ending, and this
     * thread must not keep it alive for their delay) */
    bool exited_left = hz_heaps_collect_abandoned(!hz_heaps_live());
    atomic_fetch_add_explicit(&hz_purge_epoch, 1, memory_order_relaxed);
    hz_heaps_trim_caches();
    /* Heaps are trimmed once idle for a whole delay: when nothing else is
     * left, one more look if some owner was active at this one. */
    bool again = false, busy = hz_trim_idle(&again), active = busy && !looked_again;
    bool left = hz_arena_dirty() || huge_left || exited_left || hz_heaps_cache_left() || again;
    looked_again = !left && active;
    if (busy || left) quiet = 0;
    if (delay > 0 && (left || active || purge_linger(&quiet))) continue;
    /* Memory that began to wait after the checks above was left to us by
     * its freer (it saw us running): look once more after going idle.
     * Else the next safe point starts us again. */
    atomic_store_explicit(&hz_purge_state, PURGE_IDLE, memory_order_seq_cst);
    int none = 0;
    if (atomic_compare_exchange_strong(&hz_purge_pending, &none, HZ_PURGE_RESTART)) return NULL;
    int idle = PURGE_IDLE;
    if (!atomic_compare_exchange_strong(&hz_purge_state, &idle, PURGE_RUNNING)) return NULL;
    quiet = 0;
  }
}

/* Without the thread, safe points return what has waited long enough
 * themselves, at most once a purge delay. (The thread's other work -- idle
 * heaps, exited threads' heaps -- has no subject in a program that never
 * started a thread.) */
static void purge_here(long delay) {
  static _Atomic uint64_t next_ms;
  uint64_t now = hz_os_now_ms(), next = atomic_load_explicit(&next_ms, memory_order_relaxed);
  if (now < next) return;
  atomic_store_explicit(&next_ms, now + (uint64_t)delay, memory_order_relaxed);
  atomic_store_explicit(&hz_purge_pending, 0, memory_order_seq_cst);
  bool left = hz_heaps_collect_abandoned(false); /* (before the epoch moves: a heap abandoned since the last look waits) */
  /* (the epoch counts delays: a program that idled made no look) */
  uint64_t delays = next != 0 ? (now - next) / (uint64_t)delay + 1 : 1;
  atomic_fetch_add_explicit(&hz_purge_epoch, delays, memory_order_relaxed);
  hz_heaps_trim_caches(); /* (their spans wait in the pool one delay more) */
  hz_arena_purge(false);
  left |= hz_huge_purge(false);
  if (left || hz_arena_dirty() || hz_heaps_cache_left()) atomic_store_explicit(&hz_purge_pending, 1, memory_order_relaxed);
}

_Atomic unsigned hz_purge_skip;

void hz_purge_start(void) {
  long delay = hz_opt(HZ_OPTION_PURGE_DELAY), mode = hz_opt(HZ_OPTION_PURGE_THREAD);
  if (delay <= 0) {
    atomic_store_explicit(&hz_purge_pending, 0, memory_order_relaxed);
    return;
  }
  /* A thread of ours would make a single-threaded program multi-threaded
   * for good as glibc sees it: fork then takes glibc's atfork lock, and a
   * fork from a signal handler that interrupted fork hung (glibc's
   * tst-mallocfork2); unshare(CLONE_NEWUSER) fails with EINVAL while the
   * thread runs; /proc shows two threads. */
  if (mode == 0 || (mode == 1 && hz_thread_single()) || atomic_load_explicit(&purge_cannot_sleep, memory_order_relaxed)) {
    /* (the clock at every 8th safe point only: read at each, it cost 3
     * instructions a malloc+free pair of 16-32768 bytes. The skip spares
     * the others the call: 35 instructions of a large malloc+free's 363,
     * docs/perf.md §37. A new thread's heap clears it: the program may
     * have become threaded, and its purge thread starts at the next poll.) */
    atomic_store_explicit(&hz_purge_skip, 7, memory_order_relaxed);
    purge_here(delay);
    return;
  }
  if (atomic_load_explicit(&hz_purge_state, memory_order_relaxed) != PURGE_IDLE) return;
  uint64_t retry = atomic_load_explicit(&hz_purge_retry_ms, memory_order_relaxed);
  if (retry != 0 && hz_os_now_ms() < retry) return;
  int idle = PURGE_IDLE;
  if (!atomic_compare_exchange_strong(&hz_purge_state, &idle, PURGE_RUNNING)) return;
  int rc = hz_os_thread_start(purge_thread_main);
  if (rc == 0) return;
  atomic_store_explicit(&hz_purge_retry_ms, hz_os_now_ms() + 1000, memory_order_relaxed);
  atomic_store_explicit(&hz_purge_state, PURGE_IDLE, memory_order_seq_cst);
  hz_verbose("cannot start the purge thread (error %d); purging from allocating threads only", rc);
}

/* fork (init.c): threads do not survive it; the child starts its own. */
void hz_purge_fork_child(void) {
  atomic_store_explicit(&hz_purge_state, PURGE_IDLE, memory_order_relaxed);
  atomic_store_explicit(&hz_purge_retry_ms, 0, memory_order_relaxed);
  /* (the child has one thread, though glibc still calls it threaded: its
   * purge thread waits for memory that waits, or for a thread of its own) */
  int restart = HZ_PURGE_RESTART;
  atomic_compare_exchange_strong(&hz_purge_pending, &restart, 0);
}

static void collect(int force, bool trim) {
  hz_init();
  hz_heap_t *h = hz_tls_heap;
  if (h != &hz_heap_empty && h->live) {
    if (trim) hz_heap_trim(h);
    else hz_heap_collect(h, force != 0);
  }
  hz_heaps_collect_abandoned(force != 0);
  hz_huge_purge(true);
  hz_arena_purge(true);
  hz_purge_poll();
}

HZ_EXPORT void hz_collect(int force) { collect(force, false); }
void hz_purge_trim(void) { collect(1, true); }
