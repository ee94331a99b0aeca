// SPDX-License-Identifier: MIT
/* The option table: one row per option. Environment variables
 * (HAKOZUNA_<NAME>), hz_option_* and the README's option list all come from
 * these rows (`make options-doc` prints the README's table). */
#include "internal.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A row with sdef set is a string option (a path): its long value is 1 while
 * a string is set (def: 1 where sdef is not empty), and hz_option_get/
 * set_string read and write the text. */
typedef struct hz_option_desc_s {
  const char *name;
  long def, min, max;
  const char *unit;
  const char *description;
  const char *sdef;
} hz_option_desc_t;

/* The order must follow hz_option_t in hakozuna.h. */
static const hz_option_desc_t hz_option_table[HZ_OPTION_COUNT] = {
  [HZ_OPTION_VERBOSE] = {"verbose", 0, 0, 1, "bool", "print diagnostics (option warnings, OS failures) to stderr"},
  [HZ_OPTION_STATS] = {"stats", 0, 0, 1, "bool", "print the statistics report to stderr at exit"},
  [HZ_OPTION_PURGE_DELAY] = {"purge_delay", 100, -1, 3600000, "ms",
                             "free memory goes back to the OS this long after it was freed (0 at once, but then no purge "
                             "thread runs, nor its trim of idle threads' partly used spans; -1 never)"},
  [HZ_OPTION_PURGE_THREAD] = {"purge_thread", 1, 0, 2, "mode",
                              "purge from a background thread, so idle programs return memory too: 0 never, "
                              "1 once the program has started a thread of its own, 2 also in single-threaded programs "
                              "(not for programs that sandbox themselves, such as sshd)"},
  [HZ_OPTION_THP] = {"thp", 0, 0, 1, "bool", "transparent huge pages: 1 asks the kernel for them, 0 for none in segments and blocks under 16 MiB, also where its policy is always"},
  [HZ_OPTION_ARENA_RESERVE] = {"arena_reserve", 64, 4, 1048576, "MiB",
                               "most address space one OS request for segments reserves "
                               "(a single-threaded program's first takes 4 MiB, each next twice the last)"},
  [HZ_OPTION_THREAD_CACHE] = {"thread_cache", 4096, 0, 1048576, "KiB", "empty spans each thread keeps for reuse"},
  [HZ_OPTION_HUGE_CACHE] = {"huge_cache", 256, 0, 1048576, "MiB", "freed huge blocks (above 2 MiB) kept mapped for reuse"},
  [HZ_OPTION_CHECK] = {"check", 1, 0, 1, "level",
                       "on a detected misuse (double/invalid free): 1 report and abort, 0 report, leak the block, go on"},
  [HZ_OPTION_STATS_FILE] = {"stats_file", 0, 0, 1, "path",
                            "append the exit report to this file instead of writing it to stderr (implies stats; %p: the pid)", ""},
  [HZ_OPTION_MMAP_THRESHOLD] = {"mmap_threshold", HZ_LARGE_MAX, HZ_SMALL_MAX, HZ_LARGE_MAX, "bytes",
                                "freed blocks larger than this go back to the OS at once (as glibc's mapped blocks); smaller ones are cached. Above 2 MiB blocks are mapped directly (huge blocks)"},
  [HZ_OPTION_PAGE_SIZE] = {"page_size", 0, 0, 65536, "bytes",
                           "assume pages this large, a power of two above the OS's (tests the 16/64 KiB-page "
                           "geometry on 4 KiB pages); 0: the OS's. Fixed at start-up: reads back the size in use"},
  [HZ_OPTION_PROFILE] = {"profile", 0, 0, 1, "bool",
                         "sample allocations and write a heap profile at exit (docs/profiling.md)"},
  [HZ_OPTION_PROFILE_RATE] = {"profile_rate", 524288, 1, 1L << 30, "bytes",
                              "mean bytes allocated between two samples (exponentially distributed gaps)"},
  [HZ_OPTION_PROFILE_FILE] = {"profile_file", 1, 0, 1, "path",
                              "the exit profile (pprof; .folded and .txt beside it; %p: the pid)",
                              "hakozuna-%p.pb.gz"},
  [HZ_OPTION_PROFILE_SEED] = {"profile_seed", 0, 0, 1L << 30, "seed",
                              "0: random sample points; else this seed, so that a run can be repeated"},
  [HZ_OPTION_LEAKS] = {"leaks", 0, 0, 1, "bool",
                       "sample allocations and print those still live at exit, by stack (a sampled leak report)"},
  [HZ_OPTION_STASH] = {"stash", 256, 0, 4096, "KiB",
                       "freed blocks of 1 KiB and more each thread keeps per size class, at most 16, newest first, "
                       "for its next mallocs of the class; 0: none. The idle trim leaves them resident"},
};

