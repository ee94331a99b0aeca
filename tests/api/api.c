// SPDX-License-Identifier: MIT
/* tests/api/api.c: the allocation API against glibc's documented contract.
 *
 * The same battery runs over every set of names the API has: the standard
 * names, glibc's __libc_* aliases and, built with -DHZ_API (linked with
 * hakozuna), the hz_* names; then blocks from one set are freed with another.
 * Edge cases: malloc(0), impossible sizes and overflow (NULL, ENOMEM), bad
 * alignments (EINVAL), a dense size sweep writing every usable byte, realloc
 * grow/shrink keeping content, calloc zeroing reused dirty memory, every
 * power-of-two alignment up to 16 MiB, valloc/pvalloc, a random mix checked
 * for overlapping blocks, memory that libc allocates internally. */
#include "check.h"
#include "testutil.h"

#ifndef _WIN32
#include <dirent.h>
#include <sys/mman.h>
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#ifdef HZ_API
#include "hakozuna.h"
#endif

#ifdef __GLIBC__
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
#endif

typedef struct api {
  const char *name;
  void *(*malloc)(size_t);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void (*free)(void *);
  size_t (*usable)(void *);
  /* NULL where the set has no such name. */
  void *(*reallocarray)(void *, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*memalign)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
} api_t;

#ifdef _WIN32
/* Windows: the static library redirects malloc, calloc, realloc and free
 * (docs/windows.md); the others have no such C runtime names. */
static size_t win_usable(void *p) { return hz_usable_size(p); }
static const api_t std_api = {
    "std", malloc, calloc, realloc, free, win_usable, NULL, NULL, NULL, NULL, NULL, NULL,
};
#else
static const api_t std_api = {
    "std",  malloc,        calloc,         realloc,  free,   malloc_usable_size,
    reallocarray, aligned_alloc, posix_memalign, memalign, valloc, pvalloc,
};
#ifdef __GLIBC__ /* (musl's __libc_* names are internal to it) */
static const api_t libc_api = {
    "__libc", __libc_malloc, __libc_calloc, __libc_realloc, __libc_free,
    malloc_usable_size, NULL, NULL, NULL, __libc_memalign, NULL, NULL,
};
#define LIBC_API &libc_api,
#else
#define LIBC_API
#endif
#endif
#ifdef HZ_API
static size_t hz_usable(void *p) { return hz_usable_size(p); }
static const api_t hz_api = {
    "hz",          hz_malloc,        hz_calloc,         hz_realloc,
    hz_free,       hz_usable,        hz_reallocarray,   hz_aligned_alloc,
    hz_posix_memalign, hz_memalign,  hz_valloc,         hz_pvalloc,
};
#if defined(HZ_API_ONLY)
static const api_t *const apis[] = {&hz_api}; /* through hakozuna.dll */
#elif defined(_WIN32)
static const api_t *const apis[] = {&std_api, &hz_api};
#else
static const api_t *const apis[] = {&std_api, LIBC_API &hz_api};
#endif
#else
static const api_t *const apis[] = {&std_api, LIBC_API};
#endif
#define NAPIS (sizeof apis / sizeof apis[0])

static size_t page;

#define ALIGNED(p, a) (((uintptr_t)(p) & ((a)-1)) == 0)

/* A block that passed the basic checks: non-NULL, 16-aligned, usable >= n. */
static int good_block(const api_t *A, void *p, size_t n, const char *what) {
  if (!CHECKF(p != NULL, "%s %s(%zu) returned NULL (errno %d)", A->name, what,
              n, errno))
    return 0;
  CHECKF(ALIGNED(p, 16), "%s %s(%zu) = %p is not 16-byte aligned", A->name,
         what, n, p);
  size_t u = A->usable(p);
  return CHECKF(u >= n, "%s %s(%zu): usable size %zu", A->name, what, n, u);
}

/* A call that must fail with NULL and errno err. */
#define EXPECT_FAIL(A, err, call)                                             \
  do {                                                                        \
    errno = 0;                                                                \
    void *r_ = (call);                                                        \
    CHECKF(r_ == NULL && errno == (err), "%s: %s = %p, errno %d, want %s",    \
           (A)->name, #call, r_, errno, #err);                                \
    if (r_) (A)->free(r_);                                                    \
  } while (0)
#define EXPECT_ENOMEM(A, call) EXPECT_FAIL(A, ENOMEM, call)
#define EXPECT_EINVAL(A, call) EXPECT_FAIL(A, EINVAL, call)

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
  return x < y ? -1 : x > y;
}

/* ---- malloc(0), NULL, realloc edge cases ---- */
static void test_basics(const api_t *A) {
  enum { N = 256 };
  void *z[N];
  for (int i = 0; i < N; i++) {
    z[i] = A->malloc(tu_opaque(0));
    good_block(A, z[i], 0, "malloc");
  }
  qsort(z, N, sizeof z[0], cmp_ptr);
  for (int i = 1; i < N; i++)
    CHECKF(z[i] != z[i - 1], "%s malloc(0) returned %p twice", A->name, z[i]);
  for (int i = 0; i < N; i++) A->free(z[i]);

  A->free(NULL);
  CHECK(A->usable(NULL) == 0);

  void *p = A->realloc(NULL, tu_opaque(100)); /* realloc(NULL, n) = malloc */
  good_block(A, p, 100, "realloc(NULL)");
  A->free(p);
  p = A->realloc(NULL, tu_opaque(0));
  good_block(A, p, 0, "realloc(NULL, 0)");
  A->free(p);

  /* realloc(p, 0) frees p and returns NULL (glibc). That it frees: 4096
   * touched 64 KiB blocks would leak 256 MiB otherwise. */
  long rss0 = tu_rss();
  for (int i = 0; i < 4096; i++) {
    p = A->malloc(tu_opaque(64 * KiB));
    if (!CHECK(p)) break;
    memset(p, i, 64 * KiB);
    void *q = A->realloc(p, tu_opaque(0));
    if (!CHECKF(q == NULL, "%s realloc(p, 0) = %p, want NULL", A->name, q)) {
      A->free(q);
      break;
    }
  }
  long grown = tu_rss() - rss0;
  CHECKF(grown < (long)(64 * MiB), "%s: RSS grew %ld KiB over 4096 "
         "malloc(64K)+realloc(p,0): realloc(p, 0) does not free", A->name,
         grown / 1024);
}

