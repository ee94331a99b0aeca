// SPDX-License-Identifier: MIT
/* The heap profiler on Windows: not available yet (profile.c needs libgcc's
 * unwinder over ELF and the dynamic loader's module list). Sampling never
 * arms, so every allocation takes the ordinary paths; asking for a profile
 * says so instead of writing nothing silently. */
#include "internal.h"

#include <errno.h>

_Atomic long hz_profile_huge_live;

void hz_profile_arm(hz_heap_t *h) { (void)h; }

void hz_profile_option_changed(void) {
  if (hz_opt(HZ_OPTION_PROFILE) || hz_opt(HZ_OPTION_LEAKS))
    hz_warning("HAKOZUNA_PROFILE/HAKOZUNA_LEAKS: the heap profiler is not available on Windows yet");
}

/* A class's countdown ran out: wind it up again (the class's malloc count is
 * malloc[c] - sample_left[c]) and hand the block out as it is. */
void *hz_profile_small(hz_heap_t *h, hz_block_t *b, size_t request) {
  uint32_t cls = hz_span_of(b)->cls;
  hz_heap_count_restart(h, cls, 65536);
#if HZ_CHECKED
  hz_checked_on_alloc(b, hz_class_size(cls), request);
#endif
  (void)request;
  return b;
}

void *hz_profile_big(size_t size, size_t align, size_t *dirty) {
  (void)size, (void)align, (void)dirty;
  return NULL;
}

void hz_profile_free(hz_span_t *s) { s->sample = NULL; }
void hz_profile_huge_free(const void *p) { (void)p; }

HZ_EXPORT int hz_profile_dump(const char *path) {
  (void)path;
  errno = ENOSYS;
  return -1;
}
