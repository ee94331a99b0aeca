// SPDX-License-Identifier: MIT
/* The sampling heap profiler (HAKOZUNA_PROFILE) and leak report (HAKOZUNA_LEAKS).
 *
 * Sampling: every byte allocated is a sample point with probability
 * 1/rate, so the gaps between sampled bytes are exponentially distributed
 * and a block of s bytes is sampled with probability p = 1 - e^(-s/rate);
 * it then stands for 1/p blocks and n/p bytes (n the request), which makes
 * every estimate unbiased. Small blocks are decided per size class: the
 * malloc fast path already counted each class's mallocs, and now counts
 * them down instead (sample_left, one branch more); a class of block size s
 * reaches zero after floor(Exp(rate) / s) mallocs, the same law. (When
 * that malloc is the one that refills the class's span, which has no room
 * for the check, the sample moves to the thread's next malloc of the class.)
 * Large and huge mallocs, slow paths anyway, count bytes down per thread.
 *
 * A sampled block is served as a large span of its own (at least one 32
 * KiB slice) whose descriptor points at the sample's record. Its free needs
 * no lookup: a large span's only block always reaches the slow path when it
 * is freed (hz_heap_free_slow locally, free_remote from another thread),
 * which checks the descriptor. Sampled huge blocks, rare, are kept in a
 * list that huge frees search only while one is live.
 *
 * Stacks come from libgcc's unwinder (_Unwind_Backtrace, the DWARF call
 * frame tables every Debian object carries: right without frame pointers),
 * linked into the library (static libgcc, hidden), so a sample never calls
 * dlopen or dlsym. It runs
 * before the profile lock is taken and under a per-thread guard: anything it
 * allocates is served unsampled. Stacks are stored once (hash table), as
 * addresses; pprof.c names them when a profile is written. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <unwind.h>

/* The countdown while sampling is off: every 65536 mallocs of a class a
 * thread looks whether profiling was switched on (hz_option_set). */
#define PROF_IDLE ((int64_t)1 << 16)
#define PROF_BUCKETS 4096

typedef struct hz_prof_stack_s {
  struct hz_prof_stack_s *next, *next_all;
  uint64_t hash;
  double alloc_n, alloc_b, live_n, live_b, live_s;
  uint32_t depth;
  uintptr_t pc[];
} hz_prof_stack_t;

typedef struct hz_prof_rec_s {
  hz_prof_stack_t *stack;
  double n, b;                /* blocks and bytes this sample stands for */
  const void *addr;           /* huge blocks only */
  struct hz_prof_rec_s *next; /* huge list or free records */
  uint32_t gen;               /* prof_gen when recorded */
} hz_prof_rec_t;

_Atomic long hz_profile_huge_live;
static hz_lock_t prof_lock = HZ_LOCK_INIT;
hz_cold_bss hz_prof_stack_t *hz_profile_buckets[PROF_BUCKETS];
static hz_prof_stack_t *prof_stacks; /* all, newest first */
static size_t prof_nstacks;
static hz_prof_rec_t *prof_recs_free, *prof_huge;
static char *prof_bump, *prof_bump_end;
static _Atomic uint32_t prof_thread_seq;
static uintptr_t prof_self_lo, prof_self_hi; /* our code, when a shared object */
static _Atomic int prof_self_known;
/* A thread lost in a fork may have held the lock halfway through an update:
 * the child then starts its tables afresh (the old ones may be torn) and
 * forgets the records made before: their generation is not prof_gen. */
static uint32_t prof_gen;

static __thread int prof_busy;       /* inside the profiler: don't sample */
static __thread uint64_t prof_rng;
static __thread int64_t prof_big_left;
static __thread long prof_big_rate;

/* ---- arithmetic without libm (a static link would need -lm) ---- */
static const double LN2 = 0.69314718055994530942;

