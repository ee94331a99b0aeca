// SPDX-License-Identifier: MIT
/* tests/misuse/trim_double.c: a double free of a block whose page
 * malloc_trim(0) returned is reported at that free, and the block is never
 * handed out twice.
 *
 * 4,000 blocks (1,000 bytes: a stashed class; 600: not), all but every
 * 200th freed (whole pages then hold only free blocks), malloc_trim(0),
 * then a second free of one of them, by this thread or by another, then
 * 4,000 mallocs, each filling its block with i & 0xff. The trim had zeroed
 * the block's free tag with its page, so the second free passed, pushed
 * the block, a malloc handed it out, and the refill that put the page's
 * blocks back handed it out again: two live blocks at one address. A check
 * of that refill (is the page still zero?) came next (heap.c, span_untrim),
 * but a block filled with zeros -- malloc #0 here, which with a stash is
 * the block freed twice -- leaves the page as the trim left it. Now frees
 * into a span with trimmed pages go through its heap's trap, and a block
 * of those pages is reported at the free itself (heap.c, trap_free; a
 * remote free where its owner takes it in). In a child: it must die of
 * SIGABRT with that report naming the block; again with HAKOZUNA_CHECK=0
 * (report, go on): no address may come back twice among the 4,000. Linked
 * with hakozuna (hz_option_set); not in the checked build, which trims no
 * page. */
#include "check.h"
#include "testutil.h"

#include <hakozuna.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/wait.h>

enum { N = 4000 };
static void *v[N], *w[N];

static void *free_it(void *p) {
  free(tu_opaque_ptr(p)); /* the double free, by another thread */
  return NULL;
}

static int scenario(size_t size, bool remote) {
  for (int i = 0; i < N; i++)
    if ((v[i] = malloc(size)) == NULL) return 5;
  for (int i = 0; i < N; i++)
    if (i % 200) free(v[i]);
  void *x = v[N / 2 + 7];
  fprintf(stderr, "block %p\n", x);
  malloc_trim(0);
  if (remote) {
    pthread_t t;
    if (pthread_create(&t, NULL, free_it, x) != 0 || pthread_join(t, NULL) != 0) return 6;
  } else {
    free(tu_opaque_ptr(x)); /* the double free */
  }
  for (int i = 0; i < N; i++) {
    if ((w[i] = malloc(size)) == NULL) return 5;
    memset(w[i], i & 0xff, size);
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < i; j++)
      if (w[i] == w[j]) {
        fprintf(stderr, "malloc #%d and #%d both returned %p\n", j, i, w[i]);
        return 3;
      }
  return 0;
}

static void run(size_t size, bool remote, bool tolerate) {
  int err;
  pid_t pid = tu_fork_capturing(&err, 30);
  if (pid == 0) {
    if (tolerate) hz_option_set(HZ_OPTION_CHECK, 0);
    _exit(scenario(size, remote));
  }
  if (!CHECK(pid > 0)) return;
  static char out[4096];
  tu_read_all(err, out, sizeof out);
  close(err);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  const char *how = remote ? "remote" : "local";
  void *x = NULL;
  char *line = strstr(out, "block ");
  CHECKF(line && sscanf(line, "block %p", &x) == 1, "%zu B %s: no block address from the child: %s", size, how, out);
  char want[128];
  snprintf(want, sizeof want, "double free of %p (block of", x);
  CHECKF(strstr(out, want) != NULL && strstr(out, "returned to the OS since its first free") != NULL,
         "%zu B %s (check=%d): no report of the free naming %p: %s", size, how, !tolerate, x, out);
  if (tolerate)
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%zu B %s (check=0): the child ended with status %#x: %s", size,
           how, st, out);
  else
    CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "%zu B %s: the child ended with status %#x, not SIGABRT: %s",
           size, how, st, out);
}

TEST_MAIN() {
  static const size_t sizes[] = {1000, 600};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    for (int remote = 0; remote <= 1; remote++) {
      run(sizes[i], remote, false);
      run(sizes[i], remote, true);
    }
  return 0;
}
