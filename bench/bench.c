// SPDX-License-Identifier: MIT
/* Shared helpers for the benchmark programs: see bench.h. */
#include "bench.h"

#ifdef _WIN32
/* Windows (make test's smoke run under wine): the benchmark is linked with
 * the static library, and the process counters come from psapi. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <psapi.h>
#include "hakozuna.h"
#else
#include <dlfcn.h>
#include <sys/resource.h>
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

void bench_fail(const char *fmt, ...)
{
    va_list ap;
    fputs("FAIL: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    _exit(2);
}

void bench_usage(int argc, char **argv, int min_args, const char *usage)
{
    if (argc > min_args && strcmp(argv[1], "-h") != 0 && strcmp(argv[1], "--help") != 0)
        return;
    fprintf(stderr, "usage: %s %s\n", argv[0], usage);
    exit(1);
}

uint64_t arg_u64(int argc, char **argv, int i, uint64_t def)
{
    if (i >= argc)
        return def;
    char *end;
    errno = 0;
    uint64_t v = strtoull(argv[i], &end, 10);
    if (errno || end == argv[i])
        bench_fail("argument %d ('%s') is not a number", i, argv[i]);
    switch (*end) {
    case 'k': case 'K': v *= 1000ULL; end++; break;
    case 'm': case 'M': v *= 1000000ULL; end++; break;
    case 'g': case 'G': v *= 1000000000ULL; end++; break;
    default: break;
    }
    if (*end)
        bench_fail("argument %d ('%s') is not a number", i, argv[i]);
    return v;
}

double arg_f64(int argc, char **argv, int i, double def)
{
    if (i >= argc)
        return def;
    char *end;
    double v = strtod(argv[i], &end);
    if (end == argv[i] || *end)
        bench_fail("argument %d ('%s') is not a number", i, argv[i]);
    return v;
}

size_dist_t arg_dist(int argc, char **argv, int i, uint32_t def_min, uint32_t def_max)
{
    size_dist_t d = { DIST_UNIFORM, def_min, def_max };
    if (i < argc && strcmp(argv[i], "app") == 0) {
        d.kind = DIST_APP;
        d.min = 16;
        d.max = 32768;
        return d;
    }
    d.min = (uint32_t)arg_u64(argc, argv, i, d.min);
    d.max = (uint32_t)arg_u64(argc, argv, i + 1, d.max);
    if (d.min < 1 || d.max < d.min)
        bench_fail("size range %u..%u is empty", d.min, d.max);
    return d;
}

uint32_t dist_max(const size_dist_t *d)
{
    return d->kind == DIST_MIXED_LARGE ? (1u << 20) : d->max;
}

double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sleep_sec(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

#ifdef _WIN32
static PROCESS_MEMORY_COUNTERS win_counters(void)
{
    PROCESS_MEMORY_COUNTERS pmc;
    memset(&pmc, 0, sizeof pmc);
    K32GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc);
    return pmc;
}

size_t rss_bytes(void) { return win_counters().WorkingSetSize; }
long minor_faults(void) { return (long)win_counters().PageFaultCount; }
#else
size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

#endif

void bench_spawn(pthread_t *t, void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int rc = pthread_create(t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        bench_fail("pthread_create: %s", strerror(rc));
}

void bench_join(pthread_t t)
{
    int rc = pthread_join(t, NULL);
    if (rc != 0)
        bench_fail("pthread_join: %s", strerror(rc));
}

static _Atomic uint64_t phase_first = UINT64_MAX, phase_last;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void phase_start(void)
{
    uint64_t t = now_ns(), cur = atomic_load(&phase_first);
    while (t < cur && !atomic_compare_exchange_weak(&phase_first, &cur, t))
        ;
}

void phase_end(void)
{
    uint64_t t = now_ns(), cur = atomic_load(&phase_last);
    while (t > cur && !atomic_compare_exchange_weak(&phase_last, &cur, t))
        ;
}

static pthread_barrier_t phase_barrier;
static void (*phase_fn)(uint32_t);

void phase_begin(void)
{
    pthread_barrier_wait(&phase_barrier);
    phase_start();
}

static void *phase_thread(void *arg)
{
    phase_fn((uint32_t)(uintptr_t)arg);
    return NULL;
}

double run_parallel(uint32_t n, void (*fn)(uint32_t i), double *create_secs)
{
    pthread_t *tids = xzalloc64(n, sizeof *tids);
    phase_fn = fn;
    atomic_store(&phase_first, UINT64_MAX);
    atomic_store(&phase_last, 0);
    pthread_barrier_init(&phase_barrier, NULL, n + 1);
    double t0 = now_sec();
    for (uint32_t i = 0; i < n; i++)
        bench_spawn(&tids[i], phase_thread, (void *)(uintptr_t)i);
    if (create_secs)
        *create_secs = now_sec() - t0;
    pthread_barrier_wait(&phase_barrier);
    for (uint32_t i = 0; i < n; i++)
        bench_join(tids[i]);
    pthread_barrier_destroy(&phase_barrier);
    free(tids);
    uint64_t a = atomic_load(&phase_first), b = atomic_load(&phase_last);
    return b > a ? (double)(b - a) * 1e-9 : 0.0;
}

void *xzalloc64(size_t n, size_t size)
{
    size_t bytes = (n * size + 63) & ~(size_t)63;
#ifdef _WIN32
    /* the Windows C runtime has no aligned_alloc whose blocks free() takes */
    void *p = hz_aligned_alloc(64, bytes ? bytes : 64);
