// SPDX-License-Identifier: MIT
/* tests/fuzz/fuzz_ops.c: libFuzzer harness for the hz_* API.
 *
 * Built with the allocator's sources compiled in (-DHZ_NO_OVERRIDE=1: only
 * the hz_* names exist, libFuzzer and libc keep glibc's malloc). The input
 * is a mode byte and then operations of 5 bytes each:
 *
 *   mode:  bit 0 set: several threads (2 + (mode >> 1) % 3), else one
 *   op:    [code] [slot] [a] [b] [d]
 *          code & 15 = what (below), code >> 4 = which thread runs it
 *          slot      = one of the thread's SLOTS block slots
 *          a, b      = a size (see op_size), d = alignment, count or
 *                      exchange slot
 *
 * Every thread walks the whole list and runs the ops addressed to it. A
 * block's bytes, all of its usable size, hold a pattern derived from the
 * block's id; the model records the requested size, alignment, usable size
 * and whether it came from calloc, and every op that touches a block checks
 * it against the model first: contents, alignment, usable size (>= the
 * request, == hz_good_size for malloc/calloc requests up to 2 MiB, or the
 * size of a class up to twice as big for a request of a page or more: a
 * freed block lent, docs/perf.md §79 and §84;
 * unchanged over the block's life), zeroed calloc memory, the prefix a realloc must
 * keep, and the errors of impossible requests (EINVAL, ENOMEM). Blocks move
 * between threads through exchange slots, so frees are remote and blocks
 * outlive the threads that made them. A failed check prints what it found
 * and aborts, which libFuzzer reports as a crash with the input saved.
 *
 * Built without libFuzzer (-DFUZZ_STANDALONE) it runs the files named on its
 * command line once each: a replay driver for gcc/UBSan builds. */
#define _GNU_SOURCE
#include "hakozuna.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 32
#define EXCHANGE 16
#define MAX_THREADS 4
#define OP_BYTES 5
#define SMALL_LIMIT ((size_t)2 << 20) /* usable == good size up to here */

typedef struct {
  void *p;
  size_t req;    /* bytes asked for */
  size_t usable; /* hz_usable_size when it was made */
  size_t align;  /* alignment asked for (16 when none) */
  uint64_t id;   /* the fill pattern's seed */
  bool zeroed;   /* from calloc: bytes [0, req) were zero when made */
} rec_t;

typedef struct {
  const uint8_t *ops;
  size_t nops;
  unsigned nthreads;
} input_t;

typedef struct {
  const input_t *in;
  unsigned id;
  rec_t slot[SLOTS];
} thread_t;

static struct {
  pthread_mutex_t lock;
  rec_t rec;
} exchange[EXCHANGE];
static _Atomic uint64_t next_id = 1;

static __attribute__((noreturn, format(printf, 1, 2))) void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "fuzz_ops: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}
#define EXPECT(cond, ...)                                                                                            \
  do {                                                                                                               \
    if (!(cond)) fail(__VA_ARGS__);                                                                                  \
  } while (0)

/* ---- decoding ---- */
/* a's top two bits pick a range: tiny (0..255), small (..16 KiB), medium
 * (..64 KiB, across the small/large border) or big (..4 MiB, across the
 * large/huge border at 2 MiB); a = b = 255 asks for the impossible. */
static size_t op_size(uint8_t a, uint8_t b) {
  size_t lo = a & 63;
  switch (a >> 6) {
  case 0: return b;
  case 1: return lo << 8 | b;
  case 2: return lo << 10 | (size_t)b << 2;
  default: return a == 255 && b == 255 ? SIZE_MAX - 4096 : (lo << 16 | (size_t)b << 8) + (b & 15);
  }
}
static bool impossible(size_t n) { return n > ((size_t)1 << 62); }

/* Mostly powers of two up to 8 MiB; d >= 240 gives invalid ones. */
static size_t op_align(uint8_t d) {
  static const size_t bad[] = {0, 3, 24, 48, 100, 4095, 65537, 1u << 31 | 1};
  if (d >= 240) return bad[d % 8];
  return (size_t)1 << (d % 24);
}
static bool pow2(size_t a) { return a != 0 && (a & (a - 1)) == 0; }

