// SPDX-License-Identifier: MIT
/* tests/init/reenter.c SHIM: runs itself three times with SHIM (built from
 * tests/init/alloc_shim.c) preloaded before the allocator ($HZ_LIB), so
 * that sysconf's CPU count and getenv allocate while the allocator starts
 * up (issue 10, case 2). The first malloc must return (a watchdog kills a
 * hung run), and so must everything after it: threads, the options read
 * from the environment (HAKOZUNA_PURGE_DELAY=7), sysconf itself. The
 * runner starts it on glibc: the preloaded runs test hakozuna. */
#include "check.h"
#include "testutil.h"

#include <dlfcn.h>
#include <pthread.h>

#include "hakozuna.h"

static void *worker(void *arg) {
  for (int i = 0; i < 1000; i++) {
    size_t n = (size_t)(i * 37 % 5000) + (size_t)(uintptr_t)arg;
    char *p = malloc(n);
    if (!CHECK(p)) break;
    tu_fill(p, n, n);
    CHECK(tu_verify(p, n, n) == 0);
    free(p);
  }
  return NULL;
}

static int preloaded_main(void) {
#ifdef __GLIBC__ /* (the shim calls glibc's own; musl has no such name) */
  CHECKF(dlsym(RTLD_DEFAULT, "__sysconf") != NULL && sysconf(_SC_NPROCESSORS_CONF) >= 1,
         "the shim's sysconf answers");
#else
  CHECKF(sysconf(_SC_NPROCESSORS_CONF) >= 1, "the shim's sysconf answers");
#endif
  pthread_t t[4];
  for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
  for (int i = 0; i < 4; i++) CHECK(pthread_join(t[i], NULL) == 0);
  if (hz_strict()) {
    long (*option_get)(hz_option_t) = (long (*)(hz_option_t))dlsym(RTLD_DEFAULT, "hz_option_get");
    if (CHECKF(option_get != NULL, "hz_option_get is in the process"))
      CHECKF(option_get(HZ_OPTION_PURGE_DELAY) == 7, "purge_delay %ld, HAKOZUNA_PURGE_DELAY=7 in the environment",
             option_get(HZ_OPTION_PURGE_DELAY));
  }
  return check_failed() ? 1 : 0;
}

TEST_MAIN() {
  if (getenv("HZ_REENTER_RUN")) return preloaded_main();
  const char *lib = getenv("HZ_LIB");
  if (!CHECKF(argc == 2 && lib, "usage: HZ_LIB=libhakozuna.so %s SHIM", argv[0])) return 1;
  char preload[4096];
  snprintf(preload, sizeof preload, "%s %s", argv[1], lib);
  for (int round = 0; round < 3 && !check_failed(); round++) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("LD_PRELOAD", preload, 1);
      setenv("HZ_REENTER_RUN", "1", 1);
      setenv("HZ_TEST_TARGET", "hakozuna", 1);
      setenv("HAKOZUNA_PURGE_DELAY", "7", 1);
      alarm(20); /* kept across exec: a hang ends by SIGALRM */
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    int st = -1;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "round %d: %s %d (SIGALRM %d = hung)", round,
           WIFSIGNALED(st) ? "killed by signal" : "exit status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
           SIGALRM);
  }
  return 0;
}
