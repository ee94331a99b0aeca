// SPDX-License-Identifier: MIT
/* tests/misuse/misuse.c: misuse must end the program with one line on stderr
 * and SIGABRT. Each case runs in a forked child; the parent checks how the
 * child died and what it printed:
 *
 *   hakozuna: free(): double free of 0x... (block of N bytes)
 *   hakozuna: free(): invalid pointer 0x... (not allocated by hakozuna)
 *   hakozuna: free(): invalid pointer 0x... (inside a block of N bytes at 0x...)
 *
 * (free, realloc or malloc_usable_size, as called). The pointer printed must
 * be the one passed, a block's start the block's, and N at least the size
 * the block was asked with. Cases: pointers not from the allocator (stack,
 * static data, other mmaps), pointers into the middle of small, medium,
 * large and huge blocks, double frees right away, after many other
 * allocations and frees, from another thread, through realloc, and after
 * realloc(p, 0); hz_free_sized with a wrong size. Runs on hakozuna only. */
#include "check.h"
#include "testutil.h"
#include "hakozuna.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#ifdef _WIN32
#include <io.h>
#else
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#endif

typedef enum { FN_FREE, FN_REALLOC, FN_USABLE } fn_t;
static const char *const fn_names[] = {"free", "realloc", "malloc_usable_size"};

/* What the child reports and the message must show. */
typedef enum { EXPECT_DOUBLE, EXPECT_FOREIGN, EXPECT_INSIDE, EXPECT_ABORT } expect_t;

typedef struct mcase {
  const char *what;
  fn_t fn;         /* the call that misuses */
  expect_t expect;
  size_t size;     /* of the block involved, or which foreign pointer */
  void (*run)(const struct mcase *c);
} mcase_t;

/* Through volatile pointers: the compiler must not see (or warn about) the
 * misuse, nor drop it. */
#ifdef _WIN32
/* On Windows free() and realloc() hand pointers hakozuna does not know to
 * the C runtime (whose blocks they may be): the hz_* names report them. */
static void (*volatile free_fn)(void *) = hz_free;
static void *(*volatile realloc_fn)(void *, size_t) = hz_realloc;
static size_t (*volatile usable_fn)(const void *) = hz_usable_size;
#define MAP_FAILED NULL
static void *map_pages(size_t n) { return VirtualAlloc(NULL, n, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE); }
#else
static void (*volatile free_fn)(void *) = free;
static void *(*volatile realloc_fn)(void *, size_t) = realloc;
static size_t (*volatile usable_fn)(void *) = malloc_usable_size;
static void *map_pages(size_t n) {
  return mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}
#endif
static void *(*volatile malloc_fn)(size_t) = malloc;

/* Exit status of a child whose churn reused the block (not the case meant). */
#define CHURN_REUSED 9

static int info_fd = -1;

/* Tell the parent which pointer is passed and which block it is in. */
static void report(const void *passed, const void *block, size_t size) {
  char buf[128];
  int n = snprintf(buf, sizeof buf, "%p %p %zu\n", passed, block, size);
  if (write(info_fd, buf, (size_t)n) != n) _exit(4);
}

static void call(fn_t fn, void *p) {
  switch (fn) {
  case FN_FREE: free_fn(p); break;
  case FN_REALLOC: realloc_fn(p, 100); break;
  case FN_USABLE: usable_fn(p); break;
  }
}

/* ---- pointers the allocator never handed out ---- */
enum { FOREIGN_STACK, FOREIGN_STATIC, FOREIGN_MMAP, FOREIGN_MMAP_4M, FOREIGN_N };
static const char *const foreign_names[] = {"stack", "static data", "mmap page",
                                            "mmap at a 4 MiB boundary"};
static char static_buf[8192] __attribute__((aligned(64)));