/* ---- the model ---- */
static void check_rec(const rec_t *r, const char *when) {
  if (r->p == NULL) return;
  size_t u = hz_usable_size(r->p);
  EXPECT(u == r->usable, "%s: usable size of %p (%zu bytes asked) changed from %zu to %zu", when, r->p, r->req,
         r->usable, u);
  size_t bad = tu_verify(r->p, r->usable, r->id);
  EXPECT(bad == 0, "%s: block %p (%zu bytes asked, %zu usable, id %llu) corrupted at offset %zu", when, r->p, r->req,
         r->usable, (unsigned long long)r->id, bad - 1);
}

/* A block just returned for req bytes at alignment align (0: plain). */
static void adopt(rec_t *r, void *p, size_t req, size_t align, bool zeroed, const char *what) {
  EXPECT(p != NULL, "%s(%zu, align %zu) failed (errno %d)", what, req, align, errno);
  size_t need = align > 16 ? align : 16;
  EXPECT(((uintptr_t)p & (need - 1)) == 0, "%s(%zu, align %zu) = %p is misaligned", what, req, align, p);
  size_t u = hz_usable_size(p);
  EXPECT(u >= req, "%s(%zu) = %p: usable size %zu is too small", what, req, p, u);
  if (align == 0) {
    size_t good = hz_good_size(req);
    bool lent = good >= (size_t)hz_option_get(HZ_OPTION_PAGE_SIZE) && u > good && u <= 2 * good && u <= 32768 &&
                hz_good_size(u) == u; /* (a class's size, up to twice the request's class: §79, §84) */
    EXPECT(req > SMALL_LIMIT ? u >= good : u == good || lent, "%s(%zu) = %p: usable size %zu, hz_good_size %zu", what,
           req, p, u, good);
  }
  if (zeroed) {
    size_t nz = tu_nonzero(p, req);
    EXPECT(nz == 0, "%s(%zu) = %p: byte %zu is not zero", what, req, p, nz - 1);
  }
  *r = (rec_t){p, req, u, align ? align : 16, atomic_fetch_add(&next_id, 1), zeroed};
  tu_fill(p, u, r->id);
}

static void release(rec_t *r, const char *when) {
  if (r->p == NULL) return;
  check_rec(r, when);
  hz_free(r->p);
  r->p = NULL;
}

/* An impossible or invalid request must fail with this errno. */
static void refused(void *p, int err, int want, const char *what, size_t a, size_t n) {
  EXPECT(p == NULL, "%s(%zu, %zu) = %p, expected failure", what, a, n, p);
  EXPECT(err == want, "%s(%zu, %zu) failed with errno %d, expected %d", what, a, n, err, want);
}

/* ---- the operations ---- */
static void op_alloc(rec_t *r, size_t n) {
  release(r, "before malloc");
  errno = 0;
  void *p = hz_malloc(n);
  if (impossible(n)) {
    refused(p, errno, ENOMEM, "malloc", 0, n);
    return;
  }
  adopt(r, p, n, 0, false, "malloc");
}

static void op_calloc(rec_t *r, size_t n, uint8_t d) {
  release(r, "before calloc");
  size_t count = 1 + d % 8, each = n / count;
  if (d == 255) count = SIZE_MAX / 2, each = 3; /* overflows */
  errno = 0;
  void *p = hz_calloc(count, each);
  if (d == 255 || impossible(count * each)) {
    refused(p, errno, ENOMEM, "calloc", count, each);
    return;
  }
  adopt(r, p, count * each, 0, true, "calloc");
}