static double prof_log(double x) { /* x > 0 */
  union { double d; uint64_t u; } v = {x};
  int e = (int)((v.u >> 52) & 0x7ff) - 1023;
  v.u = (v.u & ~(0x7ffull << 52)) | (1023ull << 52); /* mantissa in [1, 2) */
  double m = v.d;
  if (m > 1.41421356237) { m *= 0.5; e++; }
  double t = (m - 1) / (m + 1), t2 = t * t;
  double s = t * (2 + t2 * (2.0 / 3 + t2 * (2.0 / 5 + t2 * (2.0 / 7 + t2 * (2.0 / 9 + t2 * (2.0 / 11))))));
  return e * LN2 + s;
}

/* 1 - e^(-x), x >= 0, accurate for tiny x (a 16-byte block at 512 KiB). */
static double prof_one_minus_exp_neg(double x) {
  if (x < 1e-3) return x * (1 - x / 2 * (1 - x / 3 * (1 - x / 4)));
  if (x > 700) return 1;
  int k = (int)(x / LN2 + 0.5);
  double r = x - k * LN2, term = 1, sum = 1; /* e^(-r), |r| <= ln2/2 */
  for (int i = 1; i < 16; i++) { term *= -r / i; sum += term; }
  union { double d; uint64_t u; } two = {.u = (uint64_t)(1023 - k) << 52}; /* 2^-k */
  return 1 - sum * two.d;
}

static uint64_t prof_splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Exp(1) from this thread's generator (xorshift64*). With a seed, each
 * thread's stream depends only on the order threads first sampled in. */
static double prof_exp1(void) {
  uint64_t x = prof_rng;
  if (x == 0) {
    long seed = hz_opt(HZ_OPTION_PROFILE_SEED);
    uint32_t seq = atomic_fetch_add_explicit(&prof_thread_seq, 1, memory_order_relaxed);
    x = prof_splitmix(seed ? (uint64_t)seed * 0x100000001ull + seq : hz_os_random()) | 1;
  }
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  prof_rng = x;
  double u = (double)(((x * 0x2545f4914f6cdd1dull) >> 11) + 1) * 0x1p-53; /* (0, 1] */
  return -prof_log(u);
}

/* Mallocs of blocks of s bytes until the next sampled one. */
static int64_t prof_gap(size_t s, long rate) {
  if (rate == 0) return PROF_IDLE;
  double g = prof_exp1() * (double)rate / (double)s;
  return g >= 0x1p62 ? (int64_t)1 << 62 : (int64_t)g;
}


hz_hot_text void hz_profile_arm(hz_heap_t *h) {
  long rate = hz_profile_rate();
  for (uint32_t c = 0; c < HZ_NCLASS; c++) hz_heap_count_restart(h, c, prof_gap(hz_class_size(c), rate));
  h->sample_rate = rate;
}

void hz_profile_option_changed(void) {
  hz_heap_t *h = hz_tls_heap;
  if (h != &hz_heap_empty && h->live) hz_profile_arm(h);
}

/* ---- stacks ---- */
/* Our own code's address range, when we are a shared object: its frames
 * are left out of stacks. (Linked into the program, they are dropped by
 * name when the profile is written.) */
static int prof_find_self(struct dl_phdr_info *info, size_t size, void *arg) {
  uintptr_t self = (uintptr_t)arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type != PT_LOAD || self < lo || self >= lo + ph->p_memsz) continue;
    if (info->dlpi_name && info->dlpi_name[0]) { /* not the main program */
      prof_self_lo = lo;
      prof_self_hi = lo + ph->p_memsz;
    }
    return 1;
  }
  return 0;
}

typedef struct { uintptr_t *pc; uint32_t n; } prof_trace_t;

static _Unwind_Reason_Code prof_frame(struct _Unwind_Context *ctx, void *arg) {
  prof_trace_t *t = arg;
  uintptr_t ip = _Unwind_GetIP(ctx);
  if (ip == 0) return _URC_END_OF_STACK;
  if (t->n == 0 && ip >= prof_self_lo && ip < prof_self_hi) return _URC_NO_REASON;
  t->pc[t->n++] = ip;
  return t->n < HZ_PROF_DEPTH ? _URC_NO_REASON : _URC_END_OF_STACK;
}

