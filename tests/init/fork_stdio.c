// SPDX-License-Identifier: MIT
/* tests/init/fork_stdio.c: fork while other threads use stdio, after
 * glibc's malloc/tst-malloc-fork-deadlock (bug 19431): threads fork, threads
 * read long lines with getline (which allocates holding the FILE's lock),
 * one thread calls fflush(NULL) (which holds the list of FILEs and waits
 * for each FILE's lock), another allocates. An allocator that takes its
 * locks in a pthread_atfork prepare handler closes a cycle there: the
 * forking thread holds the allocator's locks and waits for stdio's list,
 * the flusher holds that and waits for a reader's FILE, the reader holds
 * that and waits, inside malloc, for the allocator (issue 10, case 5).
 * ROUNDS rounds of HZ_FORK_STDIO_SECONDS (0.7) each, each in a child that
 * an alarm ends if it hangs. */
#include "check.h"
#include "testutil.h"

#include <pthread.h>

#define ROUNDS 4
#define FORKERS 2
#define READERS 3
#define LINES 16

static char path[64];
static volatile int stop;

static void *forker(void *arg) {
  long *forks = arg;
  while (!stop) {
    pid_t pid = fork();
    if (pid == 0) {
      free(malloc(100)); /* the child can allocate */
      _exit(0);
    }
    if (!CHECK(pid > 0)) break;
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ++*forks;
  }
  return NULL;
}

static void *reader(void *arg) {
  (void)arg;
  FILE *f = fopen(path, "r");
  if (!CHECK(f)) return NULL;
  while (!stop) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    if (n < 0) rewind(f);
    else CHECK(line[0] == 'a' + (n - 1) % 26);
    free(line);
  }
  fclose(f);
  return NULL;
}

static void *flusher(void *arg) {
  (void)arg;
  while (!stop) fflush(NULL);
  return NULL;
}

static void *allocator(void *arg) {
  uint64_t rng = (uintptr_t)arg + 1;
  while (!stop) {
    uint64_t r = tu_rand(&rng);
    size_t n = r % 100 == 0 ? (size_t)(r >> 8) % (4 * MiB) : (size_t)(r >> 8) % 4096;
    void *p = malloc(n);
    CHECK(p != NULL);
    free(p);
  }
  return NULL;
}

static int round_main(void *arg) {
  double seconds = *(double *)arg;
  pthread_t t[FORKERS + READERS + 2];
  long forks[FORKERS] = {0};
  int k = 0;
  for (int i = 0; i < FORKERS; i++) CHECK(pthread_create(&t[k++], NULL, forker, &forks[i]) == 0);
  for (int i = 0; i < READERS; i++) CHECK(pthread_create(&t[k++], NULL, reader, NULL) == 0);
  CHECK(pthread_create(&t[k++], NULL, flusher, NULL) == 0);
  CHECK(pthread_create(&t[k++], NULL, allocator, NULL) == 0);
  double end = tu_now() + seconds;
  while (tu_now() < end && !check_failed()) usleep(10000);
  stop = 1;
  for (int i = 0; i < k; i++) CHECK(pthread_join(t[i], NULL) == 0);
  CHECK(forks[0] + forks[1] > 0);
  return check_failed() ? 1 : 0;
}

TEST_MAIN() {
  /* LINES lines of 100 B to 3.2 MiB: getline's buffer goes through every
   * size range, small to huge. */
  snprintf(path, sizeof path, "/tmp/hz-fork-stdio-XXXXXX");
  int fd = mkstemp(path);
  if (!CHECK(fd >= 0)) return 1;
  FILE *f = fdopen(fd, "w");
  for (int i = 0; i < LINES; i++) {
    size_t n = (size_t)100 << (i % LINES);
    for (size_t j = 0; j < n; j++) fputc('a' + (int)(n % 26), f);
    fputc('\n', f);
  }
  CHECK(fclose(f) == 0);
  double seconds = tu_env_double("HZ_FORK_STDIO_SECONDS", 0.7);
  for (int r = 0; r < ROUNDS && !check_failed(); r++) {
    char why[80];
    int st = tu_child(round_main, &seconds, 30, why, sizeof why);
    CHECKF(st == 0, "round %d: %s", r, why);
  }
  unlink(path);
  return 0;
}
