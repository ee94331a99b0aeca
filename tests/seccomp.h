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

/* From now on, in this thread and the threads and children it makes, the
 * n system calls of nrs fail with err. 0, or -1 with errno set where no
 * filter can be installed (then the test skips). */
static inline int tu_refuse_syscalls(const long *nrs, int n, int err) {
#ifdef TEST_AUDIT_ARCH
  struct sock_filter code[4 + 2 * 16 + 1];
  int k = 0;
  if (n > 16) {
    errno = E2BIG;
    return -1;
  }
  code[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  code[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TEST_AUDIT_ARCH, 1, 0);
  code[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  code[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  for (int i = 0; i < n; i++) {
    code[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nrs[i], 0, 1);
    code[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA));
  }
  code[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  struct sock_fprog prog = {(unsigned short)k, code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
  (void)nrs, (void)n, (void)err;
  errno = ENOSYS;
  return -1;
#endif
}

#endif /* HZ_TEST_SECCOMP_H */
