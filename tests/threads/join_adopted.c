// SPDX-License-Identifier: MIT
/* tests/threads/join_adopted.c: a thread that took over an exited thread's
 * heap joins another thread whose TLS holds a large block from that heap,
 * and must not hang.
 *
 * glibc frees a joined thread's TLS (here a dlopen'ed library's 256 KiB of
 * __thread data) in pthread_join when its stack cache overflows (a 64 MiB
 * stack: over its 40 MiB at once), holding the lock that pthread_create
 * takes. For the joiner that free is usually a remote one; but a heap whose
 * thread has exited goes to the next new thread, for which the block is its
 * own: its free started the purge thread with pthread_create, which waited
 * for that lock for ever (SIGKILL only). Each round: T touches the data and
 * gives its heap up (hz_thread_done); U, created after, takes that heap
 * over with a malloc and joins T; main joins U. Before each round main
 * waits, making no allocator call, until no purge thread runs (its name in
 * /proc/self/task), so that U's free finds none running. A hang shows as
 * the runner's timeout. Linked with hakozuna (hz_thread_done,
 * hz_option_set); the library is tests/threads/join_tls_lib.c at 256 KiB. */
#include "check.h"
#include "testutil.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <hakozuna.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { ROUNDS = 4 };
static unsigned (*touch)(unsigned char);
static pthread_t t_thread;
static atomic_int t_gone;

static void *t_main(void *arg) {
  (void)arg;
  CHECK(touch(7) == 7u + 8u);
  hz_thread_done(); /* its heap goes to the next new thread */
  atomic_store(&t_gone, 1);
  return NULL;
}

static void *u_main(void *arg) {
  (void)arg;
  free(tu_opaque_ptr(malloc(16))); /* takes T's heap over */
  CHECK(pthread_join(t_thread, NULL) == 0);
  return NULL;
}

/* Whether a thread named hakozuna-purge runs, read with system calls only
 * (opendir and stdio allocate, and a malloc may start the thread). */
static int purge_thread_runs(void) {
  int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
  if (dir < 0) return -1;
  char buf[4096], path[320], comm[32];
  int found = 0;
  long n;
  while (!found && (n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
    for (long off = 0; off < n;) {
      struct dirent64 *d = (struct dirent64 *)(buf + off);
      off += d->d_reclen;
      if (d->d_name[0] == '.') continue;
      snprintf(path, sizeof path, "/proc/self/task/%s/comm", d->d_name);
      int fd = open(path, O_RDONLY);
      if (fd < 0) continue;
      ssize_t k = read(fd, comm, sizeof comm - 1);
      close(fd);
      if (k > 0 && strncmp(comm, "hakozuna-purge", 14) == 0) found = 1;
    }
  }
  close(dir);
  return found;
}

TEST_MAIN() {
  static char path[4096];
  if (!CHECK(tu_path_beside_exe(path, sizeof path, "libjoinadopted.so") == 0)) return 1;
  void *lib = dlopen(path, RTLD_NOW);
  if (!CHECKF(lib != NULL, "dlopen %s: %s", path, dlerror())) return 1;
  touch = (unsigned (*)(unsigned char))dlsym(lib, "join_tls_touch");
  if (!CHECK(touch != NULL)) return 1;
  CHECK(hz_option_set(HZ_OPTION_PURGE_DELAY, 1) == 0); /* the thread ends soon after its work */
  pthread_attr_t big;
  pthread_attr_init(&big);
  pthread_attr_setstacksize(&big, (size_t)64 << 20);
  for (int round = 0; round < ROUNDS; round++) {
    double give_up = tu_now() + 10;
    int runs;
    while ((runs = purge_thread_runs()) == 1 && tu_now() < give_up) sched_yield();
    if (!CHECKF(runs == 0, "round %d: the purge thread still runs after 10 s (or /proc unreadable)", round)) break;
    atomic_store(&t_gone, 0);
    if (!CHECK(pthread_create(&t_thread, &big, t_main, NULL) == 0)) break;
    while (!atomic_load(&t_gone)) sched_yield();
    pthread_t u;
    if (!CHECK(pthread_create(&u, NULL, u_main, NULL) == 0)) break;
    CHECK(pthread_join(u, NULL) == 0);
  }
  pthread_attr_destroy(&big);
  printf("%d rounds\n", ROUNDS);
  return 0;
}