static void run_foreign(const mcase_t *c) {
  char stack_buf[256] __attribute__((aligned(16)));
  memset(stack_buf, 0, sizeof stack_buf);
  free_fn(malloc_fn(10)); /* the allocator is in use */
  char *p = NULL;
  switch (c->size) {
  case FOREIGN_STACK: p = stack_buf + 16; break;
  case FOREIGN_STATIC: p = static_buf + 64; break;
  case FOREIGN_MMAP:
    p = map_pages(4096);
    break;
  case FOREIGN_MMAP_4M: { /* where an allocator might look for a header */
    char *m = map_pages(12 * MiB);
    if (m == MAP_FAILED) _exit(5);
    p = (char *)(((uintptr_t)m + 4 * MiB - 1) & ~(uintptr_t)(4 * MiB - 1)) + 4096;
    break;
  }
  }
  if (p == MAP_FAILED) _exit(5);
  report(p, NULL, 0);
  call(c->fn, tu_opaque_ptr(p));
}

/* ---- pointers into the middle of a block ---- */
static void run_inside(const mcase_t *c) {
  char *p = malloc_fn(c->size);
  if (!p) _exit(5);
  memset(p, 1, c->size);
  char *q = p + ((c->size / 2) & ~(size_t)15);
  report(q, p, c->size);
  call(c->fn, q);
}

/* Past the end of a large block but inside its span: 40,000 bytes take 10
 * pages of a 64 KiB span, and the rest is no block. */
static void run_past_end(const mcase_t *c) {
  char *p = malloc_fn(c->size);
  if (!p) _exit(5);
  memset(p, 1, c->size);
  char *q = p + 48 * KiB;
  report(q, p, c->size);
  call(c->fn, q);
}

/* ---- double frees ---- */
static void run_double(const mcase_t *c) {
  void *p = malloc_fn(c->size);
  if (!p) _exit(5);
  memset(p, 2, c->size);
  report(p, p, c->size);
  free_fn(p);
  call(c->fn, p);
}

static void run_realloc0(const mcase_t *c) {
  void *p = malloc_fn(c->size);
  if (!p) _exit(5);
  report(p, p, c->size);
  if (realloc_fn(p, 0) != NULL) _exit(6); /* glibc: frees, returns NULL */
  call(c->fn, p);
}

static void *free_in_thread(void *p) {
  free_fn(p);
  return NULL;
}

/* First free here, the second in another thread. */
static void run_double_thread(const mcase_t *c) {
  void *p = malloc_fn(c->size);
  if (!p) _exit(5);
  report(p, p, c->size);
  free_fn(p);
  pthread_t th;
  if (pthread_create(&th, NULL, free_in_thread, p) != 0) _exit(5);
  pthread_join(th, NULL);
}

/* First free in another thread (a remote free), the second here. */
static void run_double_remote(const mcase_t *c) {
  void *p = malloc_fn(c->size);
  if (!p) _exit(5);
  report(p, p, c->size);
  pthread_t th;
  if (pthread_create(&th, NULL, free_in_thread, p) != 0) _exit(5);
  pthread_join(th, NULL);
  call(c->fn, p);
}

/* Many allocations and frees of other sizes between the two frees. The same
 * churn runs once before the block exists, so that it has its memory
 * already, and blocks of the same size stay live around it; if the churn
 * still reuses the block's memory the case cannot be run as meant (exit 3,
 * reported as such). */
static int churn(size_t target, const char *blk, size_t n) {
  static const size_t sizes[] = {16, 100, 1000, 5000, 20000, 70000, 200000, MiB};
  void *ring[32] = {0};
  int reused = 0;
  for (int i = 0; i < 4000; i++) {
    size_t s = sizes[i % 8];
    if (s * 4 > target && s < target * 4) continue; /* not the block's size */
    char *q = malloc_fn(s);
    if (!q) _exit(5);
    memset(q, 3, s < 256 ? s : 256);
    if (blk && q < blk + n && blk < q + usable_fn(q)) reused = 1;
    free_fn(ring[i % 32]);
    ring[i % 32] = q;
  }
  for (int i = 0; i < 32; i++) free_fn(ring[i]);
  return reused;
}