long hz_options[HZ_OPTION_COUNT];
/* Static storage: options are read before the allocator can allocate. */
#define HZ_OPTION_STR_MAX 4096
hz_cold_bss char hz_option_str[HZ_OPTION_COUNT][HZ_OPTION_STR_MAX];
/* Until a string option is set it reads its default from the table: copying
 * the defaults in wrote two pages of this array in every process (8 KiB of
 * RSS, docs/perf.md §35). */
static bool hz_option_str_set[HZ_OPTION_COUNT];

static bool hz_option_is_string(hz_option_t o) { return hz_option_table[o].sdef != NULL; }
static const char *option_string(hz_option_t o) {
  return hz_option_str_set[o] ? hz_option_str[o] : hz_option_table[o].sdef;
}

static bool hz_option_store_string(hz_option_t o, const char *v) {
  size_t n = strlen(v);
  if (n >= HZ_OPTION_STR_MAX) return false;
  memcpy(hz_option_str[o], v, n + 1);
  hz_option_str_set[o] = true;
  hz_options[o] = n > 0;
  return true;
}

static bool hz_option_parse(const hz_option_desc_t *d, const char *v, long *out) {
  /* The words are numbers too, range-checked as any: "0" or "off" for an
   * option whose least value is 4 is as invalid as "3" (ARENA_RESERVE=0
   * once passed as 0 and crashed the first malloc). */
  static const struct { const char *word; long value; } words[] = {
    {"yes", 1}, {"on", 1}, {"true", 1}, {"no", 0}, {"off", 0}, {"false", 0}};
  long x = LONG_MIN;
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (strcasecmp(v, words[i].word) == 0) x = words[i].value;
  if (x == LONG_MIN) {
    char *end;
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno != 0 || end == v) return false;
    while (isspace((unsigned char)*end)) end++;
    if (*end != 0) return false;
  }
  if (x < d->min || x > d->max) return false;
  *out = x;
  return true;
}

extern char **environ;
static bool hz_options_env_seen;
static void options_read(void);

static char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c; }

/* The option whose name, in capitals, is name[0..len), or -1. */
static int option_named(const char *name, size_t len) {
  for (int i = 0; i < HZ_OPTION_COUNT; i++) {
    const char *o = hz_option_table[i].name;
    size_t k = 0;
    while (k < len && o[k] != 0 && ascii_upper(o[k]) == name[k]) k++;
    if (k == len && o[k] == 0) return i;
  }
  return -1;
}

/* HAKOZUNA_<NAME> variables that name no option: most likely a typo (the
 * option then silently keeps its default), so say so. */
static void option_unknown(const char *var, size_t len) {
  char names[256];
  size_t n = 0;
  for (int i = 0; i < HZ_OPTION_COUNT && n < sizeof names; i++)
    n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", hz_option_table[i].name);
  hz_warning("unknown option %.*s ignored (the options are %s)", (int)len, var, names);
}

static void option_apply(int i, const char *var, size_t len, const char *v) {
  const hz_option_desc_t *d = &hz_option_table[i];
  long x;
  if (hz_option_is_string(i)) {
    if (!hz_option_store_string(i, v)) hz_warning("%.*s is longer than %d bytes; ignored", (int)len, var, HZ_OPTION_STR_MAX - 1);
  } else if (hz_option_parse(d, v, &x))
    hz_options[i] = x;
  else
    hz_warning("%.*s=\"%s\" is not valid (expected %ld..%ld %s); keeping the default %ld", (int)len, var, v, d->min,
               d->max, d->unit, d->def);
}

/* Once, by start-up or by whoever needs an option first (a misuse report,
 * hz_option_get), possibly before libc has set environ (an allocation from a
 * .preinit_array function); hz_options_late_init reads it again then. */
void hz_options_init(void) {
  static _Atomic bool claimed;
  if (atomic_load_explicit(&claimed, memory_order_relaxed) || atomic_exchange(&claimed, true)) return;
  options_read();
}

/* One pass over environ, not getenv and toupper per option: a preloaded
 * getenv may allocate, and those two calls were the only reason a small
 * program mapped two more 64 KiB windows of libc (128 KiB of RSS for
 * /bin/true: docs/perf.md §50). As getenv, the first of two entries wins. */
