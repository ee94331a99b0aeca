// SPDX-License-Identifier: MIT
/* tests/arena/thp.c: segments get no transparent huge pages unless asked.
 *
 * Where the kernel's THP policy is "always" (Fedora's, RHEL's, Arch's
 * default), an anonymous mapping gets 2 MiB pages at its first touch: a
 * program holding 0.2 MiB of small blocks kept 2 MiB more resident, and
 * khugepaged fills 2 MiB ranges whose pages the purge gave back
 * (docs/perf.md §62). Without HAKOZUNA_THP, hakozuna marks its regions and
 * its huge blocks' mappings under 16 MiB MADV_NOHUGEPAGE (a 2.2 MB block's
 * last 2 MiB page held 1.8 MiB past it), and leaves bigger ones to the
 * kernel; with HAKOZUNA_THP=1, all are MADV_HUGEPAGE. Checked on the
 * mappings' VmFlags in /proc/self/smaps ("nh", "hg"), which say what was
 * asked whatever the policy, and where the policy is "always", on the
 * AnonHugePages of the regions after 8 MiB of small blocks were written.
 * Fails without the advice (no "nh": 2 MiB pages under "always").
 * Skipped on a kernel without THP. */
#include "check.h"
#include "testutil.h"

#include <fcntl.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "hakozuna.h"

static char smaps[1 << 22];

/* The VmFlags and AnonHugePages (KiB) of the mapping that holds p. */
static int mapping_of(const void *p, char *flags, size_t n, long *huge_kb) {
  int fd = open("/proc/self/smaps", O_RDONLY);
  if (fd < 0) return -1;
  size_t len = 0;
  ssize_t r;
  while (len < sizeof smaps - 1 && (r = read(fd, smaps + len, sizeof smaps - 1 - len)) > 0) len += (size_t)r;
  close(fd);
  smaps[len] = 0;
  bool in = false;
  for (char *line = smaps; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
      continue;
    }
    if (!in) continue;
    if (strncmp(line, "AnonHugePages:", 14) == 0) *huge_kb = strtol(line + 14, NULL, 10);
    if (strncmp(line, "VmFlags:", 8) == 0) {
      char *end = strchr(line, '\n');
      size_t k = end ? (size_t)(end - line) : strlen(line);
      if (k >= n) k = n - 1;
      memcpy(flags, line, k);
      flags[k] = 0;
      return 0;
    }
  }
  return -1;
}

static bool has_flag(const char *flags, const char *f) {
  char want[8];
  snprintf(want, sizeof want, " %s", f);
  for (const char *s = flags; (s = strstr(s, want)) != NULL; s++)
    if (s[strlen(want)] == ' ' || s[strlen(want)] == 0) return true;
  return false;
}

TEST_MAIN() {
  bool thp = argc > 1 && strcmp(argv[1], "--thp") == 0;
  char policy[64] = "";
  int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY);
  if (fd < 0) {
    printf("SKIP the kernel has no transparent huge pages\n");
    return 77; /* tests/run.sh: skipped */
  }
  ssize_t got = read(fd, policy, sizeof policy - 1);
  close(fd);
  policy[got > 0 ? got - 1 : 0] = 0;
  printf("%s: THP policy %s\n", thp ? "HAKOZUNA_THP=1" : "default", policy);

  /* blocks of every kind that lives in segments (small, medium, large), a
   * huge block of 3 MB (a mapping of its own, under 16 MiB) and one of 40 MB,
   * which follows the kernel's policy without HAKOZUNA_THP */
  size_t sizes[] = {64, 20000, 100000, 3000000, 40000000};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    char *p = malloc(sizes[i]), flags[512] = "";
    long huge_kb = -1;
    if (!CHECK(p != NULL)) return 1;
    memset(p, 1, sizes[i]);
    if (!CHECKF(mapping_of(p, flags, sizeof flags, &huge_kb) == 0, "no mapping in /proc/self/smaps holds %p", (void *)p))
      return 1;
    printf("%zu-byte block: %s\n", sizes[i], flags);
    if (thp)
      CHECKF(has_flag(flags, "hg") && !has_flag(flags, "nh"), "HAKOZUNA_THP=1: the mapping is not MADV_HUGEPAGE");
    else if (sizes[i] < 16 << 20)
      CHECKF(has_flag(flags, "nh") && !has_flag(flags, "hg"), "the mapping is not MADV_NOHUGEPAGE without HAKOZUNA_THP");
    else
      CHECKF(!has_flag(flags, "nh") && !has_flag(flags, "hg"), "a mapping of 40 MB has advice without HAKOZUNA_THP");
    free(p);
  }

  if (!thp) {
    /* 8 MiB of 48-byte blocks, every one written: under "always", 2 MiB
     * pages would back them at their first touch */
    enum { N = 8 << 20 >> 6 };
    static char *b[N];
    for (int i = 0; i < N; i++) {
      b[i] = malloc(48);
      if (!CHECK(b[i] != NULL)) return 1;
      memset(b[i], 2, 48);
    }
    long huge_kb = -1;
    char flags[512];
    CHECK(mapping_of(b[N / 2], flags, sizeof flags, &huge_kb) == 0);
    printf("8 MiB of small blocks: AnonHugePages %ld kB in their region\n", huge_kb);
    CHECKF(huge_kb == 0, "%ld kB of huge pages in a region without HAKOZUNA_THP (policy %s)", huge_kb, policy);
    for (int i = 0; i < N; i++) free(b[i]);

    /* and HAKOZUNA_THP=1 asks for them */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      setenv("HAKOZUNA_THP", "1", 1);
      execl("/proc/self/exe", argv[0], "--thp", (char *)NULL);
      _exit(127);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the run with HAKOZUNA_THP=1 failed (status %#x)", status);
  }
  return check_failed() ? 1 : 0;
}