/* A freed huge block is known as freed until the purge delay unmaps it (a
 * second free after that meets memory that is no longer hakozuna's, and
 * reports a foreign pointer): the churn may take longer than the default
 * 100 ms on a slow or emulated machine, so the child waits a minute. */
static void keep_freed_blocks(void) {
#ifdef _WIN32
  int (*set)(hz_option_t, long) = hz_option_set;
#else
  int (*set)(int, long) = (int (*)(int, long))dlsym(RTLD_DEFAULT, "hz_option_set");
#endif
  if (set) set(HZ_OPTION_PURGE_DELAY, 60000);
}

static void run_double_churn(const mcase_t *c) {
  void *pins[8];
  keep_freed_blocks();
  churn(c->size, NULL, 0);
  for (int i = 0; i < 4; i++) pins[i] = malloc_fn(c->size);
  void *p = malloc_fn(c->size);
  for (int i = 4; i < 8; i++) pins[i] = malloc_fn(c->size);
  if (!p) _exit(5);
  report(p, p, c->size);
  free_fn(p);
  if (churn(c->size, p, c->size)) _exit(CHURN_REUSED);
  call(c->fn, p);
  for (int i = 0; i < 8; i++) free_fn(pins[i]);
}

static void run_free_sized(const mcase_t *c) {
#ifdef _WIN32
  void (*free_sized)(void *, size_t) = hz_free_sized;
#else
  void (*free_sized)(void *, size_t) =
      (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "hz_free_sized");
#endif
  if (!free_sized) _exit(7);
  void *p = malloc_fn(c->size);
  report(p, p, c->size);
  free_sized(p, c->size * 100 + 5000);
}

/* ---- the parent's side ---- */
static inline size_t read_all(int fd, char *buf, size_t cap) {
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fd, buf + len, cap - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
    if (len == cap - 1) break;
  }
  buf[len] = 0;
  return len;
}

/* The number after `key` in msg: decimal, or hex after "0x". Pointers (%p)
 * are always hex: glibc writes 0x, mingw's printf does not. */
static int parse_after(const char *msg, const char *key, uintptr_t *out, int pointer) {
  const char *s = strstr(msg, key);
  if (!s) return 0;
  s += strlen(key);
  char *end;
  *out = (uintptr_t)strtoull(s, &end, pointer || strncmp(s, "0x", 2) == 0 ? 16 : 10);
  return end != s;
}
static int number_after(const char *msg, const char *key, uintptr_t *out) { return parse_after(msg, key, out, 0); }
static int pointer_after(const char *msg, const char *key, uintptr_t *out) { return parse_after(msg, key, out, 1); }

static void check_message(const mcase_t *c, const char *msg, uintptr_t passed,
                          uintptr_t block, const char *name) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "hakozuna: %s(): ", fn_names[c->fn]);
  size_t len = strlen(msg);
  CHECKF(len > 0 && msg[len - 1] == '\n' && strchr(msg, '\n') == msg + len - 1,
         "%s: stderr is not one line: \"%s\"", name, msg);
  if (c->expect == EXPECT_ABORT) {
    CHECKF(strncmp(msg, "hakozuna: ", 10) == 0, "%s: stderr \"%s\"", name, msg);
    return;
  }
  if (!CHECKF(strncmp(msg, prefix, strlen(prefix)) == 0, "%s: stderr \"%s\" "
              "does not start with \"%s\"", name, msg, prefix))
    return;
  uintptr_t v;
  if (c->expect == EXPECT_DOUBLE) {
    CHECKF(pointer_after(msg, "double free of ", &v) && v == passed,
           "%s: stderr \"%s\", want double free of %#lx", name, msg,
           (unsigned long)passed);
    CHECKF(number_after(msg, "(block of ", &v) && v >= c->size,
           "%s: stderr \"%s\", want (block of >= %zu bytes)", name, msg, c->size);
    return;
  }
  CHECKF(pointer_after(msg, "invalid pointer ", &v) && v == passed,
         "%s: stderr \"%s\", want invalid pointer %#lx", name, msg,
         (unsigned long)passed);
  if (c->expect == EXPECT_FOREIGN) {
    CHECKF(strstr(msg, "(not allocated by hakozuna)") != NULL, "%s: stderr \"%s\"",
           name, msg);
    return;
  }
  CHECKF(number_after(msg, "(inside a block of ", &v) && v >= c->size,
         "%s: stderr \"%s\", want (inside a block of >= %zu bytes", name, msg,
         c->size);
  CHECKF(pointer_after(msg, " bytes at ", &v) && v == block,
         "%s: stderr \"%s\", want the block at %#lx", name, msg,
         (unsigned long)block);
}