static void options_read(void) {
  static hz_hot_const const char prefix[] = "HAKOZUNA_";
  int errno_saved = errno;
  bool seen[HZ_OPTION_COUNT] = {false};
  hz_options_env_seen = environ != NULL;
  for (int i = 0; i < HZ_OPTION_COUNT; i++) {
    hz_options[i] = hz_option_table[i].def;
    hz_option_str_set[i] = false;
  }
  /* A set-user-ID program runs with its caller's environment: the options
   * would let any user make it append to a file of their choosing
   * (stats_file, profile_file) or go on after a double free (check=0).
   * As glibc drops its MALLOC_ variables there, all are ignored. */
  for (char **e = hz_os_secure() ? NULL : environ; e != NULL && *e != NULL; e++) {
    if (strncmp(*e, prefix, sizeof prefix - 1) != 0) continue;
    const char *name = *e + sizeof prefix - 1, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name), var_len = len + sizeof prefix - 1;
    int i = option_named(name, len);
    if (i < 0) option_unknown(*e, var_len);
    else if (eq != NULL && !seen[i]) {
      seen[i] = true;
      option_apply(i, *e, var_len, eq + 1);
    }
  }
  errno = errno_saved;
}

void hz_options_late_init(void) {
  if (!hz_options_env_seen && environ != NULL) options_read();
}

HZ_EXPORT long hz_option_get(hz_option_t o) {
  if ((unsigned)o >= HZ_OPTION_COUNT) { errno = EINVAL; return -1; }
  hz_options_init();
  return hz_opt(o);
}

HZ_EXPORT int hz_option_set(hz_option_t o, long value) {
  if ((unsigned)o >= HZ_OPTION_COUNT) { errno = EINVAL; return -1; }
  hz_options_init();
  const hz_option_desc_t *d = &hz_option_table[o];
  if (hz_option_is_string(o) || value < d->min || value > d->max) { errno = EINVAL; return -1; }
  /* the geometry follows the page size: it cannot change once running */
  if (o == HZ_OPTION_PAGE_SIZE && value != hz_options[o]) { errno = EINVAL; return -1; }
  __atomic_store_n(&hz_options[o], value, __ATOMIC_RELAXED);
  if (o == HZ_OPTION_PROFILE || o == HZ_OPTION_PROFILE_RATE || o == HZ_OPTION_LEAKS) hz_profile_option_changed();
  if (o == HZ_OPTION_STASH) hz_stash_option_changed();
  return 0;
}

HZ_EXPORT const char *hz_option_get_string(hz_option_t o) {
  if ((unsigned)o >= HZ_OPTION_COUNT || !hz_option_is_string(o)) { errno = EINVAL; return NULL; }
  hz_options_init();
  return option_string(o);
}

HZ_EXPORT int hz_option_set_string(hz_option_t o, const char *value) {
  if ((unsigned)o >= HZ_OPTION_COUNT || !hz_option_is_string(o) || value == NULL) { errno = EINVAL; return -1; }
  hz_options_init();
  if (!hz_option_store_string(o, value)) { errno = ENAMETOOLONG; return -1; }
  return 0;
}

/* The option's path with %p replaced by the process id and %% by %; false
 * when it is unset or does not fit. */
bool hz_option_path(hz_option_t o, char *out, size_t size) {
  const char *s = option_string(o);
  size_t n = 0;
  for (; *s && n + 1 < size; s++) {
    if (s[0] == '%' && s[1] == 'p') {
      n += (size_t)snprintf(out + n, size - n, "%ld", (long)hz_os_pid());
      s++;
    } else {
      if (s[0] == '%' && s[1] == '%') s++;
      out[n++] = *s;
    }
  }
  if (*s || n >= size || n == 0) return false;
  out[n] = 0;
  return true;
}

HZ_EXPORT const char *hz_option_name(hz_option_t o) {
  return (unsigned)o < HZ_OPTION_COUNT ? hz_option_table[o].name : NULL;
}

HZ_EXPORT const char *hz_option_description(hz_option_t o) {
  return (unsigned)o < HZ_OPTION_COUNT ? hz_option_table[o].description : NULL;
}

/* The options in effect, for the top of the statistics report. */
void hz_options_print(FILE *out) {
  fprintf(out, "options:");
  for (int i = 0; i < HZ_OPTION_COUNT; i++) {
    if (hz_option_is_string(i)) fprintf(out, " %s=\"%s\"", hz_option_table[i].name, option_string(i));
    else fprintf(out, " %s=%ld", hz_option_table[i].name, hz_options[i]);
  }
  fputc('\n', out);
}

HZ_EXPORT void hz_options_markdown(FILE *out) {
  fprintf(out, "| variable | default | range | description |\n|---|---|---|---|\n");
  for (int i = 0; i < HZ_OPTION_COUNT; i++) {
    const hz_option_desc_t *d = &hz_option_table[i];
    fprintf(out, "| `HAKOZUNA_");
    for (const char *c = d->name; *c; c++) fputc(ascii_upper(*c), out);
    if (d->sdef)
      fprintf(out, "` | \"%s\" | %s | %s |\n", d->sdef, d->unit, d->description);
    else
      fprintf(out, "` | %ld | %ld..%ld %s | %s |\n", d->def, d->min, d->max, d->unit, d->description);
  }
}
