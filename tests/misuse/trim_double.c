// SPDX-License-Identifier: MIT
/* tests/misuse/trim_double.c: a double free of a block whose page
 * malloc_trim(0) returned is reported, and the block is never handed out
 * twice.
 *
 * 4,000 1,000-byte blocks, all but every 200th freed (whole pages then hold
 * only free blocks), malloc_trim(0), then a second free of one of them, then
 * 4,000 mallocs. The trim had zeroed the block's free tag with its page, so
 * the second free passed, pushed the block, a malloc handed it out, and the
 * refill that put the page's blocks back handed it out again: two live
 * blocks at one address, silently. Now that refill finds the page written
 * and reports (heap.c, span_untrim). The mallocs write a byte that is never
 * 0 into their blocks: the page's zeros are all the check has, and a block
 * that the program fills with zeros only is not told from one never
 * handed out (the class is stashed, docs/perf.md §71: the block freed twice
 * is the next malloc's, whose fill was all zeros when it was i & 0xff).
 * In a child: it must die of SIGABRT with
 * the report naming the block; again with HAKOZUNA_CHECK=0 (report, go on):
 * no address may come back twice among the 4,000. Linked with hakozuna
 * (hz_option_set); not in the checked build, which trims no page. */
#include "check.h"
#include "testutil.h"

#include <hakozuna.h>
#include <malloc.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/wait.h>

enum { SIZE = 1000, N = 4000 };
static void *v[N], *w[N];

static int scenario(void) {
  for (int i = 0; i < N; i++)
    if ((v[i] = malloc(SIZE)) == NULL) return 5;
  for (int i = 0; i < N; i++)
    if (i % 200) free(v[i]);
  void *x = v[N / 2 + 7];
  fprintf(stderr, "block %p\n", x);
  malloc_trim(0);
  free(tu_opaque_ptr(x)); /* the double free */
  for (int i = 0; i < N; i++) {
    if ((w[i] = malloc(SIZE)) == NULL) return 5;
    memset(w[i], (i & 0xff) | 1, SIZE);
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < i; j++)
      if (w[i] == w[j]) {
        fprintf(stderr, "malloc #%d and #%d both returned %p\n", j, i, w[i]);
        return 3;
      }
  return 0;
}

static void run(bool tolerate) {
  int err;
  pid_t pid = tu_fork_capturing(&err, 30);
  if (pid == 0) {
    if (tolerate) hz_option_set(HZ_OPTION_CHECK, 0);
    _exit(scenario());
  }
  if (!CHECK(pid > 0)) return;
  static char out[4096];
  tu_read_all(err, out, sizeof out);
  close(err);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  void *x = NULL;
  char *line = strstr(out, "block ");
  CHECKF(line && sscanf(line, "block %p", &x) == 1, "no block address from the child: %s", out);
  char want[128];
  snprintf(want, sizeof want, "double free of %p", x);
  CHECKF(strstr(out, want) != NULL, "(check=%d) no report naming %p: %s", !tolerate, x, out);
  if (tolerate)
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "(check=0) the child ended with status %#x: %s", st, out);
  else
    CHECKF(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "the child ended with status %#x, not SIGABRT: %s", st, out);
}

TEST_MAIN() {
  run(false);
  run(true);
  return 0;
}