/* ---- a live block holding a freed block's words ----
 * glibc's tst-tcfree3: the words of a freed block (read after its free,
 * as a program with a use-after-free bug does), copied into a live block
 * of the same size, must not make that block's free a "double free".
 * hakozuna's default build marked every free block of a span alike (its
 * descriptor's address) and aborted. Small sizes only: the checked build
 * makes freed large blocks inaccessible. */
static void test_freed_words(const api_t *A) {
  static const size_t sizes[] = {1, 16, 24, 32, 48, 100, 1000, 5000, 20000};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i], k = n < 32 ? n : 32;
    unsigned char *v[8];
    for (int j = 0; j < 8; j++) v[j] = A->malloc(tu_opaque(n));
    unsigned char copy[32];
    A->free(v[0]);
    A->free(v[1]);
    memcpy(copy, tu_opaque_ptr(v[1]), k); /* the freed block's link and mark */
    for (int j = 2; j < 8; j++) memcpy(v[j], copy, k);
    for (int j = 2; j < 8; j++) A->free(v[j]); /* (aborts if taken for a double free) */
  }
}

/* ---- sizes 0..64 KiB densely, up to 64 MiB sparsely ---- */
static void sweep_one(const api_t *A, void **ring, size_t *ringsz, size_t nring,
                      size_t *slot, size_t n) {
  void *p = A->malloc(tu_opaque(n));
  if (!good_block(A, p, n, "malloc")) {
    A->free(p);
    return;
  }
  size_t u = A->usable(p);
  tu_fill(p, u, (uint64_t)(uintptr_t)p ^ n); /* every usable byte is writable */
  size_t s = *slot;
  *slot = (s + 1) % nring;
  if (ring[s]) {
    size_t bad = tu_verify(ring[s], ringsz[s], (uint64_t)(uintptr_t)ring[s] ^
                           ringsz[s + nring]);
    CHECKF(bad == 0, "%s: block %p of %zu bytes corrupted at offset %zu",
           A->name, ring[s], ringsz[s + nring], bad - 1);
    A->free(ring[s]);
  }
  ring[s] = p;
  ringsz[s] = u;
  ringsz[s + nring] = n;
}

static void sweep_flush(const api_t *A, void **ring, size_t *ringsz,
                        size_t nring, size_t *slot) {
  for (size_t i = 0; i < nring; i++) {
    /* Pushing a size-0 block through each slot verifies and frees it. */
    sweep_one(A, ring, ringsz, nring, slot, 0);
  }
  for (size_t i = 0; i < nring; i++) {
    A->free(ring[i]);
    ring[i] = NULL;
  }
}

static void test_sweep(const api_t *A) {
  enum { NRING = 64 };
  void *ring[NRING] = {0};
  size_t ringsz[2 * NRING] = {0}; /* usable sizes, then requested sizes */
  size_t slot = 0;
  /* HZ_SWEEP_STEP (default 1): a sparser sweep for emulated runs. */
  size_t step = (size_t)tu_env_double("HZ_SWEEP_STEP", 1);
  if (step < 1) step = 1;
  for (size_t n = 0; n <= 8192; n += step) sweep_one(A, ring, ringsz, NRING, &slot, n);
  for (size_t n = 8192; n <= 64 * KiB; n += 7 * step)
    sweep_one(A, ring, ringsz, NRING, &slot, n);
  sweep_flush(A, ring, ringsz, NRING, &slot);
  slot = 0;
  /* Sparse: around every power of two from 64 KiB to 64 MiB, 4 live. */
  for (size_t pw = 64 * KiB; pw <= 64 * MiB; pw *= 2) {
    size_t sizes[] = {pw - 1, pw, pw + 1, pw + pw / 2 + 3};
    for (int i = 0; i < 4; i++)
      if (sizes[i] <= 64 * MiB) sweep_one(A, ring, ringsz, 4, &slot, sizes[i]);
  }
  sweep_flush(A, ring, ringsz, 4, &slot);
}

/* ---- realloc keeps content through grow and shrink ---- */
static void *realloc_step(const api_t *A, void *p, size_t *have, size_t n,
                          uint64_t seed) {
  void *q = A->realloc(p, tu_opaque(n));
  if (!good_block(A, q, n, "realloc")) return p; /* p is still ours on NULL */
  size_t keep = *have < n ? *have : n;
  size_t bad = tu_verify(q, keep, seed);
  CHECKF(bad == 0, "%s realloc %zu -> %zu lost content at offset %zu", A->name,
         *have, n, bad - 1);
  size_t u = A->usable(q);
  tu_fill(q, u, seed);
  *have = u;
  return q;
}

static void test_realloc(const api_t *A) {
  static const size_t chain[] = {
      1, 16, 17, 100, 1000, 4096, 20000, 65536, 200000, MiB + 1, 5 * MiB,
      16 * MiB + 5, 40 * MiB, 3 * MiB, 300000, 20000, 48, 8, 1, 70000, 12 * MiB,
      24, 16 * MiB, 16 * MiB + 4096, 16 * MiB - 4096, 2};
  size_t have = 0;
  void *p = NULL;
  for (size_t i = 0; i < sizeof chain / sizeof chain[0]; i++)
    p = realloc_step(A, p, &have, chain[i], 42);
  /* Same size and full usable size keep content too. */
  p = realloc_step(A, p, &have, have, 42);
  A->free(p);

  uint64_t rng = 12345;
  p = NULL;
  have = 0;
  for (int i = 0; i < 400; i++) {
    unsigned shift = (unsigned)(tu_rand(&rng) % 23);
    size_t n = (size_t)(tu_rand(&rng) % ((size_t)2 << shift)) + 1;
    p = realloc_step(A, p, &have, n, 7);
  }
  A->free(p);
}

