// SPDX-License-Identifier: MIT
/* The profiler's outputs: names for the sampled addresses, a pprof profile
 * (protobuf, gzip'd with stored deflate blocks), collapsed stacks for flame
 * graphs, a top table, and the leak report.
 *
 * Names come from the ELF symbol tables of the mapped objects (.symtab when
 * the file has one, else .dynsym), found with hz_os_code_object; they are looked up
 * only here, when a profile is written, never when a sample is taken. This
 * runs outside every allocator lock with the profiler's per-thread guard set,
 * so its own allocations are plain hz_malloc calls. */
#define _GNU_SOURCE
#include "internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable buffers ---- */
typedef struct {
  char *p;
  size_t n, cap;
  bool oom;
} pp_buf_t;

static void buf_put(pp_buf_t *b, const void *d, size_t n) {
  if (b->oom) return;
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n) cap *= 2;
    char *q = hz_realloc(b->p, cap);
    if (q == NULL) { b->oom = true; return; }
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
}

static void buf_printf(pp_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(pp_buf_t *b, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) buf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* ---- symbols ---- */
typedef struct {
  const void *key;          /* the link map */
  const char *path;         /* as shown */
  uintptr_t bias, lo, hi;   /* load bias; addresses seen */
  const void *map;
  size_t size;
  const ElfW(Sym) *sym;
  size_t nsym;
  const char *str;
  size_t nstr;
} pp_obj_t;

#define PP_MAX_OBJS 512

typedef struct {
  uintptr_t *pc;            /* unique return addresses, sorted */
  size_t npc;
  uint32_t *fn;             /* per address: its function (index into names) */
  uint32_t *obj;            /* per address: its object, or UINT32_MAX */
  const char **names;       /* function names */
  uint32_t *name_obj;
  size_t nnames;
  pp_obj_t objs[PP_MAX_OBJS];
  size_t nobj;
  pp_buf_t text;            /* names we formatted ourselves, NUL-separated */
} pp_syms_t;

/* The symbol table of an ELF file mapped whole: .symtab, else .dynsym. */
static void elf_load(pp_obj_t *o, const char *file) {
  o->map = hz_os_map_file(file, &o->size);
  const ElfW(Ehdr) *eh = o->map;
  if (eh == NULL || o->size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) || eh->e_shentsize != sizeof(ElfW(Shdr)) ||
      eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) > o->size)
    return;
  const ElfW(Shdr) *sh = (const ElfW(Shdr) *)((const char *)o->map + eh->e_shoff);
  for (int want = SHT_SYMTAB; o->sym == NULL; want = SHT_DYNSYM) {
    for (size_t i = 0; i < eh->e_shnum; i++) {
      if (sh[i].sh_type != (ElfW(Word))want || sh[i].sh_link >= eh->e_shnum) continue;
      const ElfW(Shdr) *ss = &sh[sh[i].sh_link];
      if (sh[i].sh_offset + sh[i].sh_size > o->size || ss->sh_offset + ss->sh_size > o->size) continue;
      o->sym = (const ElfW(Sym) *)((const char *)o->map + sh[i].sh_offset);
      o->nsym = sh[i].sh_size / sizeof(ElfW(Sym));
      o->str = (const char *)o->map + ss->sh_offset;
      o->nstr = ss->sh_size;
      break;
    }
    if (want == SHT_DYNSYM) break;
  }
}

/* The function whose code holds a (an address in the file's terms). */
static const char *elf_lookup(const pp_obj_t *o, uintptr_t a) {
  const ElfW(Sym) *best = NULL;
  for (size_t i = 0; i < o->nsym; i++) {
    const ElfW(Sym) *s = &o->sym[i];
    int type = ELF64_ST_TYPE(s->st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s->st_shndx == SHN_UNDEF || s->st_name >= o->nstr) continue;
    if (a < s->st_value || a >= s->st_value + (s->st_size ? s->st_size : 1)) continue;
    /* aliases (malloc and hz_malloc): prefer the global name */
    if (best == NULL || (ELF64_ST_BIND(best->st_info) == STB_LOCAL && ELF64_ST_BIND(s->st_info) != STB_LOCAL)) best = s;
  }
  return best ? o->str + best->st_name : NULL;
}

