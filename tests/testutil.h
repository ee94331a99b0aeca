// SPDX-License-Identifier: MIT
/* tests/testutil.h: helpers shared by the tests (patterns, sizes, RSS, time).
 * Only the standard C library and the OS's interfaces (Linux, Windows):
 * nothing of hakozuna's. */
#ifndef HZ_TEST_UTIL_H
#define HZ_TEST_UTIL_H

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hakozuna.h>
#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <psapi.h>
#else
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#ifdef _WIN32
/* The Windows C runtime has none of these names; the Windows tests link
 * hakozuna and use its own (docs/windows.md: what is redirected). */
#include "hakozuna.h"
#define aligned_alloc hz_aligned_alloc
#define malloc_usable_size hz_usable_size
static inline int tu_win_malloc_trim(size_t pad) { /* (a function: a call as a statement, unused result) */
  (void)pad;
  hz_collect(1);
  return 1;
}
#define malloc_trim tu_win_malloc_trim
#endif

/* The OS page size. */
static inline size_t tu_page_size(void) {
#ifdef _WIN32
  SYSTEM_INFO si;
  GetSystemInfo(&si);
  return si.dwPageSize;
#else
  return (size_t)sysconf(_SC_PAGESIZE);
#endif
}

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* Hide a value from the optimiser, so that e.g. malloc(SIZE_MAX) is really
 * called and not folded or warned about at compile time. */
static inline size_t tu_opaque(size_t v) {
  volatile size_t x = v;
  return x;
}
static inline void *tu_opaque_ptr(void *p) {
  void *volatile x = p;
  return x;
}

static inline uint64_t tu_mix(uint64_t x) { /* splitmix64 finaliser */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* xorshift64*: *state must start non-zero. */
static inline uint64_t tu_rand(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545f4914f6cdd1dull;
}

/* Byte i of a pattern depends only on seed and i, so a prefix can be checked
 * after realloc moved it. */
static inline uint64_t tu_word(uint64_t seed, size_t k) {
  return seed ^ ((uint64_t)(k + 1) * 0x9e3779b97f4a7c15ull);
}
static inline void tu_fill(void *p, size_t n, uint64_t seed) {
  unsigned char *b = (unsigned char *)p;
  size_t words = n / 8;
  for (size_t k = 0; k < words; k++) {
    uint64_t w = tu_word(seed, k);
    memcpy(b + 8 * k, &w, 8);
  }
  if (n % 8) {
    uint64_t w = tu_word(seed, words);
    memcpy(b + 8 * words, &w, n % 8);
  }
}
/* Returns 0 if p[0..n) holds the pattern, else 1 + the first bad offset. */
static inline size_t tu_verify(const void *p, size_t n, uint64_t seed) {
  const unsigned char *b = (const unsigned char *)p;
  size_t words = n / 8;
  for (size_t k = 0; k < words; k++) {
    uint64_t w = tu_word(seed, k);
    if (memcmp(b + 8 * k, &w, 8) != 0) {
      for (size_t i = 0; i < 8; i++)
        if (b[8 * k + i] != ((unsigned char *)&w)[i]) return 8 * k + i + 1;
    }
  }
  if (n % 8) {
    uint64_t w = tu_word(seed, words);
    for (size_t i = 0; i < n % 8; i++)
      if (b[8 * words + i] != ((unsigned char *)&w)[i]) return 8 * words + i + 1;
  }
  return 0;
}
/* Returns 0 if p[0..n) is all zero, else 1 + the first non-zero offset. */
static inline size_t tu_nonzero(const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    uint64_t w[8], acc = 0;
    memcpy(w, b + i, 64);
    for (int k = 0; k < 8; k++) acc |= w[k];
    if (acc) break;
  }
  for (; i < n; i++)
    if (b[i]) return i + 1;
  return 0;
}

static inline double tu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Until CLOCK_MONOTONIC reads t: for code that looks at how much time has
 * passed (hz_stash_adopt's owner that has not taken its inbox for a tick of
 * the coarse clock), not for waiting on another thread. */
static inline void tu_wait_until(double t) {
  while (tu_now() < t) {
#ifdef _WIN32
    Sleep(1);
#else
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
#endif
  }
}

