// SPDX-License-Identifier: MIT
/* The platform layer on Windows (x64): the same functions as os.c, on the
 * Win32 API. The Makefile builds one of the two per target.
 *
 * Memory: VirtualAlloc reserves (segments: a region at a time) and commits
 * (segments: one at a time, as they are first used); every mapping is released whole
 * (VirtualFree needs the reservation's base, and hakozuna only ever unmaps
 * whole huge blocks). Purging decommits and recommits: the pages go back to
 * the system and read back as zero, which calloc relies on
 * (DiscardVirtualMemory and MEM_RESET keep the old contents, undefined).
 * Thread exit: a fibre-local-storage callback. No fork. */
/* Built only for Windows: elsewhere a build that takes every source gets nothing here. */
#ifdef _WIN32
#include "internal.h"

#include <bcrypt.h>
#include <direct.h>
#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <psapi.h>
#include <signal.h>
#include <sys/stat.h>

hz_os_counters_t hz_os_stats;
size_t hz_os_page_size = 4096;
static size_t os_granularity = 65536; /* where VirtualAlloc places reservations */

/* The heap pointer of each thread (see hz_tls_heap_slot in internal.h):
 * ".tls$HZ" sorts between the C runtime's .tls start and .tls$ZZZ end
 * markers, so it is part of the TLS template the loader copies per thread. */
__attribute__((section(".tls$HZ"), used)) hz_heap_t *hz_tls_heap_win = &hz_heap_empty;
__attribute__((section(".tls$HZ"), used)) bool hz_init_running_win; /* init.c's hz_init_running_here */

/* Windows 10 1607 and later name threads (debuggers, ETW). Looked up at
 * start-up: GetProcAddress takes the loader lock, which a thread exiting
 * (whose FLS callback may wait for an allocator lock) can hold. */
typedef HRESULT(WINAPI *set_description_t)(HANDLE, PCWSTR);
static set_description_t os_set_description;
/* True once the process is ending: ExitProcess has ended every other thread
 * wherever it was -- the purge thread maybe holding an allocator lock --
 * before the exiting thread's FLS callbacks run. */
typedef BOOLEAN(NTAPI *shutdown_t)(void);
static shutdown_t os_shutdown_in_progress;

void hz_os_init(void) {
  HMODULE k32 = GetModuleHandleW(L"kernel32.dll"), ntdll = GetModuleHandleW(L"ntdll.dll");
  if (k32) os_set_description = (set_description_t)(void (*)(void))GetProcAddress(k32, "SetThreadDescription");
  if (ntdll) os_shutdown_in_progress = (shutdown_t)(void (*)(void))GetProcAddress(ntdll, "RtlDllShutdownInProgress");
  SYSTEM_INFO si;
  GetSystemInfo(&si);
  if (si.dwPageSize) hz_os_page_size = si.dwPageSize;
  if (si.dwAllocationGranularity) os_granularity = si.dwAllocationGranularity;
}

unsigned hz_os_cpu_count(void) {
  DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
  return n ? (unsigned)n : 1;
}

int hz_os_current_cpu(void) { return (int)GetCurrentProcessorNumber(); }

/* Reservations are 64 KiB-aligned; a larger alignment is found by reserving
 * size + align, releasing it and taking the aligned part (another thread may
 * take the hole in between: then try again). */
static void *os_alloc(size_t size, size_t align, DWORD type, DWORD protect) {
  int errno_saved = errno;
  void *p = NULL;
  if (align <= os_granularity) {
    p = VirtualAlloc(NULL, size, type, protect);
  } else if (size + align > size) {
    for (int tries = 0; tries < 16 && p == NULL; tries++) {
      char *r = VirtualAlloc(NULL, size + align, MEM_RESERVE, PAGE_NOACCESS);
      if (r == NULL) break;
      uintptr_t aligned = ((uintptr_t)r + align - 1) & ~(uintptr_t)(align - 1);
      VirtualFree(r, 0, MEM_RELEASE);
      p = VirtualAlloc((void *)aligned, size, type, protect);
    }
  }
  atomic_fetch_add_explicit(&hz_os_stats.mmap_calls, 1, memory_order_relaxed);
  errno = errno_saved;
  if (p != NULL) atomic_fetch_add_explicit(&hz_os_stats.bytes_mapped, size, memory_order_relaxed);
  return p;
}