static int cmp_pc(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static size_t pc_index(const pp_syms_t *sy, uintptr_t pc) {
  size_t lo = 0, hi = sy->npc;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (sy->pc[mid] < pc) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static uint32_t pp_obj_of(pp_syms_t *sy, uintptr_t pc) {
  hz_os_code_object_t co;
  if (!hz_os_code_object(pc - 1, &co)) return UINT32_MAX;
  for (uint32_t i = 0; i < sy->nobj; i++)
    if (sy->objs[i].key == co.key) return i;
  if (sy->nobj == PP_MAX_OBJS) return UINT32_MAX;
  pp_obj_t *o = &sy->objs[sy->nobj];
  memset(o, 0, sizeof *o);
  o->key = co.key;
  o->bias = co.bias;
  o->lo = UINTPTR_MAX;
  const char *exe = co.file[0] ? NULL : hz_os_exe_path();
  o->path = co.file[0] ? co.file : exe ? exe : "?";
  elf_load(o, co.file[0] ? co.file : "/proc/self/exe");
  return (uint32_t)sy->nobj++;
}

static uint32_t pp_name_index(pp_syms_t *sy, const char *name, uint32_t obj) {
  /* addresses are sorted: a function's come one after another */
  for (size_t i = sy->nnames; i-- > 0 && i + 8 >= sy->nnames;)
    if (sy->name_obj[i] == obj && strcmp(sy->names[i], name) == 0) return (uint32_t)i;
  sy->names[sy->nnames] = name;
  sy->name_obj[sy->nnames] = obj;
  return (uint32_t)sy->nnames++;
}

static bool pp_symbolize(pp_syms_t *sy, const hz_prof_site_t *sites, size_t n) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += sites[i].depth;
  sy->pc = hz_malloc((total + 1) * sizeof *sy->pc);
  sy->fn = hz_malloc((total + 1) * sizeof *sy->fn);
  sy->obj = hz_malloc((total + 1) * sizeof *sy->obj);
  sy->names = hz_malloc((total + 1) * sizeof *sy->names);
  sy->name_obj = hz_malloc((total + 1) * sizeof *sy->name_obj);
  if (!sy->pc || !sy->fn || !sy->obj || !sy->names || !sy->name_obj) return false;
  for (size_t i = 0; i < n; i++)
    for (uint32_t d = 0; d < sites[i].depth; d++) sy->pc[sy->npc++] = sites[i].pc[d];
  qsort(sy->pc, sy->npc, sizeof *sy->pc, cmp_pc);
  size_t u = 0;
  for (size_t i = 0; i < sy->npc; i++)
    if (u == 0 || sy->pc[i] != sy->pc[u - 1]) sy->pc[u++] = sy->pc[i];
  sy->npc = u;
  /* formatted names go in sy->text; their offsets become pointers after */
  size_t *own = hz_malloc((u + 1) * sizeof *own);
  if (own == NULL) return false;
  for (size_t i = 0; i < u; i++) {
    uintptr_t pc = sy->pc[i];
    uint32_t oi = pp_obj_of(sy, pc);
    sy->obj[i] = oi;
    const char *name = NULL;
    own[i] = SIZE_MAX;
    if (oi != UINT32_MAX) {
      pp_obj_t *o = &sy->objs[oi];
      if (pc < o->lo) o->lo = pc;
      if (pc > o->hi) o->hi = pc;
      name = elf_lookup(o, pc - 1 - o->bias);
      if (name == NULL) {
        const char *base = strrchr(o->path, '/');
        own[i] = sy->text.n;
        buf_printf(&sy->text, "%s+0x%lx", base ? base + 1 : o->path, (unsigned long)(pc - 1 - o->bias));
        buf_put(&sy->text, "", 1);
      }
    } else {
      own[i] = sy->text.n;
      buf_printf(&sy->text, "0x%lx", (unsigned long)(pc - 1));
      buf_put(&sy->text, "", 1);
    }
    sy->names[i] = name; /* provisional */
  }
  if (sy->text.oom) { hz_free(own); return false; }
  for (size_t i = 0; i < u; i++) {
    const char *name = own[i] != SIZE_MAX ? sy->text.p + own[i] : sy->names[i];
    sy->fn[i] = (uint32_t)i; /* provisional, remapped below */
    sy->names[i] = name;
  }
  /* dedupe names into functions */
  const char **per_pc = hz_malloc((u + 1) * sizeof *per_pc);
  if (per_pc == NULL) { hz_free(own); return false; }
  memcpy(per_pc, sy->names, u * sizeof *per_pc);
  sy->nnames = 0;
  for (size_t i = 0; i < u; i++) sy->fn[i] = pp_name_index(sy, per_pc[i], sy->obj[i]);
  hz_free(per_pc);
  hz_free(own);
  return true;
}

static void pp_syms_free(pp_syms_t *sy) {
  for (size_t i = 0; i < sy->nobj; i++)
    if (sy->objs[i].map) hz_os_unmap_file(sy->objs[i].map, sy->objs[i].size);
  hz_free(sy->pc);
  hz_free(sy->fn);
  hz_free(sy->obj);
  hz_free(sy->names);
  hz_free(sy->name_obj);
  hz_free(sy->text.p);
}

/* Frames of the allocator itself, when it is linked into the program (as a
 * shared object they are not captured at all). */
static bool pp_is_ours(const char *name) {
  static const char *const ours[] = {"malloc", "calloc", "realloc", "reallocarray", "aligned_alloc", "memalign",
                                     "posix_memalign", "valloc", "pvalloc", "alloc_big", "alloc_aligned"};
  if (strncmp(name, "hz_", 3) == 0 || strncmp(name, "prof_", 5) == 0 || strncmp(name, "__libc_", 7) == 0 ||
      strncmp(name, "_Znw", 4) == 0 || strncmp(name, "_Zna", 4) == 0 || strcmp(name, "__posix_memalign") == 0)
    return true;
  for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
    if (strcmp(name, ours[i]) == 0) return true;
  return false;
}

/* The first frame of a site that is the program's. */
static uint32_t pp_first(const pp_syms_t *sy, const hz_prof_site_t *s) {
  uint32_t d = 0;
  while (d + 1 < s->depth && pp_is_ours(sy->names[sy->fn[pc_index(sy, s->pc[d])]])) d++;
  return d;
}

static const char *pp_frame(const pp_syms_t *sy, const hz_prof_site_t *s, uint32_t d) {
  return sy->names[sy->fn[pc_index(sy, s->pc[d])]];
}

/* ---- pprof's protobuf (profile.proto) ---- */
static void pb_varint(pp_buf_t *b, uint64_t v) {
  uint8_t t[10];
  size_t n = 0;
  do {
    t[n++] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
    v >>= 7;
  } while (v);
  buf_put(b, t, n);
}
static void pb_uint(pp_buf_t *b, int field, uint64_t v) {
  if (v == 0) return;
  pb_varint(b, (uint64_t)field << 3);
  pb_varint(b, v);
}
static void pb_bytes(pp_buf_t *b, int field, const void *d, size_t n) {
  pb_varint(b, (uint64_t)field << 3 | 2);
  pb_varint(b, n);
  buf_put(b, d, n);
}
/* Append sub as a nested message and empty it for reuse. */
static void pb_msg(pp_buf_t *b, int field, pp_buf_t *sub) {
  pb_bytes(b, field, sub->p, sub->n);
  if (sub->oom) b->oom = true;
  sub->n = 0;
}

/* string table: names are interned by pointer first, then by text */
typedef struct {
  const char **s;
  size_t n, cap;
} pp_strings_t;

static uint64_t pp_str(pp_strings_t *t, const char *s) {
  for (size_t i = 0; i < t->n; i++)
    if (t->s[i] == s || strcmp(t->s[i], s) == 0) return i;
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    const char **q = hz_realloc(t->s, cap * sizeof *q);
    if (q == NULL) return 0;
    t->s = q;
    t->cap = cap;
  }
  t->s[t->n] = s;
  return t->n++;
}