/* The result p of realloc(r->p, n) or reallocarray (n bytes in all). */
static void realloc_done(rec_t *r, void *p, size_t n, const char *what) {
  if (n == 0 && r->p != NULL) { /* frees, like glibc */
    EXPECT(p == NULL, "%s(%p, 0) = %p, expected NULL", what, r->p, p);
    r->p = NULL;
    return;
  }
  EXPECT(p != NULL, "%s(%p, %zu) failed (errno %d)", what, r->p, n, errno);
  size_t keep = r->p == NULL ? 0 : (r->req < n ? r->req : n);
  size_t bad = tu_verify(p, keep, r->id);
  EXPECT(bad == 0, "%s(%zu -> %zu) = %p lost the contents at offset %zu", what, r->req, n, p, bad - 1);
  if (p != r->p) { /* moved: a new block (growth may get extra room, so
                     * no hz_good_size equality) */
    adopt(r, p, n, 16, false, what);
    return;
  }
  /* kept in place: same usable size, which must still be enough, or a
   * large or huge block resized where it is: then what hz_good_size says,
   * or for a huge block (aligned ones start further into their mapping, and
   * one shrunk below the huge sizes stays huge) the request rounded to a
   * page from the block's start */
  size_t u = hz_usable_size(p), ps = (size_t)hz_option_get(HZ_OPTION_PAGE_SIZE);
  EXPECT(u >= n && (u == r->usable || u == hz_good_size(n) || u - n < ps),
         "%s(%zu -> %zu) in place: usable %zu, was %zu", what, r->req, n, u, r->usable);
  r->usable = u;
  r->req = n;
  r->id = atomic_fetch_add(&next_id, 1);
  r->zeroed = false;
  tu_fill(p, r->usable, r->id);
}

static void op_realloc(rec_t *r, size_t n) {
  check_rec(r, "before realloc");
  errno = 0;
  void *p = hz_realloc(r->p, n);
  if (impossible(n)) {
    refused(p, errno, ENOMEM, "realloc", r->req, n);
    check_rec(r, "after a failed realloc");
    return;
  }
  realloc_done(r, p, n, "realloc");
}

static void op_aligned(rec_t *r, size_t n, uint8_t d, int form) {
  static const char *const names[] = {"aligned_alloc", "posix_memalign", "memalign"};
  size_t al = op_align(d);
  release(r, "before an aligned allocation");
  void *p = NULL;
  int err;
  errno = 0;
  if (form == 1) {
    static char sentinel;
    p = &sentinel;
    err = hz_posix_memalign(&p, al, n);
    /* errno: ENOMEM with ENOMEM (as glibc), else unchanged */
    EXPECT(errno == (err == ENOMEM ? ENOMEM : 0), "posix_memalign(%zu, %zu) = %d set errno %d", al, n, err, errno);
    if (err != 0) {
      EXPECT(p == &sentinel, "failed posix_memalign(%zu, %zu) wrote *out", al, n);
      p = NULL;
    }
  } else {
    p = form == 0 ? hz_aligned_alloc(al, n) : hz_memalign(al, n);
    err = errno;
  }
  if (form == 2 && !pow2(al)) { /* memalign rounds up, as glibc's */
    size_t up = 1;
    while (up < al) up <<= 1;
    al = up;
  }
  if (!pow2(al) || (form == 1 && al < sizeof(void *))) {
    refused(p, err, EINVAL, names[form], al, n);
    return;
  }
  if (impossible(n)) {
    refused(p, err, ENOMEM, names[form], al, n);
    return;
  }
  adopt(r, p, n, al, false, names[form]);
}

static void op_valloc(rec_t *r, size_t n, uint8_t d) {
  release(r, "before valloc");
  size_t page = 4096;
  errno = 0;
  void *p = d & 1 ? hz_pvalloc(n) : hz_valloc(n);
  if (impossible(n)) {
    refused(p, errno, ENOMEM, d & 1 ? "pvalloc" : "valloc", 0, n);
    return;
  }
  if (d & 1) n = n ? (n + page - 1) & ~(page - 1) : page; /* pvalloc rounds up to pages */
  adopt(r, p, n, page, false, d & 1 ? "pvalloc" : "valloc");
}

static void op_reallocarray(rec_t *r, size_t n, uint8_t d) {
  size_t count = 1 + d % 4, each = n / count;
  if (d == 255) count = SIZE_MAX / 2, each = 5; /* overflows */
  check_rec(r, "before reallocarray");
  errno = 0;
  void *p = hz_reallocarray(r->p, count, each);
  if (d == 255 || impossible(count * each)) {
    refused(p, errno, ENOMEM, "reallocarray", count, each);
    check_rec(r, "after a failed reallocarray");
    return;
  }
  realloc_done(r, p, count * each, "reallocarray");
}