/* ---- calloc zeroes, also memory that was just freed dirty ---- */
static void test_calloc(const api_t *A) {
  static const size_t sizes[] = {1,     8,      24,     48,      100,
                                 512,   1000,   4096,   5000,    20000,
                                 65536, 100000, 200000, MiB,     3 * MiB,
                                 8 * MiB, 16 * MiB, 33 * MiB};
  enum { MAXN = 8 };
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    size_t n = sizes[si];
    void *b[MAXN];
    const int N = n >= MiB ? 3 : MAXN;
    for (int round = 0; round < 3; round++) {
      for (int i = 0; i < N; i++) {
        b[i] = A->malloc(n);
        if (good_block(A, b[i], n, "malloc")) memset(b[i], 0xa5, A->usable(b[i]));
      }
      for (int i = 0; i < N; i++) A->free(b[i]);
      for (int i = 0; i < N; i++) {
        /* count*size in several shapes */
        size_t c = i % 3 == 0 ? 1 : i % 3 == 1 ? n : (n % 4 == 0 ? n / 4 : 1);
        size_t s = i % 3 == 0 ? n : i % 3 == 1 ? 1 : (n % 4 == 0 ? 4 : n);
        b[i] = A->calloc(tu_opaque(c), tu_opaque(s));
        if (!good_block(A, b[i], n, "calloc")) continue;
        size_t bad = tu_nonzero(b[i], n);
        CHECKF(bad == 0, "%s calloc(%zu, %zu) round %d: byte %zu not zero",
               A->name, c, s, round, bad - 1);
        memset(b[i], 0x5a, A->usable(b[i])); /* dirty for the next round */
      }
      for (int i = 0; i < N; i++) A->free(b[i]);
    }
  }
  void *p;
  p = A->calloc(tu_opaque(0), tu_opaque(0));
  good_block(A, p, 0, "calloc(0, 0)");
  A->free(p);
  p = A->calloc(tu_opaque(0), tu_opaque(16));
  good_block(A, p, 0, "calloc(0, 16)");
  A->free(p);
  p = A->calloc(tu_opaque(16), tu_opaque(0));
  good_block(A, p, 0, "calloc(16, 0)");
  A->free(p);
  /* count * size overflows */
  EXPECT_ENOMEM(A, A->calloc(tu_opaque(SIZE_MAX / 2 + 1), tu_opaque(2)));
  EXPECT_ENOMEM(A, A->calloc(tu_opaque(2), tu_opaque(SIZE_MAX / 2 + 1)));
  EXPECT_ENOMEM(A, A->calloc(tu_opaque((size_t)1 << 32), tu_opaque((size_t)1 << 32)));
  EXPECT_ENOMEM(A, A->calloc(tu_opaque(SIZE_MAX), tu_opaque(SIZE_MAX)));
  EXPECT_ENOMEM(A, A->calloc(tu_opaque(SIZE_MAX), tu_opaque(1)));
  EXPECT_ENOMEM(A, A->calloc(tu_opaque(65537), tu_opaque(SIZE_MAX / 65536)));
}

/* ---- impossible sizes: NULL, ENOMEM, and a failed realloc keeps the block */
static void test_impossible(const api_t *A) {
  static const size_t huge[] = {SIZE_MAX, SIZE_MAX - 15, SIZE_MAX - 4096,
                                SIZE_MAX / 2 + 1, (size_t)PTRDIFF_MAX};
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
    size_t n = tu_opaque(huge[i]);
    EXPECT_ENOMEM(A, A->malloc(n));
    if (A->aligned_alloc) {
      EXPECT_ENOMEM(A, A->aligned_alloc(64, n));
      EXPECT_ENOMEM(A, A->aligned_alloc(4096, n));
      EXPECT_ENOMEM(A, A->aligned_alloc(MiB, n - MiB / 2));
    }
    if (A->memalign) {
      EXPECT_ENOMEM(A, A->memalign(64, n));
      EXPECT_ENOMEM(A, A->memalign(MiB, n - MiB / 2));
    }
    if (A->valloc) EXPECT_ENOMEM(A, A->valloc(n));
    if (A->pvalloc) EXPECT_ENOMEM(A, A->pvalloc(n));
    if (A->posix_memalign) {
      void *out = &out;
      errno = 0;
      int rc = A->posix_memalign(&out, 64, n);
      CHECKF(rc == ENOMEM && (out == &out || out == NULL),
             "%s posix_memalign(64, %zu) = %d, out %p", A->name, n, rc, out);
      /* errno too, as glibc does (its tst-malloc-thread-fail relies on it) */
      CHECKF(errno == ENOMEM, "%s posix_memalign(64, %zu): errno %d, want ENOMEM",
             A->name, n, errno);
    }
  }
  if (A->pvalloc) /* rounding up to a page overflows */
    EXPECT_ENOMEM(A, A->pvalloc(tu_opaque(SIZE_MAX - page + 2)));
  /* A valid but impossible alignment. */
  if (A->aligned_alloc)
    EXPECT_ENOMEM(A, A->aligned_alloc(tu_opaque((size_t)1 << 62), 64));
  if (A->memalign) EXPECT_ENOMEM(A, A->memalign(tu_opaque((size_t)1 << 62), 64));
  if (A->posix_memalign) {
    void *out = &out;
    errno = 0;
    int rc = A->posix_memalign(&out, tu_opaque((size_t)1 << 62), 64);
    CHECKF(rc == ENOMEM && errno == ENOMEM, "%s posix_memalign(1<<62, 64) = %d, errno %d",
           A->name, rc, errno);
  }

