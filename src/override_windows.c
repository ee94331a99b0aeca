// SPDX-License-Identifier: MIT
/* malloc & co. on Windows, for programs that link the static library ahead
 * of the C runtime (docs/windows.md). Calls that the program's own code
 * makes reach hakozuna; the C runtime keeps allocating for itself (strdup,
 * _getcwd(NULL), stdio buffers), so a pointer hakozuna does not know goes to
 * the runtime's own free/realloc/_msize instead of being reported: on
 * Windows a foreign pointer is not a misuse but the runtime's block. The
 * runtime's other heap functions (_msize, _expand, _recalloc, _aligned_*)
 * are declared dllimport, so calls to them never reach a definition here:
 * they stay the runtime's. Not in hakozuna.dll's exports: the DLL offers
 * the hz_* names. */
/* Built only for Windows. */
#ifdef _WIN32
#include "internal.h"

#if HZ_OVERRIDE
#include <malloc.h>
#include <stdlib.h>

/* The runtime the program was built against: one per mingw toolchain. */
#ifdef _UCRT
#define HZ_CRT_DLL L"ucrtbase.dll"
#else
#define HZ_CRT_DLL L"msvcrt.dll"
#endif

typedef struct {
  void (*free)(void *);
  void *(*realloc)(void *, size_t);
} hz_crt_t;

static hz_crt_t crt_get(void) {
  static hz_crt_t crt; /* racing first callers store the same values */
  if (crt.free == NULL) {
    HMODULE m = GetModuleHandleW(HZ_CRT_DLL);
    if (m == NULL) hz_fatal("a block not allocated by hakozuna, and no %ls loaded to free it", HZ_CRT_DLL);
    crt.realloc = (void *(*)(void *, size_t))(void (*)(void))GetProcAddress(m, "realloc");
    crt.free = (void (*)(void *))(void (*)(void))GetProcAddress(m, "free");
  }
  return crt;
}

/* (a returned huge block's address may be the CRT's now) */
static inline bool foreign(const void *p) {
  uint8_t m = p != NULL ? hz_segmap_get(p) : HZ_MAP_SPANS;
  return m == HZ_MAP_NONE || m == HZ_MAP_GONE;
}

void *malloc(size_t n) { return hz_malloc(n); }
void *calloc(size_t count, size_t size) { return hz_calloc(count, size); }

void free(void *p) {
  if (hz_unlikely(foreign(p))) crt_get().free(p);
  else hz_free(p);
}

void *realloc(void *p, size_t n) {
  return hz_unlikely(foreign(p)) ? crt_get().realloc(p, n) : hz_realloc(p, n);
}
#endif
#endif
