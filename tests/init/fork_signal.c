// SPDX-License-Identifier: MIT
/* tests/init/fork_signal.c: fork() from a signal handler in a program with
 * one thread, after glibc's malloc/tst-mallocfork (bug 838): another
 * process keeps sending SIGUSR1 while the program allocates and frees in
 * every size range and reads the allocator's statistics; the handler forks
 * and the child exits at once. The signal often lands while the allocator
 * holds one of its locks: an allocator that takes its locks before fork
 * then waits for itself (issue 10, case 6). ROUNDS rounds of up to
 * HZ_FORK_SIGNAL_SECONDS (0.7) or FORKS forks, each in a child that an
 * alarm ends if it hangs. */
#include "check.h"
#include "testutil.h"

#include <malloc.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#define ROUNDS 5
#define FORKS 3000

/* forks is shared with the sender, which stops at FORKS: a handler that
 * forks takes longer than the sender takes to send again, so the signal is
 * pending whenever one returns and the program's own loop, which ends the
 * round, no longer ran (rounds of 85,000 forks, and one past the 30 s
 * alarm, on an idle machine). */
static volatile sig_atomic_t *forks, fork_failures;

static void handler(int sig) {
  (void)sig;
  int saved = errno;
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  if (pid < 0) fork_failures++;
  else {
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    ++*forks;
  }
  errno = saved;
}

static int round_main(void *arg) {
  double seconds = *(double *)arg;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  void *shared = mmap(NULL, sizeof *forks, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (!CHECK(shared != MAP_FAILED)) return 1;
  forks = shared;
  double end = tu_now() + seconds;
  pid_t me = getpid(), sender = fork();
  if (sender == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    while (*forks < FORKS && tu_now() < end && kill(me, SIGUSR1) == 0) {}
    _exit(0);
  }
  if (!CHECK(sender > 0)) return 1;
  uint64_t rng = 12345;
  void *keep[64] = {0};
  for (long i = 0; *forks < FORKS && (i % 64 || tu_now() < end); i++) {
    uint64_t r = tu_rand(&rng);
    size_t n;
    switch (r % 8) {
    case 0: n = 3 * MiB + (size_t)(r >> 8) % (2 * MiB); break;   /* huge */
    case 1: case 2: n = 40 * KiB + (size_t)(r >> 8) % MiB; break; /* large */
    default: n = (size_t)(r >> 8) % 2048; break;                  /* small */
    }
    void **slot = &keep[(r >> 40) % 64];
    free(*slot);
    *slot = malloc(n);
    CHECK(*slot != NULL);
#ifdef __GLIBC__ /* (musl has no mallinfo) */
    if (r % 16 == 0) {
      struct mallinfo2 mi = mallinfo2(); /* walks every arena under its lock */
      CHECK(mi.uordblks > 0);
    }
#endif
  }
  kill(sender, SIGKILL);
  while (waitpid(sender, NULL, 0) < 0 && errno == EINTR) {}
  for (int i = 0; i < 64; i++) free(keep[i]);
  CHECKF(*forks > 0 && fork_failures == 0, "%d forks, %d failed", (int)*forks, (int)fork_failures);
  printf("%d forks from the signal handler\n", (int)*forks);
  fflush(stdout);
  return check_failed() ? 1 : 0;
}

TEST_MAIN() {
  double seconds = tu_env_double("HZ_FORK_SIGNAL_SECONDS", 0.7);
  for (int r = 0; r < ROUNDS && !check_failed(); r++) {
    char why[80];
    int st = tu_child(round_main, &seconds, 30, why, sizeof why);
    CHECKF(st == 0, "round %d: %s", r, why);
  }
  return 0;
}