#ifndef _WIN32
  /* More than memory and swap: wherever the kernel refuses a mapping of that
   * size charged against its commit limit (the default heuristic overcommit,
   * or strict), malloc must fail as glibc's does, not hand out memory that
   * the OOM killer ends the program for (it did: MAP_NORESERVE). Under
   * vm.overcommit_memory=1 the kernel grants it, and so may malloc. */
  size_t beyond = (size_t)1 << 46;
  void *m = mmap(NULL, beyond, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    EXPECT_ENOMEM(A, A->malloc(tu_opaque(beyond)));
    EXPECT_ENOMEM(A, A->calloc(tu_opaque(beyond / 16), tu_opaque(16)));
    void *p = A->malloc(tu_opaque(8 * MiB));
    if (good_block(A, p, 8 * MiB, "malloc")) {
      EXPECT_ENOMEM(A, A->realloc(p, tu_opaque(beyond)));
      A->free(p);
    }
  } else {
    munmap(m, beyond);
    fprintf(stderr, "note: the kernel maps %zu bytes (vm.overcommit_memory=1?): "
            "malloc of more than memory and swap not checked\n", beyond);
  }
#endif

  /* A failed realloc/reallocarray leaves the old block as it was. */
  static const size_t olds[] = {48, 20 * KiB, 200 * KiB, 16 * MiB};
  for (size_t i = 0; i < sizeof olds / sizeof olds[0]; i++) {
    size_t n = olds[i];
    void *p = A->malloc(n);
    if (!good_block(A, p, n, "malloc")) continue;
    tu_fill(p, n, 99);
    EXPECT_ENOMEM(A, A->realloc(p, tu_opaque(SIZE_MAX)));
    EXPECT_ENOMEM(A, A->realloc(p, tu_opaque(SIZE_MAX - 4096)));
    EXPECT_ENOMEM(A, A->realloc(p, tu_opaque((size_t)PTRDIFF_MAX)));
    if (A->reallocarray) {
      EXPECT_ENOMEM(A, A->reallocarray(p, tu_opaque(SIZE_MAX / 2 + 1), 2));
      EXPECT_ENOMEM(A, A->reallocarray(p, tu_opaque((size_t)1 << 33),
                                       tu_opaque((size_t)1 << 33)));
    }
    CHECKF(tu_verify(p, n, 99) == 0, "%s: failed realloc changed the %zu-byte "
           "block", A->name, n);
    CHECK(A->usable(p) >= n);
    A->free(p);
  }
  if (A->reallocarray) {
    void *p = A->reallocarray(NULL, tu_opaque(10), tu_opaque(10));
    if (good_block(A, p, 100, "reallocarray(NULL)")) {
      tu_fill(p, 100, 5);
      void *q = A->reallocarray(p, tu_opaque(300), tu_opaque(100));
      if (good_block(A, q, 30000, "reallocarray")) {
        CHECK(tu_verify(q, 100, 5) == 0);
        p = q;
      }
      A->free(p);
    }
  }
}

/* ---- bad alignments ---- */
static void test_bad_alignment(const api_t *A) {
  static const size_t bad[] = {3, 12, 24, 48, 100, 4097, 3 * MiB, SIZE_MAX,
                               SIZE_MAX / 2 + 2};
  if (A->posix_memalign) {
    /* Not a power of two, or not a multiple of sizeof(void *): EINVAL and
     * *out untouched. */
    static const size_t pm_bad[] = {0, 1, 2, 4};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0] + 4; i++) {
      size_t al = i < 4 ? pm_bad[i] : bad[i - 4];
      void *out = &out;
      int rc = A->posix_memalign(&out, tu_opaque(al), 64);
      CHECKF(rc == EINVAL && out == &out,
             "%s posix_memalign(%zu, 64) = %d, out %p (want EINVAL, untouched)",
             A->name, al, rc, out);
    }
  }
  /* memalign rounds any alignment up to SIZE_MAX / 2 + 1 to a power of two,
   * as glibc's does (0 and 1: no alignment), and refuses larger ones. */
  if (A->memalign) {
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      size_t al = tu_opaque(bad[i]);
      if (al > SIZE_MAX / 2 + 1) {
        EXPECT_EINVAL(A, A->memalign(al, 64));
        continue;
      }
      size_t want = 1;
      while (want < al) want <<= 1;
      void *p = A->memalign(al, 64);
      CHECKF(p != NULL && (uintptr_t)p % want == 0, "%s memalign(%zu, 64) = %p, want a multiple of %zu",
             A->name, al, p, want);
      if (p) {
        memset(p, 1, 64);
        A->free(p);
      }
    }
    void *p = A->memalign(tu_opaque(0), 64);
    CHECKF(p != NULL, "%s memalign(0, 64) = NULL", A->name);
    A->free(p);
  }
  /* aligned_alloc rejects a non-power-of-two alignment (glibc 2.38 does;
   * older glibc rounds up instead). */
  if (!hz_strict()) return;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (A->aligned_alloc) EXPECT_EINVAL(A, A->aligned_alloc(tu_opaque(bad[i]), 64));
}

/* ---- every power-of-two alignment from 1 to 16 MiB ---- */
typedef struct live {
  void *p;
  size_t n;
} live_t;

static int cmp_live(const void *a, const void *b) {
  return cmp_ptr(&((const live_t *)a)->p, &((const live_t *)b)->p);
}

/* Blocks must not overlap: sort by address, compare with usable sizes. */
static void check_disjoint(const api_t *A, live_t *v, size_t n) {
  qsort(v, n, sizeof v[0], cmp_live);
  for (size_t i = 1; i < n; i++) {
    uintptr_t end = (uintptr_t)v[i - 1].p + A->usable(v[i - 1].p);
    CHECKF(end <= (uintptr_t)v[i].p, "%s: block %p (usable %zu) overlaps %p",
           A->name, v[i - 1].p, A->usable(v[i - 1].p), v[i].p);
  }
}