/* Resident set size in bytes, from /proc/self/statm (-1 if unreadable). */
#ifdef _WIN32
static inline long tu_rss(void) {
  PROCESS_MEMORY_COUNTERS pmc;
  return K32GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc) ? (long)pmc.WorkingSetSize : -1;
}
#else
static inline long tu_rss(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = -1;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

/* The same in MiB, read with open/read: for a program that must make no
 * allocator call while it watches (stdio allocates). vm: the address space
 * instead (statm's size). */
static inline long tu_statm_mib_quiet(int vm) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  long size, resident;
  if (sscanf(buf, "%ld %ld", &size, &resident) != 2) return -1;
  return (vm ? size : resident) * sysconf(_SC_PAGESIZE) / (1 << 20);
}
static inline long tu_rss_mib_quiet(void) { return tu_statm_mib_quiet(0); }
#endif

/* The allocator's statistics now, into *st (hz_stats_get's result). */
static inline int tu_stats(hz_stats_t *st) {
  memset(st, 0, sizeof *st);
  st->size = sizeof *st;
  return hz_stats_get(st);
}

/* The size class whose blocks hold n bytes, or -1. */
static inline int tu_class_of(size_t n) {
  hz_stats_t st;
  if (tu_stats(&st) != 0) return -1;
  for (uint32_t c = 0; c < st.class_count; c++)
    if (st.classes[c].block_size >= n) return (int)c;
  return -1;
}

/* An environment variable as a number, or def. */
static inline double tu_env_double(const char *name, double def) {
  const char *v = getenv(name);
  return v && *v ? strtod(v, NULL) : def;
}

/* Threads of this process now, from /proc/self/status (-1 if unreadable).
 * Read without stdio: a malloc is activity, which keeps the purge thread
 * (purge.c) that callers wait to see end. */
#ifdef _WIN32
static inline int tu_threads(void) { return -1; }
#else
static inline int tu_threads(void) {
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  ssize_t len = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  if (len <= 0) return -1;
  buf[len] = 0;
  const char *at = strstr(buf, "\nThreads:");
  return at ? atoi(at + 9) : -1;
}
#endif

#ifndef _WIN32 /* no fork on Windows */
/* fn(arg) in a forked child, which an alarm ends after `seconds` (a hang
 * shows as SIGALRM) and which leaves with _exit(fn's result). Returns the
 * wait status, and describes it in why (when not a clean exit 0). */
static inline int tu_child(int (*fn)(void *), void *arg, unsigned seconds, char *why, size_t why_len) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(seconds);
    _exit(fn(arg));
  }
  int st = -1;
  if (pid > 0)
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (pid < 0) snprintf(why, why_len, "fork failed");
  else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) snprintf(why, why_len, "hung (killed after %us)", seconds);
  else if (WIFSIGNALED(st)) snprintf(why, why_len, "killed by signal %d", WTERMSIG(st));
  else snprintf(why, why_len, "exit status %d", WEXITSTATUS(st));
  return pid < 0 ? -1 : st;
}
#endif

#ifndef _WIN32 /* fork and POSIX descriptors */
/* fork() for a child meant to die of misuse: no core dump, killed by SIGALRM
 * after limit_s, its stderr into a pipe whose read end *err_fd gets (-1 in
 * the child). Returns fork()'s value. */
static inline pid_t tu_fork_capturing(int *err_fd, unsigned limit_s) {
  int errp[2];
  *err_fd = -1;
  if (pipe(errp) != 0) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    alarm(limit_s);
    dup2(errp[1], 2);
    close(errp[0]);
    *err_fd = -1;
  } else {
    *err_fd = errp[0];
  }
  close(errp[1]);
  return pid;
}