void *hz_os_map(size_t size, size_t align) {
  return os_alloc(size, align, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void *hz_os_reserve(size_t size, size_t align, bool closed) {
  (void)closed; /* (always: Windows charges what is committed) */
  return os_alloc(size, align, MEM_RESERVE, PAGE_NOACCESS);
}

bool hz_os_commit(void *p, size_t size) { return VirtualAlloc(p, size, MEM_COMMIT, PAGE_READWRITE) != NULL; }

void hz_os_unmap(void *p, size_t size) {
  if (!VirtualFree(p, 0, MEM_RELEASE))
    hz_warning("VirtualFree(%p, %zu) failed (error %lu)", p, size, (unsigned long)GetLastError());
  atomic_fetch_add_explicit(&hz_os_stats.munmap_calls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&hz_os_stats.bytes_returned, size, memory_order_relaxed); /* as os.c */
}

void hz_os_purge(void *p, size_t size) {
  uintptr_t lo = ((uintptr_t)p + hz_os_page_size - 1) & ~(uintptr_t)(hz_os_page_size - 1);
  uintptr_t hi = ((uintptr_t)p + size) & ~(uintptr_t)(hz_os_page_size - 1);
  if (hi <= lo) return;
  if (!VirtualFree((void *)lo, hi - lo, MEM_DECOMMIT) ||
      VirtualAlloc((void *)lo, hi - lo, MEM_COMMIT, PAGE_READWRITE) == NULL)
    hz_fatal("decommit/commit of %p (%zu bytes) failed (error %lu)", (void *)lo, (size_t)(hi - lo),
             (unsigned long)GetLastError());
  atomic_fetch_add_explicit(&hz_os_stats.madvise_calls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&hz_os_stats.bytes_returned, hi - lo, memory_order_relaxed);
}

/* (no cheap query of which pages are resident: from 32 MiB, where a
 * buffer's pages are the likelier to go unused, they go back instead) */
void hz_os_clear(void *p, size_t size) {
  uintptr_t a = (uintptr_t)p, ps = hz_os_page_size;
  uintptr_t lo = (a + ps - 1) & ~(ps - 1), hi = (a + size) & ~(ps - 1);
  if (size < ((size_t)32 << 20) || hi <= lo) {
    memset(p, 0, size);
    return;
  }
  memset(p, 0, lo - a);
  memset((void *)hi, 0, a + size - hi);
  hz_os_purge((void *)lo, hi - lo);
}

/* No way to move pages between two placeholders' views without a section:
 * callers fault them in instead. */
int hz_os_move(void *from, void *to, size_t size, size_t from_mapping) {
  (void)from, (void)to, (void)size, (void)from_mapping;
  return -ENOSYS;
}
int hz_os_relocate(void *from, void *to, size_t size) {
  (void)from, (void)to, (void)size;
  return -ENOSYS;
}

/* Large pages need a privilege most programs lack: nothing to advise. */

/* (no mlockall here: the segment map's pages stay as the loader made them) */
int hz_os_readonly(void *p, size_t size, bool readonly) {
  (void)p, (void)size, (void)readonly;
  return -1;
}

int hz_os_protect(void *p, size_t size, bool accessible) {
  DWORD old;
  atomic_fetch_add_explicit(&hz_os_stats.mprotect_calls, 1, memory_order_relaxed);
  return VirtualProtect(p, size, accessible ? PAGE_READWRITE : PAGE_NOACCESS, &old) ? 0 : -ENOMEM;
}

uint64_t hz_os_random(void) {
  uint64_t r = 0;
  if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, (PUCHAR)&r, sizeof r, BCRYPT_USE_SYSTEM_PREFERRED_RNG))) {
    LARGE_INTEGER t;
    QueryPerformanceCounter(&t);
    r = (uint64_t)t.QuadPart * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&r ^ (uint64_t)GetCurrentProcessId() << 32;
  }
  r ^= r >> 31; r *= 0xbf58476d1ce4e5b9ull; r ^= r >> 29;
  return r ? r : 0x5bd1e9955bd1e995ull;
}

uint64_t hz_os_now_ms(void) { return GetTickCount64(); }

void hz_os_write(int fd, const char *s, size_t n) {
  int errno_saved = errno;
  HANDLE h = fd == 1 ? GetStdHandle(STD_OUTPUT_HANDLE)
             : fd == 2 ? GetStdHandle(STD_ERROR_HANDLE) : (HANDLE)_get_osfhandle(fd);
  while (n > 0 && h != NULL && h != INVALID_HANDLE_VALUE) {
    DWORD w = 0;
    if (!WriteFile(h, s, n > 0x40000000 ? 0x40000000 : (DWORD)n, &w, NULL) || w == 0) break;
    s += w;
    n -= w;
  }
  errno = errno_saved;
}

/* (no limit on a process's mappings) */
long hz_os_map_limit(void) { return -1; }
bool hz_os_overcommit_strict(void) { return false; }
bool hz_os_address_space_limited(void) { return false; }
bool hz_os_could_map(size_t n) { return n < ((size_t)1 << 47); } /* (the user address space of x64 Windows: 128 TiB) */
int hz_os_mlockall(int flags) {
  (void)flags;
  return 0;
}
long hz_os_map_count(void) { return -1; }