static void test_aligned(const api_t *A) {
  enum { MAXLIVE = 64 };
  live_t v[MAXLIVE];
  for (size_t al = 1; al <= 16 * MiB; al *= 2) {
    size_t sizes[] = {0,  1,  8,  24,  100,  al / 2, al - 8 < al ? al - 8 : 1,
                      al, al + 8, 2 * al + 16, 5000, 70000, 300000};
    size_t nv = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
      size_t n = sizes[si];
      for (int f = 0; f < 3; f++) {
        void *p = NULL;
        const char *what;
        if (f == 0 && A->aligned_alloc) {
          p = A->aligned_alloc(tu_opaque(al), tu_opaque(n));
          what = "aligned_alloc";
        } else if (f == 1 && A->memalign) {
          p = A->memalign(tu_opaque(al), tu_opaque(n));
          what = "memalign";
        } else if (f == 2 && A->posix_memalign && al >= sizeof(void *)) {
          int rc = A->posix_memalign(&p, tu_opaque(al), tu_opaque(n));
          CHECKF(rc == 0, "%s posix_memalign(%zu, %zu) = %d", A->name, al, n, rc);
          what = "posix_memalign";
        } else {
          continue;
        }
        if (!good_block(A, p, n, what)) {
          A->free(p);
          continue;
        }
        CHECKF(ALIGNED(p, al), "%s %s(%zu, %zu) = %p not aligned", A->name, what,
               al, n, p);
        size_t u = A->usable(p);
        tu_fill(p, u, (uintptr_t)p);
        v[nv].p = p;
        v[nv++].n = u;
      }
    }
    check_disjoint(A, v, nv);
    for (size_t i = 0; i < nv; i++) {
      size_t bad = tu_verify(v[i].p, v[i].n, (uintptr_t)v[i].p);
      CHECKF(bad == 0, "%s: aligned block %p (alignment %zu) corrupted at %zu",
             A->name, v[i].p, al, bad - 1);
      /* shrunk below half its usable size (grown, if that was 0): moved or
       * not, its prefix stays
       * (the checked build read a block at a segment's start as a span:
       * a crash at alignments of 4 MiB and more) */
      size_t m = v[i].n / 3 + 1;
      void *q = A->realloc(v[i].p, m);
      if (!CHECKF(q != NULL, "%s: realloc of aligned block %p (alignment %zu) to %zu failed", A->name, v[i].p, al, m)) {
        A->free(v[i].p);
        continue;
      }
      bad = tu_verify(q, m < v[i].n ? m : v[i].n, (uintptr_t)v[i].p);
      CHECKF(bad == 0, "%s: aligned block %p (alignment %zu) realloc'ed to %zu corrupted at %zu", A->name,
             v[i].p, al, m, bad - 1);
      A->free(q);
    }
  }
}

/* ---- valloc / pvalloc: page aligned, pvalloc rounds up to pages ---- */
static void test_valloc(const api_t *A) {
  if (!A->valloc) return;
  size_t sizes[] = {1, 100, page - 1, page, page + 1, 3 * page + 5, 100000,
                    5 * MiB + 3};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    void *p = A->valloc(tu_opaque(n));
    if (good_block(A, p, n, "valloc")) {
      CHECKF(ALIGNED(p, page), "%s valloc(%zu) = %p", A->name, n, p);
      memset(p, 1, A->usable(p));
    }
    A->free(p);
    p = A->pvalloc(tu_opaque(n));
    size_t rounded = (n + page - 1) / page * page;
    if (good_block(A, p, rounded, "pvalloc")) {
      CHECKF(ALIGNED(p, page), "%s pvalloc(%zu) = %p", A->name, n, p);
      memset(p, 1, A->usable(p));
    }
    A->free(p);
  }
}

/* ---- a random mix, content checked on free, no block overlaps another ---- */
static void test_random(const api_t *A) {
  enum { MAXLIVE = 1000, OPS = 120000 };
  static live_t v[MAXLIVE], sorted[MAXLIVE];
  static uint64_t seeds[MAXLIVE];
  size_t nv = 0;
  uint64_t rng = 0x1234567;
  for (int op = 0; op < OPS; op++) {
    uint64_t r = tu_rand(&rng);
    int kind = (int)(r % 100);
    if (nv > 0 && (kind < 40 || nv == MAXLIVE)) { /* free or realloc */
      size_t i = (size_t)(tu_rand(&rng) % nv);
      size_t bad = tu_verify(v[i].p, v[i].n, seeds[i]);
      CHECKF(bad == 0, "%s: block %p of %zu bytes corrupted at %zu", A->name,
             v[i].p, v[i].n, bad - 1);
      if (kind < 30 || nv == MAXLIVE) {
        A->free(v[i].p);
        v[i] = v[--nv];
        seeds[i] = seeds[nv];
      } else {
        size_t n = (size_t)(tu_rand(&rng) % (kind & 1 ? 512 : 300000));
        void *q = A->realloc(v[i].p, n);
        if (n && good_block(A, q, n, "realloc")) {
          CHECK(tu_verify(q, v[i].n < n ? v[i].n : n, seeds[i]) == 0);
          v[i].p = q;
          v[i].n = n;
          tu_fill(q, n, seeds[i]);
        } else if (!n) {
          v[i] = v[--nv];
          seeds[i] = seeds[nv];
        }
      }
      continue;
    }
    size_t n;
    uint64_t sr = tu_rand(&rng);
    if (sr % 1000 == 0)
      n = (size_t)(sr % (8 * MiB));
    else if (sr % 50 == 0)
      n = (size_t)(sr % (512 * KiB));
    else if (sr % 5 == 0)
      n = (size_t)(sr % (32 * KiB));
    else
      n = (size_t)(sr % 300);
    void *p;
    if (kind < 85) {
      p = A->malloc(n);
    } else if (kind < 95) {
      p = A->calloc(1, n);
      if (p) CHECKF(tu_nonzero(p, n) == 0, "%s calloc(1, %zu) not zeroed", A->name, n);
    } else if (A->memalign) {
      size_t al = (size_t)16 << (sr % 10);
      p = A->memalign(al, n);
      if (p) CHECK(ALIGNED(p, al));
    } else {
      p = A->malloc(n);
    }
    if (!good_block(A, p, n, "random alloc")) continue;
    seeds[nv] = r;
    tu_fill(p, n, r);
    v[nv].p = p;
    v[nv++].n = n;
    if (op % 10000 == 0) {
      memcpy(sorted, v, nv * sizeof v[0]);
      check_disjoint(A, sorted, nv);
    }
  }
  for (size_t i = 0; i < nv; i++) {
    CHECK(tu_verify(v[i].p, v[i].n, seeds[i]) == 0);
    A->free(v[i].p);
  }
}