static uint32_t prof_capture(uintptr_t *pc) {
  if (!atomic_load_explicit(&prof_self_known, memory_order_acquire)) {
    dl_iterate_phdr(prof_find_self, (void *)(uintptr_t)prof_capture);
    atomic_store_explicit(&prof_self_known, 1, memory_order_release);
  }
  prof_trace_t t = {pc, 0};
  _Unwind_Backtrace(prof_frame, &t);
  return t.n;
}

/* Profiler memory, never freed (stacks are few); prof_lock held. */
static void *prof_meta(size_t size) {
  size = (size + 15) & ~(size_t)15;
  if ((size_t)(prof_bump_end - prof_bump) < size) {
    char *p = hz_os_map(1u << 20, 0);
    if (p == NULL) return NULL;
    prof_bump = p;
    prof_bump_end = p + (1u << 20);
  }
  void *r = prof_bump;
  prof_bump += size;
  return r;
}

static hz_prof_stack_t *prof_stack(const uintptr_t *pc, uint32_t depth) {
  uint64_t hash = depth;
  for (uint32_t i = 0; i < depth; i++) hash = prof_splitmix(hash ^ pc[i]);
  hz_prof_stack_t **link = &hz_profile_buckets[hash % PROF_BUCKETS];
  for (hz_prof_stack_t *st = *link; st; st = st->next)
    if (st->hash == hash && st->depth == depth && memcmp(st->pc, pc, depth * sizeof *pc) == 0) return st;
  hz_prof_stack_t *st = prof_meta(sizeof *st + depth * sizeof *pc);
  if (st == NULL) return NULL;
  st->hash = hash;
  st->depth = depth;
  memcpy(st->pc, pc, depth * sizeof *pc);
  st->next = *link;
  *link = st;
  st->next_all = prof_stacks;
  prof_stacks = st;
  prof_nstacks++;
  return st;
}

static void prof_unrecord(hz_prof_rec_t *r) {
  r->stack->live_n -= r->n;
  r->stack->live_b -= r->b;
  r->stack->live_s -= 1;
  r->next = prof_recs_free;
  prof_recs_free = r;
}

/* Serve a sampled block of n bytes (p: the chance it had to be sampled). */
static void *prof_sample_alloc(size_t n, size_t align, double p, size_t *dirty) {
  uintptr_t pc[HZ_PROF_DEPTH];
  prof_busy = 1;
  uint32_t depth = prof_capture(pc);
  void *q;
  hz_span_t *s = NULL;
  if (n + HZ_LARGE_GUARD <= HZ_LARGE_MAX && align <= HZ_LARGE_MAX) {
    if ((q = hz_large_alloc(hz_tls_heap, n, align, dirty)) != NULL) s = hz_span_of(q);
  } else {
    q = hz_huge_alloc(n, align, dirty);
  }
  if (q != NULL) {
    hz_lock(&prof_lock);
    hz_prof_stack_t *st = prof_stack(pc, depth);
    hz_prof_rec_t *r = prof_recs_free;
    if (r != NULL) prof_recs_free = r->next;
    else r = prof_meta(sizeof *r);
    if (st != NULL && r != NULL) {
      r->stack = st;
      r->gen = prof_gen;
      r->n = 1 / p;
      r->b = (double)n / p;
      st->alloc_n += r->n;
      st->alloc_b += r->b;
      st->live_n += r->n;
      st->live_b += r->b;
      st->live_s += 1;
      if (s != NULL) {
        s->sample = r;
      } else {
        r->addr = q;
        r->next = prof_huge;
        prof_huge = r;
        atomic_fetch_add_explicit(&hz_profile_huge_live, 1, memory_order_relaxed);
      }
    } else if (r != NULL) {
      r->next = prof_recs_free;
      prof_recs_free = r;
    }
    hz_unlock(&prof_lock);
  }
  prof_busy = 0;
  return q;
}

/* b handed out as it is: the caller returns it directly. */
static void *prof_unsampled(hz_block_t *b, uint32_t c, size_t request) {
#if HZ_CHECKED
  hz_checked_on_alloc(b, hz_class_size(c), request);
#endif
  (void)c;
  (void)request;
  return b;
}

