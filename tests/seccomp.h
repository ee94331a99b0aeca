// SPDX-License-Identifier: MIT
/* tests/seccomp.h: make system calls fail, as a sandbox does (a seccomp
 * filter: Chrome's and Firefox's content processes, systemd's
 * SystemCallFilter, container runtimes). Linux only. */
#ifndef HZ_TEST_SECCOMP_H
#define HZ_TEST_SECCOMP_H

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef TEST_AUDIT_ARCH
/* The start of a filter: calls of another architecture get other_arch, and
 * the rules that follow compare the system call's number. */
static inline int tu_filter_begin(struct sock_filter *code, unsigned other_arch) {
  int k = 0;
  code[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  code[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TEST_AUDIT_ARCH, 1, 0);
  code[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, other_arch);
  code[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  return k;
}
/* System call nr gets action. */
static inline int tu_filter_rule(struct sock_filter *code, int k, long nr, unsigned action) {
  code[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1);
  code[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
  return k;
}
/* Ends the filter with action for every other call and installs it. */
static inline int tu_filter_install(struct sock_filter *code, int k, unsigned action) {
  code[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
  struct sock_fprog prog = {(unsigned short)k, code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}
#endif

/* From now on, in this thread and the threads and children it makes, the
 * n system calls of nrs fail with err. 0, or -1 with errno set where no
 * filter can be installed (then the test skips). */
static inline int tu_refuse_syscalls(const long *nrs, int n, int err) {
#ifdef TEST_AUDIT_ARCH
  struct sock_filter code[5 + 2 * 16];
  if (n > 16) {
    errno = E2BIG;
    return -1;
  }
  int k = tu_filter_begin(code, SECCOMP_RET_ALLOW);
  for (int i = 0; i < n; i++) k = tu_filter_rule(code, k, nrs[i], SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA));
  return tu_filter_install(code, k, SECCOMP_RET_ALLOW);
#else
  (void)nrs, (void)n, (void)err;
  errno = ENOSYS;
  return -1;
#endif
}

/* From now on, in this thread and the threads and children it makes, only
 * the n system calls of allow are made; the m of deny fail with EACCES, and
 * any other kills the process (SIGSYS), as OpenSSH's pre-authentication
 * child's filter does. 0, or -1 with errno set where no filter can be
 * installed (then the test skips). */
static inline int tu_allow_only_syscalls(const long *allow, int n, const long *deny, int m) {
#ifdef TEST_AUDIT_ARCH
  struct sock_filter code[5 + 2 * 48];
  if (n + m > 48) {
    errno = E2BIG;
    return -1;
  }
  int k = tu_filter_begin(code, SECCOMP_RET_KILL_PROCESS);
  for (int i = 0; i < n; i++) k = tu_filter_rule(code, k, allow[i], SECCOMP_RET_ALLOW);
  for (int i = 0; i < m; i++) k = tu_filter_rule(code, k, deny[i], SECCOMP_RET_ERRNO | EACCES);
  return tu_filter_install(code, k, SECCOMP_RET_KILL_PROCESS);
#else
  (void)allow, (void)n, (void)deny, (void)m;
  errno = ENOSYS;
  return -1;
#endif
}

#endif /* HZ_TEST_SECCOMP_H */