/* ---- memory that libc allocates inside its own functions ---- */
#ifdef _WIN32
/* The C runtime allocates for itself from its own heap; the program frees
 * such blocks with free(), which hands them back to the runtime. */
static void test_libc_internal(const api_t *A) {
  if (A != &std_api) return;
  for (int i = 0; i < 100; i++) {
    char *s = _strdup("hakozuna");
    CHECK(s && strcmp(s, "hakozuna") == 0);
    s = realloc(s, 5000 + (size_t)i);
    CHECK(s && strcmp(s, "hakozuna") == 0);
    free(s);
  }
}
#else
static int all_entries(const struct dirent *d) { return d != NULL; }

static void test_libc_internal(const api_t *A) {
  char *s = strdup("hakozuna");
  CHECK(s && strcmp(s, "hakozuna") == 0);
  A->free(s);
  char *a = NULL;
  CHECK(asprintf(&a, "%d-%s-%0500d", 42, "x", 7) > 500);
  A->free(a);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = fmemopen("one line\nsecond line\n", 21, "r");
  CHECK(f != NULL);
  if (f) {
    CHECK(getline(&buf, &len, f) == 9);
    CHECK(getline(&buf, &len, f) == 12);
    fclose(f);
  }
  A->free(buf);
  char *ms = NULL;
  size_t mslen = 0;
  FILE *m = open_memstream(&ms, &mslen);
  CHECK(m != NULL);
  if (m) {
    for (int i = 0; i < 10000; i++) fprintf(m, "%d,", i);
    fclose(m);
    CHECK(mslen > 10000 && strncmp(ms, "0,1,2,", 6) == 0);
    A->free(ms);
  }
  char *rp = realpath("/", NULL);
  CHECK(rp && strcmp(rp, "/") == 0);
  A->free(rp);
  char *cwd = getcwd(NULL, 0);
  CHECK(cwd != NULL);
  A->free(cwd);
  struct dirent **list;
  int n = scandir("/", &list, all_entries, alphasort);
  CHECK(n > 2);
  for (int i = 0; i < n; i++) A->free(list[i]);
  if (n >= 0) A->free(list);
}

#endif

/* ---- blocks from one set of names freed by another ---- */
static void test_mixing(void) {
  for (size_t i = 0; i < NAPIS; i++)
    for (size_t j = 0; j < NAPIS; j++) {
      const api_t *A = apis[i], *B = apis[j];
      static const size_t sizes[] = {100, 20 * KiB, 300 * KiB, 5 * MiB};
      for (size_t k = 0; k < 4; k++) {
        size_t n = sizes[k];
        void *p = A->malloc(n);
        if (!good_block(A, p, n, "malloc")) continue;
        CHECKF(B->usable(p) == A->usable(p), "%s vs %s usable size", A->name,
               B->name);
        tu_fill(p, n, k);
        void *q = B->realloc(p, 2 * n);
        if (good_block(B, q, 2 * n, "realloc")) {
          CHECK(tu_verify(q, n, k) == 0);
          p = q;
        }
        A->free(p);
        p = A->calloc(1, n);
        if (good_block(A, p, n, "calloc")) B->free(p);
      }
    }
}

/* ---- malloc_trim, mallinfo2, mallinfo ---- */
#ifdef __GLIBC__ /* (musl has no mallinfo) */
static void test_info(void) {
  enum { N = 128 };
  void *b[N];
  struct mallinfo2 m0 = mallinfo2();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  struct mallinfo o0 = mallinfo();
#pragma GCC diagnostic pop
  for (int i = 0; i < N; i++) {
    b[i] = malloc(64 * KiB);
    if (CHECK(b[i])) memset(b[i], i, 64 * KiB);
  }
  /* uordblks is what chunks handed out occupy, hblkhd what mmapped ones
   * do: 8 MiB in use must show in one of them. */
  struct mallinfo2 m1 = mallinfo2();
  size_t used0 = m0.uordblks + m0.hblkhd, used1 = m1.uordblks + m1.hblkhd;
  CHECKF(used1 >= used0 + N * 64 * KiB, "mallinfo2 in use %zu -> %zu after "
         "allocating 8 MiB", used0, used1);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  struct mallinfo o1 = mallinfo();
#pragma GCC diagnostic pop
  long oused0 = (long)(unsigned)o0.uordblks + (unsigned)o0.hblkhd;
  long oused1 = (long)(unsigned)o1.uordblks + (unsigned)o1.hblkhd;
  CHECKF(oused1 >= oused0 + (long)(N * 64 * KiB), "mallinfo in use %ld -> %ld "
         "after allocating 8 MiB", oused0, oused1);
  for (int i = 0; i < N; i++) free(b[i]);
  /* a mapped block counts once, in hblkhd (it was in uordblks too); of its
   * own mapping: malloc_trim gives back the cached ones, which a 24 MiB
   * block could otherwise reuse whole (up to 36 MiB, all counted) where
   * no purge delay ends (HAKOZUNA_PURGE_DELAY=-1, tools/options-sweep.sh) */
  malloc_trim(0);
  struct mallinfo2 h0 = mallinfo2();
  void *huge = malloc(24 * MiB);
  if (CHECK(huge)) memset(huge, 1, 24 * MiB);
  struct mallinfo2 h1 = mallinfo2();
  size_t grew = (h1.uordblks + h1.hblkhd) - (h0.uordblks + h0.hblkhd);
  CHECKF(grew >= 24 * MiB && grew < 32 * MiB, "mallinfo2 in use grew by %zu KiB for a 24 MiB block "
         "(uordblks %zu -> %zu, hblkhd %zu -> %zu)", grew / KiB, h0.uordblks, h1.uordblks, h0.hblkhd, h1.hblkhd);
  CHECKF(h1.arena >= h1.uordblks, "mallinfo2 arena %zu < uordblks %zu", h1.arena, h1.uordblks);
  free(huge);
  int t = malloc_trim(0);
  CHECKF(t == 0 || t == 1, "malloc_trim(0) = %d", t);
  t = malloc_trim(tu_opaque(MiB));
  CHECKF(t == 0 || t == 1, "malloc_trim(1 MiB) = %d", t);
}
#endif

