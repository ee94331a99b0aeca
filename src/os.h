// SPDX-License-Identifier: MIT
/* The platform layer's interface (os.c, os_windows.c): every system call
 * and libc system wrapper the allocator makes goes through these, and the
 * locks. Included by internal.h only, inside its hidden visibility. */
#ifndef HZ_OS_H
#define HZ_OS_H

#ifdef _WIN32
typedef DWORD hz_thread_key_t; /* a fibre-local storage index */
#else
typedef pthread_key_t hz_thread_key_t;
#endif

typedef struct hz_os_counters_s {
  _Atomic uint64_t mmap_calls, munmap_calls, madvise_calls, mprotect_calls, other_calls;
  _Atomic uint64_t bytes_mapped, bytes_returned;
} hz_os_counters_t;
extern hz_os_counters_t hz_os_stats;
/* The page size the allocator works with: the OS's, or larger when
 * HAKOZUNA_PAGE_SIZE asks (tests: the geometry of 16/64 KiB-page kernels on
 * a 4 KiB-page machine). */
extern size_t hz_os_page_size;
/* Spans cover whole pages: where a page is larger than a slice (64 KiB pages)
 * every span is a multiple of this many slices, aligned to it. */
extern size_t hz_span_granule;
void hz_os_init(void);
unsigned hz_os_cpu_count(void);
int hz_os_current_cpu(void); /* -1: unknown */
void *hz_os_map(size_t size, size_t align);       /* NULL on failure */
/* Address space for segments: usable as it is, or closed, to be made usable
 * a segment at a time by hz_os_commit (Windows always closes it: it charges
 * committed memory against its commit limit). */
void *hz_os_reserve(size_t size, size_t align, bool closed);
bool hz_os_commit(void *p, size_t size);
void hz_os_unmap(void *p, size_t size);
void hz_os_purge(void *p, size_t size);            /* pages read back as zero */
void hz_os_clear(void *p, size_t size);            /* memset 0, but absent pages stay absent */
int hz_os_move(void *from, void *to, size_t size, size_t from_mapping); /* 0; -errno: not moved; 1: moved, `from` a hole */
int hz_os_relocate(void *from, void *to, size_t size); /* 0; -errno: not moved. `from` is a hole after */
int hz_os_protect(void *p, size_t size, bool accessible); /* 0; -errno: refused (out of mappings) */
int hz_os_readonly(void *p, size_t size, bool readonly);   /* 0; -errno (Windows: -1, not done) */
/* (hz_os_readonly(p, size, false) maps the range again where mprotect fails: only what nothing wrote yet) */
long hz_os_map_limit(void); /* the most mappings a process may have; -1: no limit known */
bool hz_os_overcommit_strict(void); /* vm.overcommit_memory is 2: writable mappings are charged whole */
bool hz_os_address_space_limited(void); /* RLIMIT_AS was set at start-up (ulimit -v) */
bool hz_os_could_map(size_t n);          /* no larger than the mapped address space may be, or RLIMIT_AS at start-up */
int hz_os_mlockall(int flags);      /* the system call (-1 and errno on failure) */
long hz_os_map_count(void); /* the mappings it has; -1: unknown */
uint64_t hz_os_random(void);
uint64_t hz_os_now_ms(void);
void hz_os_write(int fd, const char *s, size_t n);
size_t hz_os_rss(void);
__attribute__((noreturn)) void hz_os_abort(void); /* after a misuse report */
int hz_os_pid(void);
int hz_os_open_report(const char *path, bool append); /* -errno on failure (errno kept) */
typedef struct {
  uint64_t dev, ino;
} hz_os_file_id_t;
hz_os_file_id_t hz_os_fd_id(int fd); /* {0, 0}: not open */
static inline bool hz_os_fd_is(int fd, hz_os_file_id_t id) {
  hz_os_file_id_t now = hz_os_fd_id(fd);
  return id.dev != 0 && now.dev == id.dev && now.ino == id.ino;
}
size_t hz_os_peak_rss(void);
bool hz_os_sleep_ms(long ms); /* false: the OS refused to sleep (a sandbox) */
/* The process is ending and other threads may have been stopped holding
 * locks (Windows' ExitProcess): thread-exit work must not wait for them. */
