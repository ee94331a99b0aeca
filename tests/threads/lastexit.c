// SPDX-License-Identifier: MIT
/* tests/threads/lastexit.c: a process ends when its last thread ends, even
 * after the allocator has started a background thread of its own.
 *
 * Two ways a program's last thread can end without exit(): main() calls
 * pthread_exit() while a worker runs on, and a child forked from a worker
 * thread (whose only thread then returns). In both, the thread that ends
 * last has just freed memory that goes back to the OS after a delay (large
 * spans over the per-thread cache, a huge block), which is what starts
 * hakozuna's purge thread. If that thread kept the process alive, this test
 * hangs and the runner's timeout fails it; a watchdog in the parent fails
 * the forked case itself. */
#include <stdint.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Free enough memory, of the kinds that wait for a purge, to make sure. */
static void churn(void) {
  enum { N = 24 };
  void *p[N];
  for (int i = 0; i < N; i++) {
    size_t n = i < N - 2 ? (size_t)1 << 20 : (size_t)12 << 20; /* 1 MiB spans, 12 MiB huge */
    p[i] = malloc(n);
    if (p[i] == NULL) exit(3);
    memset(p[i], i, n);
  }
  for (int i = 0; i < N; i++) free(p[i]);
}

static void *worker_then_last(void *arg) {
  (void)arg;
  churn();
  return NULL; /* the process's last thread ends here */
}

/* Parent side of the fork case: the child must end within the watchdog. */
static void *forking_worker(void *arg) {
  (void)arg;
  pid_t pid = fork();
  if (pid < 0) exit(4);
  if (pid == 0) {
    /* the child's only thread: free, then end as a thread, not with exit */
    churn();
    pthread_exit(NULL);
  }
  int status = 0;
  alarm(20); /* SIGALRM kills the test if the child never ends */
  if (waitpid(pid, &status, 0) != pid) exit(5);
  alarm(0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) exit(6);
  return NULL;
}

int main(void) {
  /* case 1: fork from a thread, the child's last thread ends */
  pthread_t t;
  if (pthread_create(&t, NULL, forking_worker, NULL) != 0) return 7;
  if (pthread_join(t, NULL) != 0) return 8;
  /* case 2: main ends with pthread_exit, the worker ends last */
  if (pthread_create(&t, NULL, worker_then_last, NULL) != 0) return 9;
  pthread_exit(NULL);
}