#ifdef HZ_API
/* ---- what only the hz_* names have ---- */
static void *thread_done_worker(void *arg) {
  void **out = arg;
  for (int i = 0; i < 64; i++) {
    out[i] = hz_malloc((size_t)i * 40);
    if (CHECK(out[i])) tu_fill(out[i], (size_t)i * 40, i);
    if (i == 31) hz_thread_done(); /* keeps allocating afterwards */
  }
  return NULL;
}

static void test_hz_extras(void) {
  size_t prev = 0, ps = (size_t)hz_option_get(HZ_OPTION_PAGE_SIZE);
  CHECKF(ps >= page && (ps & (ps - 1)) == 0, "page_size option %zu", ps);
  /* A huge block that reuses a larger cached mapping still has the usable
   * size hz_good_size promises. */
  void *big = hz_malloc(tu_opaque(7 * MiB));
  CHECK(big);
  hz_free(big);
  void *reused = hz_malloc(tu_opaque(3 * MiB));
  if (CHECK(reused))
    CHECKF(hz_usable_size(reused) == hz_good_size(3 * MiB), "hz_usable_size(hz_malloc(3 MiB)) = %zu after a "
           "7 MiB block was freed, hz_good_size = %zu", hz_usable_size(reused), hz_good_size(3 * MiB));
  hz_free(reused);
  for (size_t n = 0; n <= 64 * MiB; n = n < 4096 ? n + 1 : n + n / 7) {
    size_t g = hz_good_size(n);
    CHECKF(g >= n && g >= prev, "hz_good_size(%zu) = %zu (previous %zu)", n, g,
           prev);
    prev = g;
    if (n % 3 == 0 || n > 4096) {
      void *p = hz_malloc(n);
      if (!CHECK(p)) continue;
      CHECKF(hz_usable_size(p) == g, "hz_usable_size(hz_malloc(%zu)) = %zu, "
             "hz_good_size = %zu", n, hz_usable_size(p), g);
      /* Large blocks are whole pages of the page size in use
       * (HAKOZUNA_PAGE_SIZE=65536: 64 KiB, two slices), and start at a
       * cache line of their first page that leaves the request in as
       * many pages (tests/heap/span_reuse). */
      if (n > 32 * KiB && n <= MiB)
        CHECKF((uintptr_t)p % 64 == 0 && g % ps == 0 && (uintptr_t)p % ps + n <= g, "hz_malloc(%zu) = %p, "
               "usable %zu: not whole %zu-byte pages", n, p, g, ps);
      hz_free_sized(p, n);
    }
  }
  /* free_sized with the requested size, for every kind of block */
  static const size_t sizes[] = {0, 1, 48, 1000, 20 * KiB, 200 * KiB, 16 * MiB};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *p = hz_calloc(1, sizes[i]);
    if (CHECK(p)) hz_free_sized(p, sizes[i]);
    p = hz_realloc(hz_malloc(1), sizes[i] + 1);
    if (CHECK(p)) hz_free_sized(p, sizes[i] + 1);
  }
  /* free_aligned_sized with the alignment and size aligned_alloc had */
  for (size_t a = 1; a <= 4 * MiB; a *= 4)
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      void *p = hz_aligned_alloc(a, sizes[i]);
      if (CHECK(p)) hz_free_aligned_sized(p, a, sizes[i]);
    }
  /* hz_collect keeps live blocks intact. */
  enum { N = 200 };
  void *b[N];
  for (int i = 0; i < N; i++) {
    b[i] = hz_malloc((size_t)i * 997);
    if (CHECK(b[i])) tu_fill(b[i], (size_t)i * 997, i);
    if (i % 2) {
      hz_free(b[i]);
      b[i] = NULL;
    }
  }
  hz_collect(0);
  hz_collect(1);
  for (int i = 0; i < N; i += 2) {
    CHECKF(tu_verify(b[i], (size_t)i * 997, i) == 0, "block %d changed by "
           "hz_collect", i);
    hz_free(b[i]);
  }
  /* hz_thread_done: the thread goes on allocating; its blocks stay valid. */
  void *tb[64];
  pthread_t th;
  CHECK(pthread_create(&th, NULL, thread_done_worker, tb) == 0);
  CHECK(pthread_join(th, NULL) == 0);
  for (int i = 0; i < 64; i++) {
    CHECKF(tu_verify(tb[i], (size_t)i * 40, i) == 0, "block %d", i);
    hz_free(tb[i]);
  }
  hz_thread_done();
  void *p = hz_malloc(100);
  CHECK(p);
  hz_free(p);
}