hz_hot_text void *hz_profile_small(hz_heap_t *h, hz_block_t *b, size_t request) {
  uint32_t c = hz_span_of(b)->cls; /* (not passed: the fast path keeps one register fewer) */
  long rate = hz_profile_rate();
  if (h->sample_rate != rate || rate == 0) { /* a new heap, or profiling switched */
    hz_profile_arm(h);
    return prof_unsampled(b, c, request);
  }
  size_t bs = hz_class_size(c);
  /* The next point is a gap after the one that fell due, not after this
   * malloc: the blocks in between (a refill carves or takes several) were
   * counted down already (restarting here read medium classes, refilled
   * every 8 blocks, 4-7% low at a 64 KiB rate). Below 0, the next malloc
   * samples again. */
  hz_heap_count_restart(h, c, prof_gap(bs, rate) + h->n.sample_left[c] + 1);
  if (prof_busy) return prof_unsampled(b, c, request);
  size_t dirty;
  /* (aligned as the class's blocks are: an aligned request is served from a
   * class whose size is a multiple of its alignment, alloc.c) */
  void *q = prof_sample_alloc(request ? request : 1, bs & (0 - bs), prof_one_minus_exp_neg((double)bs / (double)rate), &dirty);
  if (q == NULL) return prof_unsampled(b, c, request);
  /* b goes back to its span (the current one of its class: it stays
   * pinned), and is not counted as a small malloc */
  h->n.malloc[c]--;
  hz_span_t *s = hz_span_of(b);
  if (!HZ_NOCHECK) b->tag = hz_block_tag(s, b);
  if (hz_span_push(s, b)) hz_heap_free_slow(h, s);
  return q;
}

void *hz_profile_big(size_t n, size_t align, size_t *dirty) {
  long rate = hz_profile_rate();
  if (prof_big_rate != rate) {
    prof_big_rate = rate;
    prof_big_left = prof_gap(1, rate);
  }
  prof_big_left -= (int64_t)n;
  if (prof_big_left >= 0 || prof_busy) return NULL;
  prof_big_left = prof_gap(1, rate);
  return prof_sample_alloc(n, align, prof_one_minus_exp_neg((double)n / (double)rate), dirty);
}

void hz_profile_free(hz_span_t *s) {
  hz_lock(&prof_lock);
  hz_prof_rec_t *r = s->sample;
  s->sample = NULL;
  if (r != NULL && r->gen == prof_gen) prof_unrecord(r);
  hz_unlock(&prof_lock);
}

void hz_profile_huge_free(const void *p) {
  hz_lock(&prof_lock);
  for (hz_prof_rec_t **link = &prof_huge; *link; link = &(*link)->next) {
    hz_prof_rec_t *r = *link;
    if (r->addr != p) continue;
    *link = r->next;
    prof_unrecord(r);
    atomic_fetch_sub_explicit(&hz_profile_huge_live, 1, memory_order_relaxed);
    break;
  }
  hz_unlock(&prof_lock);
}

/* ---- output ---- */
/* A copy of the counters under the lock; stacks' addresses never change. */
static hz_prof_site_t *prof_snapshot(size_t *count) {
  for (;;) { /* the copy is allocated without the lock held */
    hz_lock(&prof_lock);
    size_t room = prof_nstacks + 64;
    hz_unlock(&prof_lock);
    hz_prof_site_t *sites = hz_malloc(room * sizeof *sites);
    if (sites == NULL) return NULL;
    hz_lock(&prof_lock);
    size_t n = prof_nstacks, i = 0;
    if (n <= room)
      for (hz_prof_stack_t *st = prof_stacks; st && i < n; st = st->next_all, i++)
        sites[i] = (hz_prof_site_t){st->pc, st->depth, st->alloc_n, st->alloc_b, st->live_n, st->live_b, st->live_s};
    hz_unlock(&prof_lock);
    if (n <= room) {
      *count = n;
      return sites;
    }
    hz_free(sites);
  }
}

