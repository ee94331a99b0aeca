// SPDX-License-Identifier: MIT
/* tests/init/alloc_shim.c: a preloaded library (loaded before the
 * allocator) whose sysconf counts CPUs the way older glibcs do, by listing
 * /sys/devices/system/cpu with opendir, which mallocs, and whose getenv
 * allocates a scratch copy of the name. The allocator's start-up calls such
 * functions before malloc works: it must not wait for itself (issue 10,
 * case 2). */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __GLIBC__
extern long __sysconf(int name); /* glibc's own, under the one preloaded here */
#define real_sysconf __sysconf
#else /* (musl has no such name: the next definition, libc's) */
#include <dlfcn.h>
static long real_sysconf(int name) {
  static long (*next)(int);
  if (next == NULL) next = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
  return next(name);
}
#endif
extern char **environ;

long sysconf(int name) {
  if (name != _SC_NPROCESSORS_CONF && name != _SC_NPROCESSORS_ONLN) return real_sysconf(name);
  DIR *d = opendir("/sys/devices/system/cpu");
  if (d == NULL) return real_sysconf(name);
  long n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strncmp(e->d_name, "cpu", 3) == 0 && isdigit((unsigned char)e->d_name[3])) n++;
  closedir(d);
  return n > 0 ? n : 1;
}

char *getenv(const char *name) {
  size_t len = strlen(name);
  char *copy = malloc(len + 1);
  if (copy == NULL) return NULL;
  memcpy(copy, name, len + 1);
  char *found = NULL;
  for (char **e = environ; e && *e && !found; e++)
    if (strncmp(*e, copy, len) == 0 && (*e)[len] == '=') found = *e + len + 1;
  free(copy);
  return found;
}