size_t hz_os_rss(void) {
  PROCESS_MEMORY_COUNTERS pmc;
  return K32GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc) ? pmc.WorkingSetSize : 0;
}

size_t hz_os_peak_rss(void) {
  PROCESS_MEMORY_COUNTERS pmc;
  return K32GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc) ? pmc.PeakWorkingSetSize : 0;
}

bool hz_os_sleep_ms(long ms) {
  Sleep((DWORD)ms);
  return true;
}
void hz_os_yield(void) { SwitchToThread(); }
bool hz_os_membarrier(void) {
  FlushProcessWriteBuffers();
  return true;
}

int hz_os_pid(void) { return (int)GetCurrentProcessId(); }

int hz_os_open_report(const char *path, bool append) {
  int errno_saved = errno;
  int fd = path ? _open(path, _O_WRONLY | _O_CREAT | (append ? _O_APPEND : _O_TRUNC) | _O_NOINHERIT,
                        _S_IREAD | _S_IWRITE)
                : _dup(2);
  if (fd < 0) fd = -errno;
  errno = errno_saved;
  return fd;
}

/* (the CRT's stat has no inode: whether fd is open at all) */
hz_os_file_id_t hz_os_fd_id(int fd) {
  int errno_saved = errno;
  struct _stat64 st;
  hz_os_file_id_t id = {0, 0};
  if (fd >= 0 && _fstat64(fd, &st) == 0) id = (hz_os_file_id_t){(uint64_t)st.st_dev + 1, (uint64_t)st.st_mode};
  errno = errno_saved;
  return id;
}

void hz_os_close(int fd) {
  int errno_saved = errno;
  _close(fd);
  errno = errno_saved;
}

/* (no thread cancellation on Windows) */
int hz_os_nocancel_begin(void) { return 0; }
void hz_os_nocancel_end(int old) { (void)old; }

bool hz_os_cwd(char *buf, size_t size) {
  int errno_saved = errno;
  bool ok = _getcwd(buf, (int)size) != NULL;
  errno = errno_saved;
  return ok;
}

/* ---- threads ---- */

static DWORD WINAPI thread_trampoline(void *arg) {
  void *(*fn)(void *) = (void *(*)(void *))arg;
  fn(NULL);
  return 0;
}

/* (Windows has no fork and no single-threaded-only calls to keep working.) */
bool hz_os_single_threaded(void) { return false; }
bool hz_os_threads_known(void) { return true; }
bool hz_os_secure(void) { return false; } /* (no set-user-ID programs) */

int hz_os_thread_start(void *(*fn)(void *)) {
  HANDLE t = CreateThread(NULL, 64 * 1024, thread_trampoline, (void *)fn, STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
  if (t == NULL) return (int)GetLastError();
  CloseHandle(t);
  return 0;
}

/* The purge thread names itself (a detached thread may be gone by the time
 * its creator would name it); the function was looked up at start-up. */
void *hz_os_next_function(const char *name) { /* (the operators are the program's own there) */
  (void)name;
  return NULL;
}

void hz_os_thread_name(const char *name) {
  set_description_t set = os_set_description;
  if (set == NULL) return;
  wchar_t w[32];
  size_t i = 0;
  for (; name[i] && i < 31; i++) w[i] = (wchar_t)name[i];
  w[i] = 0;
  set(GetCurrentThread(), w);
}

/* A fibre-local-storage callback runs when a thread that set a value exits
 * (and on FlsFree), with that value: what pthread keys do on Linux. */
bool hz_os_thread_key(hz_thread_key_t *key, void (*destructor)(void *)) {
  DWORD k = FlsAlloc((PFLS_CALLBACK_FUNCTION)(void (*)(void))destructor);
  if (k == FLS_OUT_OF_INDEXES) return false;
  *key = k;
  return true;
}

void hz_os_thread_key_set(hz_thread_key_t key, void *value) { FlsSetValue(key, value); }

bool hz_os_process_ending(void) { return os_shutdown_in_progress != NULL && os_shutdown_in_progress(); }

/* No fork on Windows. */
void hz_os_atfork_child(void (*child)(void)) { (void)child; }

/* Like abort() without the C runtime's "abnormal program termination"
 * message (the report is the one line): a program's SIGABRT handler runs,
 * then the process ends with abort's status, 3. */
void hz_os_abort(void) {
  raise(SIGABRT);
  TerminateProcess(GetCurrentProcess(), 3);
  for (;;) {}
}
#endif