static void op_free_sized(rec_t *r) {
  if (r->p == NULL) return;
  check_rec(r, "before free_sized");
  hz_free_sized(r->p, r->req);
  r->p = NULL;
}

/* Move a block to an exchange slot (one thread) or another slot. */
static void op_give(thread_t *t, rec_t *r, uint8_t d) {
  check_rec(r, "before handing over");
  if (t->in->nthreads == 1) {
    rec_t tmp = t->slot[d % SLOTS];
    t->slot[d % SLOTS] = *r;
    *r = tmp;
    return;
  }
  unsigned x = d % EXCHANGE;
  pthread_mutex_lock(&exchange[x].lock);
  rec_t tmp = exchange[x].rec;
  exchange[x].rec = *r;
  pthread_mutex_unlock(&exchange[x].lock);
  *r = tmp;
  check_rec(r, "taken from another thread");
}

static void run_op(thread_t *t, const uint8_t *op) {
  rec_t *r = &t->slot[op[1] % SLOTS];
  size_t n = op_size(op[2], op[3]);
  uint8_t d = op[4];
  switch (op[0] & 15) {
  case 0: case 1: case 2: op_alloc(r, n); break;
  case 3: op_calloc(r, n, d); break;
  case 4: case 5: op_realloc(r, n); break;
  case 6: op_aligned(r, n, d, 0); break;
  case 7: op_aligned(r, n, d, 1); break;
  case 8: op_aligned(r, n, d, 2); break;
  case 9: case 10: release(r, "before free"); break;
  case 11: check_rec(r, "check"); break;
  case 12: op_give(t, r, d); break;
  case 13: op_reallocarray(r, n, d); break;
  case 14: op_free_sized(r); break;
  default:
    if (d < 4) hz_collect(d & 1);
    else op_valloc(r, n, d);
  }
}

static void *thread_main(void *arg) {
  thread_t *t = arg;
  const input_t *in = t->in;
  for (size_t i = 0; i < in->nops; i++) {
    const uint8_t *op = in->ops + i * OP_BYTES;
    if ((unsigned)(op[0] >> 4) % in->nthreads == t->id) run_op(t, op);
  }
  for (int s = 0; s < SLOTS; s++) release(&t->slot[s], "at the end");
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static thread_t threads[MAX_THREADS];
  if (size < 1) return 0;
  input_t in = {data + 1, (size - 1) / OP_BYTES, data[0] & 1 ? 2 + (data[0] >> 1) % 3 : 1};
  for (unsigned i = 0; i < in.nthreads; i++) {
    memset(&threads[i], 0, sizeof threads[i]);
    threads[i].in = &in;
    threads[i].id = i;
  }
  if (in.nthreads == 1) {
    thread_main(&threads[0]);
    return 0;
  }
  pthread_t tid[MAX_THREADS];
  for (unsigned i = 0; i < in.nthreads; i++) EXPECT(pthread_create(&tid[i], NULL, thread_main, &threads[i]) == 0, "pthread_create");
  for (unsigned i = 0; i < in.nthreads; i++) pthread_join(tid[i], NULL);
  /* blocks left in the exchange outlived their threads: free them here */
  for (int x = 0; x < EXCHANGE; x++) release(&exchange[x].rec, "left in the exchange");
  return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  for (int x = 0; x < EXCHANGE; x++) pthread_mutex_init(&exchange[x].lock, NULL);
  return 0;
}

#ifdef FUZZ_STANDALONE
/* Replays the files named on the command line, once each. */
int main(int argc, char **argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  for (int i = 1; i < argc; i++) {
    FILE *f = fopen(argv[i], "rb");
    if (f == NULL) {
      perror(argv[i]);
      return 1;
    }
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
  }
  printf("fuzz_ops: replayed %d inputs\n", argc - 1);
  return 0;
}
#endif