#ifdef _WIN32
static const char *self_path;

static size_t read_handle(HANDLE h, char *buf, size_t cap) {
  size_t len = 0;
  DWORD r;
  while (len < cap - 1 && ReadFile(h, buf + len, (DWORD)(cap - 1 - len), &r, NULL) && r > 0) len += r;
  buf[len] = 0;
  return len;
}

/* Windows has no fork: the test runs itself with --case N, the report (its
 * stdout) and stderr in pipes; abort() ends a process with status 3. */
static int run_child(int index, const char *name, char *info, size_t info_cap, char *msg, size_t msg_cap) {
  SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
  HANDLE out_r, out_w, err_r, err_w;
  if (!CHECK(CreatePipe(&out_r, &out_w, &sa, 0) && CreatePipe(&err_r, &err_w, &sa, 0))) return 0;
  SetHandleInformation(out_r, HANDLE_FLAG_INHERIT, 0);
  SetHandleInformation(err_r, HANDLE_FLAG_INHERIT, 0);
  STARTUPINFOA si;
  memset(&si, 0, sizeof si);
  si.cb = sizeof si;
  si.dwFlags = STARTF_USESTDHANDLES;
  si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  si.hStdOutput = out_w;
  si.hStdError = err_w;
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "\"%s\" --case %d", self_path, index);
  PROCESS_INFORMATION pi;
  fflush(NULL);
  int started = CHECKF(CreateProcessA(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi),
                       "%s: CreateProcess(%s) failed (error %lu)", name, cmd, GetLastError());
  CloseHandle(out_w);
  CloseHandle(err_w);
  DWORD status = 0;
  if (started) {
    read_handle(out_r, info, info_cap);
    read_handle(err_r, msg, msg_cap);
    if (!CHECKF(WaitForSingleObject(pi.hProcess, 20000) == WAIT_OBJECT_0, "%s: child hangs", name))
      TerminateProcess(pi.hProcess, 99);
    GetExitCodeProcess(pi.hProcess, &status);
    CloseHandle(pi.hProcess);
    CloseHandle(pi.hThread);
  }
  CloseHandle(out_r);
  CloseHandle(err_r);
  if (!started) return 0;
  if (status == CHURN_REUSED) {
    CHECKF(0, "%s: the churn between the frees reused the block's memory: "
           "this case needs other churn sizes", name);
    return 0;
  }
  return CHECKF(status == 3, "%s: child exited with status %lu, want 3 (abort); stderr: \"%s\"", name,
                (unsigned long)status, msg);
}
#endif