/* Internal waste: from 128 bytes to the largest span-backed block (2 MiB)
 * a block is at most an eighth larger than asked, with 4 KiB pages (above
 * 32 KiB blocks are page-granular), and what malloc gives is what
 * hz_good_size says; a large block grows in place within its span. */
static void test_waste(void) {
  /* the page size in use: HAKOZUNA_PAGE_SIZE=65536 (the 64k pass) makes
   * large blocks 64 KiB-granular, so the bound is checked on 4 KiB pages */
  size_t checked = 0, top = 2 * MiB, in_use = (size_t)hz_option_get(HZ_OPTION_PAGE_SIZE);
#ifdef HZ_CHECKED_TEST
  top -= 32 * KiB; /* the checked build's guard slice comes out of the span */
#endif
  for (size_t n = 129; n <= top && in_use == 4096; n++) {
    size_t g = hz_good_size(n);
    if (!CHECKF(g - n <= n / 8, "hz_good_size(%zu) = %zu: %.1f%% waste", n, g, 100.0 * (g - n) / n)) break;
    if (n % 4093 == 0 || (n > 32 * KiB && n % 4096 <= 1)) {
      void *q = hz_malloc(n);
      if (!CHECK(q)) break;
      CHECKF(hz_usable_size(q) == g, "hz_usable_size(hz_malloc(%zu)) = %zu, hz_good_size = %zu", n,
             hz_usable_size(q), g);
      hz_free(q);
      checked++;
    }
  }
  CHECK(in_use != 4096 || checked > 500);
  char *q = hz_malloc(40000);
  if (!CHECK(q)) return;
  tu_fill(q, 40000, 7);
  char *r = hz_realloc(q, 60000);
  if (!CHECK(r)) return;
#ifndef HZ_CHECKED_TEST
  CHECKF(r == q, "realloc 40000 -> 60000 moved the block");
#endif
  CHECK(tu_verify(r, 40000, 7) == 0);
  CHECKF(hz_usable_size(r) == hz_good_size(60000), "usable %zu after growing to 60000", hz_usable_size(r));
  /* and shrinks in place, its usable size following */
  char *r2 = hz_realloc(r, 40000);
  if (!CHECK(r2)) return;
  CHECKF(r2 == r, "realloc 60000 -> 40000 moved the block");
#ifndef HZ_CHECKED_TEST
  CHECKF(hz_usable_size(r2) == hz_good_size(40000), "usable %zu after shrinking to 40000", hz_usable_size(r2));
#endif
  CHECK(tu_verify(r2, 40000, 7) == 0);
  hz_free(r2);

  /* Huge blocks (mapped whole 4 MiB segments) are page-granular too: what
   * malloc_usable_size says is what programs count as their memory (ruby's
   * GC, redis's used_memory), so it may not be the mapping's size. */
  size_t ps = (size_t)hz_option_get(HZ_OPTION_PAGE_SIZE), guard = 0;
#ifdef HZ_CHECKED_TEST
  guard = ps;
#endif
  for (size_t n = 2 * MiB + 1; n <= 40 * MiB; n += 3 * MiB + 12345) {
    size_t g = hz_good_size(n);
    CHECKF(g >= n && g - n < ps, "hz_good_size(%zu) = %zu, more than a page of %zu over", n, g, ps);
    char *h = hz_malloc(n);
    if (!CHECK(h)) return;
    CHECKF(hz_usable_size(h) == g, "hz_usable_size(hz_malloc(%zu)) = %zu, hz_good_size = %zu", n, hz_usable_size(h), g);
    /* grows in place into the rest of its mapping, keeping its content */
    size_t top_of_map = (((uintptr_t)h + g + guard + 4 * MiB - 1) & ~(uintptr_t)(4 * MiB - 1)) - (uintptr_t)h - guard;
    tu_fill(h, n, 9);
    char *h2 = hz_realloc(h, top_of_map);
    if (!CHECK(h2)) return;
#ifndef HZ_CHECKED_TEST
    CHECKF(h2 == h, "realloc of a huge block %zu -> %zu (its mapping's end) moved it", n, top_of_map);
#endif
    CHECK(tu_verify(h2, n, 9) == 0);
    CHECKF(hz_usable_size(h2) >= top_of_map, "usable %zu after growing to %zu", hz_usable_size(h2), top_of_map);
    memset(h2, 1, top_of_map); /* every byte is there */
    /* shrinks in place to at least half, its usable size following */
    char *h3 = hz_realloc(h2, top_of_map / 2 + 1);
    if (!CHECK(h3)) return;
    CHECKF(h3 == h2, "realloc of a huge block %zu -> %zu moved it", top_of_map, top_of_map / 2 + 1);
#ifndef HZ_CHECKED_TEST
    CHECKF(hz_usable_size(h3) >= top_of_map / 2 + 1 && hz_usable_size(h3) - (top_of_map / 2 + 1) < ps,
           "usable %zu after shrinking to %zu", hz_usable_size(h3), top_of_map / 2 + 1);
#endif
    CHECK(h3[0] == 1 && h3[top_of_map / 4] == 1 && h3[top_of_map / 2] == 1);
    hz_free(h3);
  }
}
#endif

TEST_MAIN() {
  page = tu_page_size();
  for (size_t i = 0; i < NAPIS; i++) {
    const api_t *A = apis[i];
    test_basics(A);
    test_freed_words(A);
    test_sweep(A);
    test_realloc(A);
    test_calloc(A);
    test_impossible(A);
    test_bad_alignment(A);
    test_aligned(A);
    test_valloc(A);
    test_random(A);
    test_libc_internal(A);
  }
  test_mixing();
#ifdef __GLIBC__
  test_info();
#endif
#ifdef HZ_API
  test_hz_extras();
  test_waste();
#endif
  return 0;
}
