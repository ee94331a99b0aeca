// SPDX-License-Identifier: MIT
/* runchild [-e NAME=VALUE]... PROG [ARGS...]
 *
 * Runs PROG as a child with the given variables added to its environment
 * (LD_PRELOAD among them), waits for it with wait4 and prints its peak RSS as
 * the last line on stderr:
 *   RUNCHILD maxrss_kb=N status=S
 * then exits with the child's status (128 + signal when it was killed).
 *
 * Why not wait4 from the runner directly: Linux carries a process's peak RSS
 * across exec, and a child forked (or vforked) by the Python runner starts
 * with the runner's peak, so every benchmark would report at least the
 * runner's size. This program is small and does not load the allocator under
 * test itself, so its child's peak RSS is the benchmark's own. SIGTERM and
 * SIGINT sent to the process group reach the child; this program ignores
 * them so that it can still report. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int i = 1;
    while (i + 1 < argc && strcmp(argv[i], "-e") == 0)
        i += 2;
    if (i >= argc) {
        fprintf(stderr, "usage: %s [-e NAME=VALUE]... PROG [ARGS...]\n", argv[0]);
        return 127;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("runchild: fork");
        return 127;
    }
    if (pid == 0) {
        for (int k = 1; k < i; k += 2)
            if (putenv(argv[k + 1]) != 0)
                _exit(127);
        execvp(argv[i], argv + i);
        fprintf(stderr, "runchild: cannot run %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("runchild: wait4");
            return 127;
        }
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    fflush(stdout);
    fprintf(stderr, "\nRUNCHILD maxrss_kb=%ld status=%d\n", ru.ru_maxrss, code);
    return code;
}
