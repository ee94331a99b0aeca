// SPDX-License-Identifier: MIT
/* tests/init/fork_reclaim.c: after fork() the child has one thread; the
 * heaps of the parent's other threads must not stay "live" in it forever
 * (issue 10, case 7). Four threads allocate 500 blocks each and are still
 * running when main forks. The child must count one live thread heap, and
 * when it frees the blocks those threads allocated and calls hz_collect,
 * the blocks must come back (they wait in the inboxes of the lost threads'
 * heaps, which only abandoned heaps have emptied for them); then threads it
 * starts allocate and exit normally. */
#include "check.h"
#include "testutil.h"

#include <pthread.h>

#include "hakozuna.h"

#define THREADS 4
#define BLOCKS 500
#define SIZE 200

static void *blocks[THREADS][BLOCKS];
static pthread_barrier_t made;
static int release_pipe[2];

static size_t class_of(size_t usable) {
  hz_stats_t st = {.size = sizeof st};
  hz_stats_get(&st);
  for (size_t c = 0; c < st.class_count; c++)
    if (st.classes[c].block_size == usable) return c;
  return (size_t)-1;
}

static uint64_t live_in(size_t c) {
  hz_stats_t st = {.size = sizeof st};
  CHECK(hz_stats_get(&st) == 0);
  return st.classes[c].live;
}

static void *worker(void *arg) {
  void **mine = arg;
  for (int i = 0; i < BLOCKS; i++) {
    mine[i] = malloc(SIZE);
    if (CHECK(mine[i])) tu_fill(mine[i], SIZE, (uint64_t)i);
  }
  pthread_barrier_wait(&made);
  char c;
  CHECK(read(release_pipe[0], &c, 1) == 1); /* alive until main says */
  return NULL;
}

static void *child_worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) free(malloc((size_t)(i % 300) + 1));
  return NULL;
}

static int child_main(size_t cls) {
  hz_stats_t st = {.size = sizeof st};
  CHECK(hz_stats_get(&st) == 0);
  CHECKF(st.thread_count == 1, "%u live thread heaps in the child (1 thread)", st.thread_count);
  uint64_t before = live_in(cls);
  CHECKF(before >= THREADS * BLOCKS, "%llu live blocks of %d bytes before", (unsigned long long)before, SIZE);
  for (int t = 0; t < THREADS; t++)
    for (int i = 0; i < BLOCKS; i++) {
      CHECK(tu_verify(blocks[t][i], SIZE, (uint64_t)i) == 0);
      free(blocks[t][i]);
    }
  hz_collect(1);
  uint64_t after = live_in(cls);
  CHECKF(after == 0, "%llu blocks of %d bytes still live after freeing all and hz_collect (%llu before)",
         (unsigned long long)after, SIZE, (unsigned long long)before);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, child_worker, NULL) == 0);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  return check_failed() ? 1 : 0;
}

TEST_MAIN() {
  alarm(60);
  void *probe = malloc(SIZE);
  size_t cls = class_of(malloc_usable_size(probe));
  free(probe);
  if (!CHECKF(cls != (size_t)-1, "no class of %zu bytes", malloc_usable_size(probe))) return 1;
  CHECK(pipe(release_pipe) == 0);
  pthread_barrier_init(&made, NULL, THREADS + 1);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, blocks[i]) == 0);
  pthread_barrier_wait(&made);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    _exit(child_main(cls));
  }
  int st = -1;
  CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %s %d", WIFSIGNALED(st) ? "signal" : "exit status",
         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  CHECK(write(release_pipe[1], "xxxx", THREADS) == THREADS);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  for (int t2 = 0; t2 < THREADS; t2++)
    for (int i = 0; i < BLOCKS; i++) free(blocks[t2][i]);
  return 0;
}
