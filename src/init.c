// SPDX-License-Identifier: MIT
/* Process start-up and fork.
 *
 * Start-up runs on the first call of any entry point, which may be before
 * main, from a constructor, from a .preinit_array function, or from inside
 * libc while it holds its own locks. So it takes no lock: the first thread
 * claims it with one compare-and-swap; a call from the same thread while it
 * runs (something in it allocated) is served at once, with what is already
 * set up (all that malloc needs is set before the first call that may
 * allocate); another thread waits, holding nothing, until it is done.
 * Nothing before the last two steps allocates: the page size comes from
 * the auxiliary vector and the CPU count from sched_getaffinity, not
 * sysconf (older glibcs count CPUs with opendir, which mallocs).
 *
 * fork: no handler runs in the parent, so malloc never waits for a fork in
 * progress and a fork never waits for malloc (glibc's stdio and fork locks
 * would otherwise close a cycle, and a fork from a signal handler that
 * interrupted malloc would wait for itself). The child, single-threaded,
 * checks each allocator lock instead: one held by a thread that did not
 * survive the fork is freed, and what it protected is rebuilt or discarded
 * (an arena stops being used, the huge cache is dropped, the heap list is
 * rebuilt). The heaps of the lost threads become abandoned, to be adopted by
 * the child's next threads. */
#define _GNU_SOURCE
#include "internal.h"

uintptr_t hz_key;
_Atomic int hz_init_state; /* 0 not started, 1 running, HZ_INIT_DONE */
#ifdef _WIN32
#define hz_init_running_here (*hz_init_running_win_slot()) /* os_windows.c */
#else
static __thread bool hz_init_running_here;
__thread char hz_lock_me;
#endif

static void fork_child(void);

void hz_init_slow(void) {
  if (hz_init_running_here) return; /* re-entered from inside start-up */
  int expected = 0;
  if (!atomic_compare_exchange_strong_explicit(&hz_init_state, &expected, 1, memory_order_acquire,
                                               memory_order_acquire)) {
    while (atomic_load_explicit(&hz_init_state, memory_order_acquire) != HZ_INIT_DONE) hz_os_yield();
    return;
  }
  hz_init_running_here = true;
  /* Nothing here allocates... */
  hz_os_init();
  if (hz_key == 0) hz_key = (uintptr_t)hz_os_random(); /* kept if a fork interrupted start-up */
  hz_heap_init();
  hz_options_init();
  hz_heap_page_size_init();
  hz_arena_init();
  /* ...until here: glibc may allocate in these two (served by the re-entry
   * above). */
  hz_thread_key_init();
  static bool atfork_registered;
  if (!atfork_registered) {
    atfork_registered = true;
    hz_os_atfork_child(fork_child);
  }
  atomic_store_explicit(&hz_init_state, HZ_INIT_DONE, memory_order_release);
  hz_init_running_here = false;
}

static void fork_child(void) {
  /* A thread lost in the fork was starting the process up: start again. */
  if (atomic_load_explicit(&hz_init_state, memory_order_relaxed) == 1 && !hz_init_running_here)
    atomic_store_explicit(&hz_init_state, 0, memory_order_relaxed);
  hz_arena_fork_child();
  hz_huge_fork_child();
  hz_heap_fork_child();
  hz_purge_fork_child();
}

/* The library's DT_FINI (Makefile: -fini): the crt's _fini does nothing but
 * sits in .fini, after the cold code at the end of the text, and calling it
 * at exit mapped that window (docs/perf.md §57). Destructors run from
 * .fini_array, as before. */
void hz_lib_fini(void) {}