#else
    void *p = aligned_alloc(64, bytes ? bytes : 64);
#endif
    if (!p)
        bench_fail("out of memory");
    return memset(p, 0, bytes);
}

/* ---- RESULT line: a small JSON object built in a static buffer ---- */
static char res_buf[8192];
static size_t res_len;

static void res_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void res_add(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(res_buf + res_len, sizeof res_buf - res_len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof res_buf - res_len)
        bench_fail("RESULT line too long");
    res_len += (size_t)n;
}

static void res_key(const char *key)
{
    res_add("%s\"%s\": ", res_len > 1 ? ", " : "", key);
}

void res_begin(const char *bench)
{
    res_len = 0;
    res_add("{");
    res_str("bench", bench);
}

void res_u64(const char *key, uint64_t v)
{
    res_key(key);
    res_add("%llu", (unsigned long long)v);
}

void res_f64(const char *key, double v)
{
    res_key(key);
    res_add("%.6g", v);
}

void res_null(const char *key)
{
    res_key(key);
    res_add("null");
}

void res_str(const char *key, const char *v)
{
    res_key(key);
    res_add("\"");
    for (; *v; v++) {
        if (*v == '"' || *v == '\\')
            res_add("\\%c", *v);
        else if ((unsigned char)*v < 0x20)
            res_add("\\u%04x", (unsigned char)*v);
        else
            res_add("%c", *v);
    }
    res_add("\"");
}

void res_dist(const size_dist_t *d)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%u-%u", d->min, d->max);
    res_str("sizes", d->kind == DIST_APP ? "app" : d->kind == DIST_MIXED_LARGE ? "mixed_large" : buf);
}

void res_rate(double secs, uint64_t ops)
{
    res_f64("secs", secs);
    res_u64("ops", ops);
    res_f64("ops_per_sec", (double)ops / secs);
}

#ifdef _WIN32
const char *bench_malloc_owner(void) { return "linked"; }

void res_end(void)
{
    res_str("malloc_so", bench_malloc_owner());
    res_u64("maxrss_kb", (uint64_t)(win_counters().PeakWorkingSetSize / 1024));
    res_add("}");
    printf("RESULT %s\n", res_buf);
    fflush(stdout);
}
#else
const char *bench_malloc_owner(void)
{
    Dl_info info;
    void *f = dlsym(RTLD_DEFAULT, "malloc");
    if (f && dladdr(f, &info) && info.dli_fname)
        return info.dli_fname;
    return "unknown";
}

void res_end(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    res_str("malloc_so", bench_malloc_owner());
    res_u64("maxrss_kb", (uint64_t)ru.ru_maxrss);
    res_add("}");
    printf("RESULT %s\n", res_buf);
    fflush(stdout);
}
#endif