HZ_EXPORT int hz_profile_dump(const char *path) {
  enum { PATH_LEN = 4096 };
  char *buf = NULL; /* (not on the stack, which may be a thread's small one: 16 KiB) */
  hz_init();
  if (path == NULL) {
    if ((buf = hz_malloc(PATH_LEN)) == NULL) return -1;
    if (!hz_option_path(HZ_OPTION_PROFILE_FILE, buf, PATH_LEN)) {
      hz_free(buf);
      errno = EINVAL;
      return -1;
    }
    path = buf;
  }
  int busy = prof_busy;
  prof_busy = 1;
  size_t n;
  hz_prof_site_t *sites = prof_snapshot(&n);
  int rc = -1;
  if (sites == NULL) errno = ENOMEM;
  else rc = hz_pprof_write(path, sites, n, hz_opt(HZ_OPTION_PROFILE_RATE));
  hz_free(sites);
  hz_free(buf);
  prof_busy = busy;
  return rc;
}

/* At exit: the profile goes where HAKOZUNA_PROFILE_FILE points, relative
 * to the directory the program started in (%p: the pid, so a fork child
 * writes its own); the leak report to a descriptor of our own (the program
 * may have closed stderr by then). */
hz_cold_bss char hz_profile_start_dir[4096]; /* (written at start-up: a page of its own) */
static int prof_leak_fd = -1;
static hz_os_file_id_t prof_leak_fd_id; /* (used only while it still refers to this) */

static void prof_fork_child(void) {
  if (!hz_lock_lost_in_fork(&prof_lock)) return;
  /* (the old tables' memory is left to the parent's copy) */
  prof_gen++;
  memset(hz_profile_buckets, 0, sizeof hz_profile_buckets);
  prof_stacks = NULL;
  prof_nstacks = 0;
  prof_recs_free = prof_huge = NULL;
  prof_bump = prof_bump_end = NULL;
  atomic_store_explicit(&hz_profile_huge_live, 0, memory_order_relaxed);
}

__attribute__((constructor)) static void hz_profile_ctor(void) {
  hz_init();
  hz_options_late_init();
  hz_os_atfork_child(prof_fork_child);
  if (hz_os_cwd(hz_profile_start_dir, sizeof hz_profile_start_dir - 1)) strcat(hz_profile_start_dir, "/");
  else hz_profile_start_dir[0] = 0;
  if (hz_opt(HZ_OPTION_LEAKS) || hz_opt(HZ_OPTION_PROFILE)) { /* (the leak report, or a failed write's warning) */
    prof_leak_fd = hz_os_open_report(NULL, false);
    prof_leak_fd_id = hz_os_fd_id(prof_leak_fd);
  }
}

hz_cold_bss char hz_profile_path[4096], hz_profile_full[8192];
__attribute__((destructor)) static void hz_profile_dtor(void) {
  if (hz_opt(HZ_OPTION_PROFILE)) {
    /* (it runs once, maybe on a thread's small stack) */
    char *path = hz_profile_path, *full = hz_profile_full;
    if (!hz_option_path(HZ_OPTION_PROFILE_FILE, path, sizeof hz_profile_path)) {
      hz_warning("HAKOZUNA_PROFILE_FILE is empty or too long; no profile written");
    } else {
      snprintf(full, sizeof hz_profile_full, "%s%s", path[0] == '/' ? "" : hz_profile_start_dir, path);
      if (hz_profile_dump(full) != 0)
        hz_warning_to(hz_os_fd_is(prof_leak_fd, prof_leak_fd_id) ? prof_leak_fd : 2,
                      "the heap profile could not be written to %s", full);
    }
  }
  if (hz_opt(HZ_OPTION_LEAKS)) {
    prof_busy = 1;
    size_t n;
    hz_prof_site_t *sites = prof_snapshot(&n);
    if (sites != NULL) hz_pprof_leaks(hz_os_fd_is(prof_leak_fd, prof_leak_fd_id) ? prof_leak_fd : 2, sites, n, hz_opt(HZ_OPTION_PROFILE_RATE));
    hz_free(sites);
  }
}
