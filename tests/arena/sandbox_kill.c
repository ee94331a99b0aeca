// SPDX-License-Identifier: MIT
/* tests/arena/sandbox_kill.c: malloc makes no system call that a strict
 * sandbox kills for.
 *
 * OpenSSH's pre-authentication child installs a seccomp filter that allows
 * what glibc's malloc needs (brk, mmap, munmap, mremap, madvise, mprotect,
 * futex, getrandom), time, sleeps and plain I/O, refuses open and stat with
 * EACCES, and kills the process on anything else. hakozuna read RLIMIT_AS
 * (getrlimit, the prlimit64 system call) each time it reserved a region of
 * segments, and a sandboxed process whose heap outgrew its region was
 * killed with SIGSYS (a helper's sshd runs, 2026-11-29). Here a
 * single-threaded child, after its first malloc, installs such a filter and
 * then grows its heap to 96 MiB of blocks of 16 B-300 KB (several new
 * regions), frees every other one, callocs blocks of 1.5 and 3 MiB in
 * freed memory and writes 64 KiB of each (calloc clears reused memory where
 * it is resident, which it read with mincore: systemd's
 * SystemCallFilter=@system-service kills for that one too), grows huge
 * blocks with realloc, calls malloc_trim and frees the rest; every block is
 * filled from its address and checked before its free. It must exit 0: a
 * signal (SIGSYS) is a system call the allocator should not have made.
 * Runs on glibc too, which shows the filter allows what a malloc needs.
 * Skipped where a filter cannot be installed, under qemu, and with
 * HAKOZUNA_PURGE_THREAD=2. */
#include "check.h"
#include "seccomp.h"
#include "testutil.h"

#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

enum { MAX_BLOCKS = 20000 };
static char *blocks[MAX_BLOCKS];
static size_t lens[MAX_BLOCKS];
static int bad;

static void drop(int i) {
  if (blocks[i] == NULL) return;
  if (tu_verify(blocks[i], lens[i], (uint64_t)(uintptr_t)blocks[i]) != 0) bad++;
  free(blocks[i]);
  blocks[i] = NULL;
}

static void work(void) {
  uint64_t r = 12345, total = 0;
  int n = 0;
  while (total < 96 * MiB && n < MAX_BLOCKS) {
    r = r * 6364136223846793005u + 1442695040888963407u;
    size_t len = (r >> 40) % 4 == 0 ? 32768 + (r >> 20) % 270000 : 16 + (r >> 24) % 4000;
    char *p = malloc(len);
    if (p == NULL) {
      bad++;
      break;
    }
    tu_fill(p, len, (uint64_t)(uintptr_t)p);
    blocks[n] = p, lens[n++] = len, total += len;
  }
  for (int i = 0; i < n; i += 2) drop(i);
  for (int round = 0; round < 8; round++) { /* calloc of freed memory, which it clears */
    size_t len = (round % 2 ? 6 : 3) * MiB / 2;
    char *p = calloc(1, len);
    if (p == NULL || tu_nonzero(p, len) != 0) bad++;
    if (p != NULL) memset(p + (size_t)round * 40000 % len, 1, 64 << 10 < len ? 64 << 10 : len);
    free(p);
  }
  for (int round = 0; round < 6; round++) { /* huge blocks, grown in place or moved */
    size_t len = (size_t)(3 + round) << 20;
    char *p = malloc(len);
    if (p == NULL) {
      bad++;
      continue;
    }
    tu_fill(p, len, 7);
    char *q = realloc(p, 2 * len);
    if (q == NULL || tu_verify(q, len, 7) != 0) bad++;
    free(q != NULL ? q : p);
  }
  malloc_trim(0);
  for (int i = 1; i < n; i += 2) drop(i);
  malloc_trim(0);
}

TEST_MAIN() {
  const char *mode = getenv("HAKOZUNA_PURGE_THREAD");
  if (mode != NULL && atoi(mode) == 2) { /* (tools/options-sweep.sh sets it) */
    printf("SKIP HAKOZUNA_PURGE_THREAD=2 starts a thread, which such a sandbox forbids (README)\n");
    return 77;
  }
  pid_t pid = fork();
  if (pid == 0) {
    free(malloc(16)); /* (start-up happens before the sandbox, as in sshd) */
    static const long allow[] = {
      SYS_read, SYS_write, SYS_close, SYS_exit, SYS_exit_group, SYS_brk, SYS_mmap, SYS_munmap, SYS_mremap,
      SYS_madvise, SYS_mprotect, SYS_futex, SYS_getrandom, SYS_clock_gettime, SYS_gettimeofday,
      SYS_clock_nanosleep, SYS_nanosleep, SYS_rt_sigprocmask, SYS_getpid, SYS_gettid, SYS_ppoll,
#ifdef SYS_poll
      SYS_poll,
#endif
    };
    static const long deny[] = {
      SYS_openat, SYS_fstat, SYS_newfstatat,
#ifdef SYS_open
      SYS_open,
#endif
#ifdef SYS_stat
      SYS_stat,
#endif
#ifdef SYS_statx
      SYS_statx,
#endif
    };
    if (tu_allow_only_syscalls(allow, (int)(sizeof allow / sizeof allow[0]), deny,
                               (int)(sizeof deny / sizeof deny[0])) != 0)
      _exit(77);
    work();
    _exit(bad != 0 ? 1 : 0);
  }
  int st = 0;
  if (!CHECK(pid > 0 && waitpid(pid, &st, 0) == pid)) return 1;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
    printf("SKIP seccomp filter: cannot be installed here\n");
    return 77;
  }
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0,
         "the sandboxed child ended with %s %d (signal %d, SIGSYS: a system call outside the sandbox's list; "
         "status 1: a block was NULL or changed)",
         WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), SIGSYS);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) printf("the sandboxed child grew to 96 MiB and gave it back\n");
  return 0;
}