static int64_t pp_round(double x) { return x > 0 ? (int64_t)(x + 0.5) : 0; }

static void pp_encode(pp_buf_t *out, const pp_syms_t *sy, const hz_prof_site_t *sites, size_t n, long rate) {
  pp_strings_t st = {0};
  pp_buf_t m = {0}, sub = {0};
  pp_str(&st, "");
  static const char *const types[4][2] = {
    {"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"}, {"inuse_space", "bytes"}};
  for (int i = 0; i < 4; i++) {
    pb_uint(&m, 1, pp_str(&st, types[i][0]));
    pb_uint(&m, 2, pp_str(&st, types[i][1]));
    pb_msg(out, 1, &m);
  }
  for (size_t i = 0; i < n; i++) {
    const hz_prof_site_t *s = &sites[i];
    for (uint32_t d = pp_first(sy, s); d < s->depth; d++) pb_varint(&sub, pc_index(sy, s->pc[d]) + 1);
    pb_msg(&m, 1, &sub);
    int64_t v[4] = {pp_round(s->alloc_n), pp_round(s->alloc_b), pp_round(s->live_n), pp_round(s->live_b)};
    for (int k = 0; k < 4; k++) pb_varint(&sub, (uint64_t)v[k]);
    pb_msg(&m, 2, &sub);
    pb_msg(out, 2, &m);
  }
  for (size_t i = 0; i < sy->nobj; i++) {
    const pp_obj_t *o = &sy->objs[i];
    pb_uint(&m, 1, i + 1);
    pb_uint(&m, 2, o->lo == UINTPTR_MAX ? 0 : o->lo);
    pb_uint(&m, 3, o->hi + 1);
    pb_uint(&m, 5, pp_str(&st, o->path));
    pb_uint(&m, 7, 1); /* has_functions: pprof need not symbolize */
    pb_msg(out, 3, &m);
  }
  for (size_t i = 0; i < sy->npc; i++) {
    pb_uint(&m, 1, i + 1);
    pb_uint(&m, 2, sy->obj[i] == UINT32_MAX ? 0 : sy->obj[i] + 1);
    pb_uint(&m, 3, sy->pc[i] - 1);
    pb_uint(&sub, 1, sy->fn[i] + 1);
    pb_msg(&m, 4, &sub);
    pb_msg(out, 4, &m);
  }
  for (size_t i = 0; i < sy->nnames; i++) {
    uint64_t name = pp_str(&st, sy->names[i]);
    pb_uint(&m, 1, i + 1);
    pb_uint(&m, 2, name);
    pb_uint(&m, 3, name);
    if (sy->name_obj[i] != UINT32_MAX) pb_uint(&m, 4, pp_str(&st, sy->objs[sy->name_obj[i]].path));
    pb_msg(out, 5, &m);
  }
  pb_uint(&m, 1, pp_str(&st, "space"));
  pb_uint(&m, 2, pp_str(&st, "bytes"));
  uint64_t comment = pp_str(&st, "hakozuna sampled heap profile");
  for (size_t i = 0; i < st.n; i++) pb_bytes(out, 6, st.s[i], strlen(st.s[i]));
  pb_msg(out, 11, &m);
  pb_uint(out, 12, (uint64_t)rate);
  pb_varint(out, 13 << 3 | 2); /* comment: packed string indexes */
  pb_varint(out, 1 + (comment > 0x7f) + (comment > 0x3fff));
  pb_varint(out, comment);
  if (m.oom || sub.oom) out->oom = true;
  hz_free(m.p);
  hz_free(sub.p);
  hz_free(st.s);
}

