// SPDX-License-Identifier: MIT
/* C++ operator new/delete, written in C so that C programs linking hakozuna
 * need no libstdc++. Failure follows the standard: call the new_handler and
 * retry, then throw std::bad_alloc; both come from libstdc++ through weak
 * references, present exactly when the program is C++ (which is when these
 * operators are called). Unwinding through this file works because it is
 * built with unwind tables (-fexceptions).
 *
 * alloc.c includes this file at its end, so that new and delete inline
 * malloc's and free's fast paths (a call through the GOT and back cost 7
 * instructions a new; a sized delete, 30: docs/perf.md §31). Compiled on
 * its own, as the build's list of sources has it, it is empty. */
#ifndef HZ_ALLOC_C
typedef int hz_override_cxx_in_alloc_c; /* (a translation unit may not be empty) */
#else

#if HZ_OVERRIDE

typedef void (*hz_new_handler_t)(void);
extern hz_new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* A nothrow new returns NULL where the other throws, and that includes a
 * std::bad_alloc thrown by the new_handler, which C cannot catch: it went
 * on through the caller's noexcept frame, and std::terminate ended the
 * program. With a handler set, the C++ runtime's own nothrow operator (the
 * next definition after ours) does it: libstdc++'s calls the throwing
 * operator, ours, inside a try block. False if there is none (the
 * program's own, or a static link): the handler is then called here. */
static bool new_nothrow_by_runtime(size_t n, size_t align, void **out) {
  static const char nothrow_tag = 0; /* (std::nothrow_t is empty) */
  if (align == 0) {
    void *(*fn)(size_t, const void *) = (void *(*)(size_t, const void *))hz_os_next_function("_ZnwmRKSt9nothrow_t");
    if (fn) *out = fn(n, &nothrow_tag);
    return fn != NULL;
  }
  void *(*fn)(size_t, size_t, const void *) =
      (void *(*)(size_t, size_t, const void *))hz_os_next_function("_ZnwmSt11align_val_tRKSt9nothrow_t");
  if (fn) *out = fn(n, align, &nothrow_tag);
  return fn != NULL;
}

static hz_noinline void *new_failed(size_t n, size_t align, bool nothrow) { /* (declared in alloc.c) */
  void *q;
  if (nothrow && _ZSt15get_new_handlerv && _ZSt15get_new_handlerv() != NULL && new_nothrow_by_runtime(n, align, &q))
    return q;
  for (;;) {
    hz_new_handler_t handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (handler == NULL) break;
    handler(); /* may throw, free memory, or terminate */
    void *p = align <= 16 ? hz_malloc(n) : hz_aligned_alloc(align, n);
    if (p) return p;
  }
  if (nothrow) return NULL;
  if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
  hz_fatal("operator new(%zu): out of memory and no C++ runtime to throw std::bad_alloc", n);
}

/* (alloc_for's slow paths call new_failed themselves) */
static inline void *cxx_new(size_t n) { return alloc_for(n, ASK_NEW); }
static inline void *cxx_new_nothrow(size_t n) { return alloc_for(n, ASK_NEW_NOTHROW); }
static inline void *cxx_new_aligned(size_t n, size_t a) {
  void *p = hz_aligned_alloc(a, n);
  return hz_likely(p != NULL) ? p : new_failed(n, a, false);
}
static inline void *cxx_new_aligned_nothrow(size_t n, size_t a) {
  void *p = hz_aligned_alloc(a, n);
  return hz_likely(p != NULL) ? p : new_failed(n, a, true);
}

#define HZ_CXX HZ_EXPORT
/* size_t is unsigned long long on Win64: "y" where Linux mangles "m". */
#ifdef _WIN64
#define _Znwm _Znwy
#define _Znam _Znay
#define _ZnwmRKSt9nothrow_t _ZnwyRKSt9nothrow_t
#define _ZnamRKSt9nothrow_t _ZnayRKSt9nothrow_t
#define _ZnwmSt11align_val_t _ZnwySt11align_val_t
#define _ZnamSt11align_val_t _ZnaySt11align_val_t
#define _ZnwmSt11align_val_tRKSt9nothrow_t _ZnwySt11align_val_tRKSt9nothrow_t
#define _ZnamSt11align_val_tRKSt9nothrow_t _ZnaySt11align_val_tRKSt9nothrow_t
#define _ZdlPvm _ZdlPvy
#define _ZdaPvm _ZdaPvy
#define _ZdlPvmSt11align_val_t _ZdlPvySt11align_val_t
#define _ZdaPvmSt11align_val_t _ZdaPvySt11align_val_t
#endif
/* new / new[] */
HZ_CXX void *_Znwm(size_t n) { return cxx_new(n); }
HZ_CXX void *_Znam(size_t n) { return cxx_new(n); }
HZ_CXX void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt) { (void)nt; return cxx_new_nothrow(n); }
HZ_CXX void *_ZnamRKSt9nothrow_t(size_t n, const void *nt) { (void)nt; return cxx_new_nothrow(n); }
HZ_CXX void *_ZnwmSt11align_val_t(size_t n, size_t a) { return cxx_new_aligned(n, a); }
HZ_CXX void *_ZnamSt11align_val_t(size_t n, size_t a) { return cxx_new_aligned(n, a); }
HZ_CXX void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt) {
  (void)nt;
  return cxx_new_aligned_nothrow(n, a);
}
HZ_CXX void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt) {
  (void)nt;
  return cxx_new_aligned_nothrow(n, a);
}
/* delete / delete[]: plain, sized, aligned, nothrow. The sized forms check
 * the size against the block (a mismatch is reported like a bad free). */
HZ_CXX void _ZdlPv(void *p) { dealloc(p, "free"); }
HZ_CXX void _ZdaPv(void *p) { dealloc(p, "free"); }
HZ_CXX void _ZdlPvm(void *p, size_t n) { dealloc_sized(p, n, 0, "operator delete"); }
HZ_CXX void _ZdaPvm(void *p, size_t n) { dealloc_sized(p, n, 0, "operator delete[]"); }
HZ_CXX void _ZdlPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; hz_free(p); }
HZ_CXX void _ZdaPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; hz_free(p); }
HZ_CXX void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; hz_free(p); }
HZ_CXX void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; hz_free(p); }
HZ_CXX void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { dealloc_sized(p, n, a, "operator delete"); }
HZ_CXX void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { dealloc_sized(p, n, a, "operator delete[]"); }
HZ_CXX void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) { (void)a; (void)nt; hz_free(p); }
HZ_CXX void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) { (void)a; (void)nt; hz_free(p); }
#endif
#endif /* HZ_ALLOC_C */