bool hz_os_process_ending(void);
void hz_os_yield(void);
bool hz_os_membarrier(void); /* a barrier on every thread of the process; false if unsupported */
bool hz_os_thread_key(hz_thread_key_t *key, void (*destructor)(void *));
void hz_os_thread_key_set(hz_thread_key_t key, void *value);
void hz_os_atfork_child(void (*child)(void));
int hz_os_thread_start(void *(*fn)(void *));
bool hz_os_single_threaded(void); /* the program never started a thread (false when unknown) */
bool hz_os_threads_known(void);    /* hz_os_single_threaded is not "unknown" */
bool hz_os_secure(void);          /* secure execution (set-user-ID and the like): the environment is not ours to read */
void hz_os_thread_name(const char *name);
const void *hz_os_map_file(const char *path, size_t *size); /* read-only; NULL on failure */
void hz_os_unmap_file(const void *p, size_t size); /* (not counted as memory returned) */
bool hz_os_cwd(char *buf, size_t size);
const char *hz_os_exe_path(void); /* the main program's file; NULL if unknown */
/* The loaded object whose code holds pc (the profiler names addresses):
 * key tells objects apart, bias is its load bias, file its path as the
 * loader has it ("" for the main program). False if no object holds pc. */
typedef struct {
  const void *key;
  uintptr_t bias;
  const char *file;
} hz_os_code_object_t;
bool hz_os_code_object(uintptr_t pc, hz_os_code_object_t *out);
void hz_os_close(int fd);
/* Cancellation off around file calls made inside the allocator (open,
 * read, write, close and stdio are cancellation points): begin returns the
 * state for end. */
int hz_os_nocancel_begin(void);
void hz_os_nocancel_end(int old);
/* The definition of a function that comes after this library's (another
 * library's, e.g. the C++ runtime's), NULL if none or unknown. */
void *hz_os_next_function(const char *name);

/* ---- locks ----
 * The lock rule (ARCHITECTURE.md): heaps lock, then an arena's (which may
 * try another arena's, never wait for it); the huge cache's alone; nothing
 * that may allocate or wait for another thread is called with one held. */
#ifdef _WIN32
/* SRW locks; no fork on Windows, so no holder to remember. */
typedef struct { SRWLOCK m; } hz_lock_t;
#define HZ_LOCK_INIT { SRWLOCK_INIT }
static inline void hz_lock(hz_lock_t *l) { AcquireSRWLockExclusive(&l->m); }
static inline void hz_unlock(hz_lock_t *l) { ReleaseSRWLockExclusive(&l->m); }
static inline bool hz_trylock(hz_lock_t *l) { return TryAcquireSRWLockExclusive(&l->m) != 0; }
static inline bool hz_lock_lost_in_fork(hz_lock_t *l) { (void)l; return false; }
static inline bool hz_lock_held_here(const hz_lock_t *l) { (void)l; return false; }
#else
/* A lock remembers its holder (the address of a thread-local, which a forked
 * child keeps): after a fork the child tells a lock a lost thread held, whose
 * data may be torn, from one it holds itself (fork from a signal handler
 * that interrupted the allocator). */
typedef struct {
  pthread_mutex_t m;
  const void *holder;
} hz_lock_t;
#define HZ_LOCK_INIT { PTHREAD_MUTEX_INITIALIZER, NULL }
extern __thread char hz_lock_me;
static inline void hz_lock(hz_lock_t *l) {
  pthread_mutex_lock(&l->m);
  l->holder = &hz_lock_me;
}
static inline void hz_unlock(hz_lock_t *l) {
  l->holder = NULL;
  pthread_mutex_unlock(&l->m);
}
static inline bool hz_trylock(hz_lock_t *l) {
  if (pthread_mutex_trylock(&l->m) != 0) return false;
  l->holder = &hz_lock_me;
  return true;
}
/* True when this thread holds l (a fork child asks about the forking thread). */
static inline bool hz_lock_held_here(const hz_lock_t *l) { return l->holder == &hz_lock_me; }
/* In a forked child: true when a thread that did not survive the fork held
 * the lock; it is then made free again, and the caller must rebuild or
 * discard what it protects. */
static inline bool hz_lock_lost_in_fork(hz_lock_t *l) {
  if (pthread_mutex_trylock(&l->m) == 0) {
    pthread_mutex_unlock(&l->m);
    return false;
  }
  if (l->holder == &hz_lock_me) return false;
  pthread_mutex_init(&l->m, NULL);
  l->holder = NULL;
  return true;
}
#endif

#endif