static void run_case(const mcase_t *c, int index) {
  char name[160];
  if (c->expect == EXPECT_FOREIGN)
    snprintf(name, sizeof name, "%s(): %s", fn_names[c->fn], c->what);
  else
    snprintf(name, sizeof name, "%s(): %s, %zu bytes", fn_names[c->fn], c->what,
             c->size);
  char info[256], msg[4096];
  (void)index;
#ifdef _WIN32
  if (!run_child(index, name, info, sizeof info, msg, sizeof msg)) return;
#else
  int errp[2], infop[2];
  if (!CHECK(pipe(errp) == 0 && pipe(infop) == 0)) return;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    alarm(20);
    dup2(errp[1], 2);
    close(errp[0]);
    close(errp[1]);
    close(infop[0]);
    info_fd = infop[1];
    c->run(c);
    _exit(0); /* the misuse went unnoticed */
  }
  close(errp[1]);
  close(infop[1]);
  read_all(infop[0], info, sizeof info);
  read_all(errp[0], msg, sizeof msg);
  /* Under qemu-user (the arm64 run) the emulator adds its own line about
   * the child's signal: not part of the allocator's report. */
  char *emu = strstr(msg, "qemu: uncaught target signal ");
  if (emu != NULL && (emu == msg || emu[-1] == '\n')) *emu = 0;
  close(infop[0]);
  close(errp[0]);
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  if (WIFEXITED(st) && WEXITSTATUS(st) == CHURN_REUSED) {
    CHECKF(0, "%s: the churn between the frees reused the block's memory: "
           "this case needs other churn sizes", name);
    return;
  }
  if (!CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
              "%s: child %s %d, want SIGABRT; stderr: \"%s\"", name,
              WIFSIGNALED(st) ? "killed by signal" : "exited with status",
              WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), msg))
    return;
#endif
  void *passed = NULL, *block = NULL;
  size_t size = 0;
  if (!CHECKF(sscanf(info, "%p %p %zu", &passed, &block, &size) >= 2,
              "%s: no report from the child (\"%s\")", name, info))
    return;
  check_message(c, msg, (uintptr_t)passed, (uintptr_t)block, name);
}

/* Every case, in a fixed order (the Windows child finds its case by index). */
static int make_cases(mcase_t *out) {
  static const size_t sizes[] = {48, 20 * KiB, 200 * KiB, 16 * MiB};
  int n = 0;
  for (int fn = FN_FREE; fn <= FN_USABLE; fn++) {
    for (size_t w = 0; w < FOREIGN_N; w++)
      out[n++] = (mcase_t){foreign_names[w], fn, EXPECT_FOREIGN, w, run_foreign};
    for (int i = 0; i < 4; i++)
      out[n++] = (mcase_t){"pointer inside a block", fn, EXPECT_INSIDE, sizes[i], run_inside};
    out[n++] = (mcase_t){"pointer past a large block", fn, EXPECT_INSIDE, 40000, run_past_end};
  }
  for (int i = 0; i < 4; i++) {
    const mcase_t cs[] = {
        {"double free", FN_FREE, EXPECT_DOUBLE, sizes[i], run_double},
        {"realloc of a freed block", FN_REALLOC, EXPECT_DOUBLE, sizes[i], run_double},
        {"double free after churn", FN_FREE, EXPECT_DOUBLE, sizes[i], run_double_churn},
        {"second free in another thread", FN_FREE, EXPECT_DOUBLE, sizes[i],
         run_double_thread},
        {"first free in another thread", FN_FREE, EXPECT_DOUBLE, sizes[i],
         run_double_remote},
        {"free after realloc(p, 0)", FN_FREE, EXPECT_DOUBLE, sizes[i], run_realloc0},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) out[n++] = cs[k];
  }
  out[n++] = (mcase_t){"hz_free_sized with a wrong size", FN_FREE, EXPECT_ABORT, 100, run_free_sized};
  return n;
}

TEST_MAIN() {
  static mcase_t cases[64];
  int n = make_cases(cases);
#ifdef _WIN32
  if (argc == 3 && strcmp(argv[1], "--case") == 0) { /* the child */
    int i = atoi(argv[2]);
    if (i < 0 || i >= n) return 2;
    info_fd = 1;
    cases[i].run(&cases[i]);
    _exit(0); /* the misuse went unnoticed */
  }
  self_path = argv[0];
#endif
  for (int i = 0; i < n; i++) run_case(&cases[i], i);
  printf("%d misuse cases\n", n);
  return 0;
}