/* ---- gzip (RFC 1952) with stored deflate blocks (RFC 1951 type 00) ---- */
static uint32_t pp_crc32(const uint8_t *p, size_t n) {
  static uint32_t table[256];
  if (table[1] == 0)
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

static void pp_put_le(pp_buf_t *b, uint32_t v, int bytes) {
  uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  buf_put(b, t, (size_t)bytes);
}

static void pp_gzip(pp_buf_t *out, const pp_buf_t *in) {
  static const uint8_t header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
  buf_put(out, header, sizeof header);
  size_t off = 0;
  do {
    size_t len = in->n - off > 65535 ? 65535 : in->n - off;
    uint8_t final = off + len == in->n;
    buf_put(out, &final, 1);
    pp_put_le(out, (uint32_t)len, 2);
    pp_put_le(out, (uint32_t)(~len & 0xffff), 2);
    buf_put(out, in->p + off, len);
    off += len;
  } while (off < in->n);
  pp_put_le(out, pp_crc32((const uint8_t *)in->p, in->n), 4);
  pp_put_le(out, (uint32_t)in->n, 4);
}

/* ---- text outputs ---- */
static int pp_write_file(const char *path, const pp_buf_t *b) {
  if (b->oom) { errno = ENOMEM; return -1; }
  int fd = hz_os_open_report(path, false);
  if (fd < 0) {
    errno = -fd; /* why open failed (ENOENT, EACCES, ...) */
    return -1;
  }
  hz_os_write(fd, b->p, b->n);
  hz_os_close(fd);
  return 0;
}

/* Collapsed stacks, root first: "main;f;g bytes" (brendangregg/FlameGraph's
 * input, and tools/flamegraph.py's). */
static void pp_folded(pp_buf_t *out, const pp_syms_t *sy, const hz_prof_site_t *sites, size_t n, bool live) {
  for (size_t i = 0; i < n; i++) {
    const hz_prof_site_t *s = &sites[i];
    int64_t v = pp_round(live ? s->live_b : s->alloc_b);
    if (v <= 0 || s->depth == 0) continue;
    uint32_t first = pp_first(sy, s);
    for (uint32_t d = s->depth; d-- > first;) {
      for (const char *c = pp_frame(sy, s, d); *c; c++) buf_put(out, *c == ' ' || *c == ';' ? "_" : c, 1);
      if (d > first) buf_put(out, ";", 1);
    }
    buf_printf(out, " %lld\n", (long long)v);
  }
}

typedef struct {
  const char *name;
  double bytes, blocks;
} pp_row_t;

static int cmp_row(const void *a, const void *b) {
  double x = ((const pp_row_t *)a)->bytes, y = ((const pp_row_t *)b)->bytes;
  return x < y ? 1 : x > y ? -1 : 0;
}

static void pp_table(pp_buf_t *out, const pp_syms_t *sy, const hz_prof_site_t *sites, size_t n, bool live) {
  pp_row_t *rows = hz_malloc((n + 1) * sizeof *rows);
  if (rows == NULL) { out->oom = true; return; }
  size_t nr = 0;
  double total = 0, total_n = 0;
  for (size_t i = 0; i < n; i++) {
    const hz_prof_site_t *s = &sites[i];
    double b = live ? s->live_b : s->alloc_b, k = live ? s->live_n : s->alloc_n;
    if (s->depth == 0 || b < 0.5) continue;
    const char *name = pp_frame(sy, s, pp_first(sy, s));
    size_t r = 0;
    while (r < nr && strcmp(rows[r].name, name) != 0) r++;
    if (r == nr) rows[nr++] = (pp_row_t){name, 0, 0};
    rows[r].bytes += b;
    rows[r].blocks += k;
    total += b;
    total_n += k;
  }
  qsort(rows, nr, sizeof *rows, cmp_row);
  buf_printf(out, "%s bytes by call site (the function that called the allocator): %.0f bytes in %.0f blocks\n",
             live ? "Live" : "Allocated", total, total_n);
  buf_printf(out, "%14s %6s %12s  %s\n", "bytes", "%", "blocks", "call site");
  for (size_t r = 0; r < nr && r < 40; r++)
    buf_printf(out, "%14.0f %5.1f%% %12.0f  %s\n", rows[r].bytes, total > 0 ? 100 * rows[r].bytes / total : 0,
               rows[r].blocks, rows[r].name);
  if (nr > 40) buf_printf(out, "(%zu more call sites)\n", nr - 40);
  buf_put(out, "\n", 1);
  hz_free(rows);
}

/* PATH, and beside it PATH less .pb.gz with .folded, .alloc.folded, .txt. */
int hz_pprof_write(const char *path, const hz_prof_site_t *sites, size_t n, long rate) {
  pp_syms_t *sy = hz_malloc(sizeof *sy);
  if (sy == NULL) return -1;
  memset(sy, 0, sizeof *sy);
  int rc = -1;
  pp_buf_t pb = {0}, gz = {0}, txt = {0};
  struct { char base[4096], other[4200]; } *nm = hz_malloc(sizeof *nm); /* (not on a small stack) */
  char *base = nm ? nm->base : NULL, *other = nm ? nm->other : NULL;
  size_t len = strlen(path);
  if (nm == NULL) { errno = ENOMEM; goto out; }
  if (len >= sizeof nm->base) { errno = ENAMETOOLONG; goto out; }
  memcpy(base, path, len + 1);
  if (len > 6 && strcmp(base + len - 6, ".pb.gz") == 0) base[len - 6] = 0;
  if (!pp_symbolize(sy, sites, n)) { errno = ENOMEM; goto out; }
  pp_encode(&pb, sy, sites, n, rate);
  pp_gzip(&gz, &pb);
  if (pb.oom) gz.oom = true;
  if (pp_write_file(path, &gz) != 0) goto out;
  for (int live = 1; live >= 0; live--) {
    txt.n = 0;
    pp_folded(&txt, sy, sites, n, live);
    snprintf(other, sizeof nm->other, "%s%s", base, live ? ".folded" : ".alloc.folded");
    if (pp_write_file(other, &txt) != 0) goto out;
  }
  txt.n = 0;
  double samples = 0;
  for (size_t i = 0; i < n; i++) samples += sites[i].live_s;
  buf_printf(&txt, "hakozuna heap profile of pid %d: estimates from allocations sampled on average once per %ld bytes\n"
             "(HAKOZUNA_PROFILE_RATE); %zu stacks, %.0f sampled blocks live. pprof: go tool pprof -top %s\n\n",
             hz_os_pid(), rate, n, samples, path);
  pp_table(&txt, sy, sites, n, true);
  pp_table(&txt, sy, sites, n, false);
  snprintf(other, sizeof nm->other, "%s.txt", base);
  rc = pp_write_file(other, &txt);
out:
  hz_free(nm);
  pp_syms_free(sy);
  hz_free(sy);
  hz_free(pb.p);
  hz_free(gz.p);
  hz_free(txt.p);
  return rc;
}

static int cmp_live(const void *a, const void *b) {
  double x = (*(const hz_prof_site_t *const *)a)->live_b, y = (*(const hz_prof_site_t *const *)b)->live_b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Like LeakSanitizer's summary, from the samples still live at exit. */
void hz_pprof_leaks(int fd, const hz_prof_site_t *sites, size_t n, long rate) {
  pp_syms_t *sy = hz_malloc(sizeof *sy);
  const hz_prof_site_t **live = hz_malloc((n + 1) * sizeof *live);
  pp_buf_t out = {0};
  if (sy == NULL || live == NULL) goto done;
  memset(sy, 0, sizeof *sy);
  size_t nl = 0;
  double bytes = 0, blocks = 0;
  for (size_t i = 0; i < n; i++)
    if (sites[i].live_s > 0.5) {
      live[nl++] = &sites[i];
      bytes += sites[i].live_b;
      blocks += sites[i].live_n;
    }
  qsort(live, nl, sizeof *live, cmp_live);
  if (!pp_symbolize(sy, sites, n)) goto done;
  int pid = hz_os_pid();
  buf_printf(&out, "==%d== hakozuna: SAMPLED leak report: blocks still allocated at exit, estimated from allocations\n"
             "==%d== sampled on average once per %ld bytes (HAKOZUNA_PROFILE_RATE); sizes and counts are\n"
             "==%d== estimates, and a leak of much less than that many bytes may not show.\n\n", pid, pid, rate, pid);
  for (size_t i = 0; i < nl; i++) {
    const hz_prof_site_t *s = live[i];
    buf_printf(&out, "Leak of about %.0f bytes in about %.0f blocks (%.0f sampled) allocated from:\n", s->live_b,
               s->live_n, s->live_s);
    uint32_t first = pp_first(sy, s);
    for (uint32_t d = first; d < s->depth; d++) {
      size_t k = pc_index(sy, s->pc[d]);
      buf_printf(&out, "    #%u 0x%lx in %s (%s)\n", d - first, (unsigned long)s->pc[d], sy->names[sy->fn[k]],
                 sy->obj[k] != UINT32_MAX ? sy->objs[sy->obj[k]].path : "?");
    }
    buf_put(&out, "\n", 1);
  }
  buf_printf(&out, "SUMMARY: hakozuna: about %.0f bytes leaked in about %.0f allocations from %zu stacks "
             "(sampled at HAKOZUNA_PROFILE_RATE=%ld).\n", bytes, blocks, nl, rate);
  if (out.oom) goto done;
  if (hz_output_hooked()) hz_output_text(out.p, out.n); /* a program that takes our messages */
  else hz_os_write(fd, out.p, out.n);
done:
  if (sy) pp_syms_free(sy);
  hz_free(sy);
  hz_free(live);
  hz_free(out.p);
}