/* Read fd to its end (or cap - 1 bytes) into buf, NUL-terminated. */
static inline size_t tu_read_all(int fd, char *buf, size_t cap) {
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

#endif

#ifdef _WIN32 /* no fork: a child is this program started again */
typedef struct {
  HANDLE h;
  char *buf;
  size_t cap;
} tu_drain_t;

/* Reads a pipe to its end (or cap - 1 bytes, the rest discarded), NUL-terminated. */
static inline DWORD WINAPI tu_drain(void *arg) {
  tu_drain_t *d = (tu_drain_t *)arg;
  size_t len = 0;
  char sink[512];
  DWORD r;
  for (;;) {
    char *to = len < d->cap - 1 ? d->buf + len : sink;
    DWORD want = len < d->cap - 1 ? (DWORD)(d->cap - 1 - len) : (DWORD)sizeof sink;
    if (!ReadFile(d->h, to, want, &r, NULL) || r == 0) break;
    if (to != sink) len += r;
  }
  d->buf[len] = 0;
  return 0;
}

/* One try of tu_spawn_self below. */
static inline long long tu_spawn_once(const char *args, unsigned limit_s, char *out, size_t out_cap, char *err,
                                 size_t err_cap, int *hung) {
  char self[1024], cmd[1200];
  *hung = 0;
  out[0] = err[0] = 0;
  DWORD n = GetModuleFileNameA(NULL, self, sizeof self);
  if (n == 0 || n >= sizeof self) return -1;
  snprintf(cmd, sizeof cmd, "\"%s\" %s", self, args);
  SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
  HANDLE out_r, out_w, err_r, err_w;
  if (!CreatePipe(&out_r, &out_w, &sa, 0)) return -1;
  if (!CreatePipe(&err_r, &err_w, &sa, 0)) {
    CloseHandle(out_r);
    CloseHandle(out_w);
    return -1;
  }
  SetHandleInformation(out_r, HANDLE_FLAG_INHERIT, 0);
  SetHandleInformation(err_r, HANDLE_FLAG_INHERIT, 0);
  STARTUPINFOA si;
  memset(&si, 0, sizeof si);
  si.cb = sizeof si;
  si.dwFlags = STARTF_USESTDHANDLES;
  si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  si.hStdOutput = out_w;
  si.hStdError = err_w;
  PROCESS_INFORMATION pi;
  fflush(NULL);
  SetErrorMode(GetErrorMode() | SEM_NOGPFAULTERRORBOX); /* inherited by the child */
  BOOL started = CreateProcessA(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi);
  CloseHandle(out_w); /* the child's copies are its own: EOF when it ends */
  CloseHandle(err_w);
  long long code = -1;
  if (!started) *hung = -(int)GetLastError();
  if (started) {
    tu_drain_t d[2] = {{out_r, out, out_cap}, {err_r, err, err_cap}};
    HANDLE th[2] = {CreateThread(NULL, 0, tu_drain, &d[0], 0, NULL),
                    CreateThread(NULL, 0, tu_drain, &d[1], 0, NULL)};
    if (WaitForSingleObject(pi.hProcess, limit_s * 1000u) != WAIT_OBJECT_0) {
      *hung = 1;
      TerminateProcess(pi.hProcess, 99);
      WaitForSingleObject(pi.hProcess, INFINITE);
    }
    for (int i = 0; i < 2; i++) {
      if (th[i] != NULL) {
        WaitForSingleObject(th[i], INFINITE);
        CloseHandle(th[i]);
      } else {
        tu_drain(&d[i]); /* the child has ended: the pipe is at its end */
      }
    }
    DWORD st = 0;
    GetExitCodeProcess(pi.hProcess, &st);
    code = (long long)st;
    CloseHandle(pi.hProcess);
    CloseHandle(pi.hThread);
  }
  CloseHandle(out_r);
  CloseHandle(err_r);
  return code;
}
/* The Windows form of tu_fork_capturing: runs this program again as
 * `PROGRAM args`, its stdout into out and its stderr into err (each read by
 * a thread of its own, so neither pipe can fill and stall the child), and
 * ends it after limit_s (*hung is then 1). No crash dialog for a child that
 * faults. Returns its exit code (an exception's NTSTATUS, such as
 * 0xC0000005, stays positive), or -1 if it could not be started (the
 * Windows error code is then in *hung's place: *hung = -(GetLastError())). */
static inline long long tu_spawn_self(const char *args, unsigned limit_s, char *out, size_t out_cap, char *err,
                                      size_t err_cap, int *hung) {
  /* Under wine, CreateProcess now and then fails with ERROR_INTERNAL_ERROR:
   * the new process died in wine's own start-up, before any code of the
   * program ran (wine reports that as "startup not done, exit code 0").
   * That is the emulator's, so it gets two more tries, each one said. */
  long long code = -1;
  for (int tries = 0; tries < 3; tries++) {
    code = tu_spawn_once(args, limit_s, out, out_cap, err, err_cap, hung);
    if (code >= 0) break;
    fprintf(stderr, "tu_spawn_self: CreateProcess(%s) failed with Windows error %d (try %d of 3)\n", args, -*hung,
            tries + 1);
  }
  return code;
}
#endif

#ifndef _WIN32
/* The path of a file beside the test program (a library it dlopens): 0,
 * or -1 if it does not fit in size bytes. */
static inline int tu_path_beside_exe(char *buf, size_t size, const char *name) {
  ssize_t n = readlink("/proc/self/exe", buf, size);
  if (n <= 0 || (size_t)n >= size) return -1;
  buf[n] = 0;
  char *slash = strrchr(buf, '/');
  if (slash == NULL || (size_t)(slash + 1 - buf) + strlen(name) >= size) return -1;
  strcpy(slash + 1, name);
  return 0;
}
#endif

#endif /* HZ_TEST_UTIL_H */
