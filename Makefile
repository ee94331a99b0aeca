# SPDX-License-Identifier: MIT
# hakozuna: `make` builds the libraries, `make test` runs every test,
# `make bench` runs the comparison suite. Sub-makefiles in mk/ hold the
# test, benchmark and install rules.

# The one definition of the version: the soname, hakozuna.pc, the CMake
# version file, `hakozuna --version` and hz_version() come from it; the
# header's HZ_VERSION_* and the Rust crate's version are checked against it
# (tests/install/version.sh).
VERSION   := 0.2.0
SOVERSION := $(firstword $(subst ., ,$(VERSION)))

# make TARGET=<triplet> cross-builds with <triplet>-gcc into build/<triplet>/
# (the same file names; see docs/install.md): aarch64-linux-gnu,
# x86_64-w64-mingw32, x86_64-linux-musl. (Debian's musl-tools has only the
# compiler, x86_64-linux-musl-gcc: the host's gcc with musl's headers and
# libraries, linked by the host's binutils; no C++.)
TARGET  ?=
HZ_MUSL := $(findstring musl,$(TARGET))
ifneq ($(TARGET),)
ifeq ($(origin CC),default)
CC := $(TARGET)-gcc
endif
ifeq ($(origin CXX),default)
CXX := $(TARGET)-g++
endif
ifeq ($(origin LD),default)
LD := $(if $(HZ_MUSL),ld,$(TARGET)-ld)
endif
ifeq ($(origin AR),default)
AR := $(if $(HZ_MUSL),ar,$(TARGET)-ar)
endif
BUILD   ?= build/$(TARGET)
endif
CC      ?= cc
BUILD   ?= build
# Windows (a mingw TARGET) builds src/os_windows.c in place of src/os.c.
ifneq ($(findstring mingw,$(TARGET)),)
HZ_OS := windows
CFLAGS_BASE := -std=gnu11 -O2 -g -fexceptions -Wall -Wextra -Wno-unused-parameter \
               -D__USE_MINGW_ANSI_STDIO=1 -Iinclude -Isrc -DHZ_LIB_VERSION='"$(VERSION)"'
LDLIBS_LIB := -lbcrypt -static-libgcc # no libgcc_s_seh-1.dll to ship
SRCS := $(filter-out src/os.c src/profile.c src/pprof.c,$(wildcard src/*.c))
else
HZ_OS := linux
# (-Wno-missing-field-initializers: table rows leave trailing fields zero on
# purpose; clang warns about that, gcc does not. -gdwarf-4: valgrind 3.19,
# Debian 12's, cannot read clang's DWARF 5.)
CFLAGS_BASE := -std=gnu11 -O2 -g -gdwarf-4 -fPIC -fexceptions -Wall -Wextra -Wno-unused-parameter \
               -Wno-missing-field-initializers \
               -fvisibility=hidden -ftls-model=initial-exec -fno-plt \
               -fno-semantic-interposition -Iinclude -Isrc -DHZ_LIB_VERSION='"$(VERSION)"'
# (GCC: no constants loaded from .rodata for merged or vectorised stores, so
# that a program's allocations read none of .rodata's pages: docs/perf.md §57.
# For the library's own objects only: the fuzzer build compiles the sources
# with clang and CFLAGS_BASE.)
HZ_CODEGEN := $(shell $(CC) -fno-store-merging -fno-tree-slp-vectorize -E -x c /dev/null >/dev/null 2>&1 && \
                echo -fno-store-merging -fno-tree-slp-vectorize)
# (libgcc's unwinder, for the profiler, linked in and hidden: no libgcc_s.so
# mapped into every process, about 80 KiB of RSS: docs/perf.md §32)
LDLIBS_LIB := -lpthread -static-libgcc -Wl,--exclude-libs,ALL
# The code every process runs first, the cold files (the report, the
# profile writer) last, before libgcc's unwinder, and DT_FINI in the first
# part: the kernel maps the 64 KiB of text around each fault, so the less
# the code a process runs is spread, the fewer pages it maps (§57).
HZ_LAST_SRCS := src/stats.c src/profile.c src/pprof.c
SRCS := $(filter-out src/%_windows.c $(HZ_LAST_SRCS),$(sort $(wildcard src/*.c))) $(HZ_LAST_SRCS)
LDLIBS_LIB += -Wl,-fini=hz_lib_fini
# (musl-gcc's link spec leaves out --eh-frame-hdr: without the header the
# profiler's unwinder found none of the library's unwind tables, and aborted)
ifneq ($(HZ_MUSL),)
LDLIBS_LIB += -Wl,--eh-frame-hdr
endif
endif
CFLAGS  ?=
# Layers that run once or on request (reading the options at start-up, the
# statistics report, the profile writer) are built for size: every process
# maps their code, and -Os takes 14 KiB off it (docs/perf.md §35).
HZ_SIZE_SRCS := options stats pprof
ALL_CFLAGS = $(CFLAGS_BASE) $(HZ_CODEGEN) $(if $(filter $(HZ_SIZE_SRCS),$(notdir $*)),-Os) $(CFLAGS)

HDRS := $(wildcard src/*.h) include/hakozuna.h
OBJS         := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(SRCS))
OBJS_CHECKED := $(patsubst src/%.c,$(BUILD)/obj-checked/%.o,$(SRCS))
OBJS_NOCHECK := $(patsubst src/%.c,$(BUILD)/obj-nocheck/%.o,$(SRCS))

LIB_SO      := $(BUILD)/libhakozuna.so
LIB_A       := $(BUILD)/libhakozuna.a
LIB_OBJ     := $(BUILD)/hakozuna.o
LIB_CHECKED := $(BUILD)/libhakozuna-checked.so
# Benchmark-only: the default build with the misuse checks compiled out, to
# measure what they cost (make bench compares it; never installed).
LIB_NOCHECK := $(BUILD)/libhakozuna-nocheck.so

# Windows: the DLL, its import library and the static library.
LIB_DLL     := $(BUILD)/hakozuna.dll
LIB_IMPLIB  := $(BUILD)/libhakozuna.dll.a

.PHONY: all lib lib-nocheck clean
all: lib
ifeq ($(HZ_OS),windows)
lib: $(LIB_DLL) $(LIB_A)
else
lib: $(LIB_SO) $(LIB_A) $(LIB_OBJ) $(LIB_CHECKED)
endif
lib-nocheck: $(LIB_NOCHECK)

$(BUILD)/obj/%.o: src/%.c $(HDRS) Makefile | $(BUILD)/obj
	$(CC) $(ALL_CFLAGS) -c $< -o $@
$(BUILD)/obj-checked/%.o: src/%.c $(HDRS) Makefile | $(BUILD)/obj-checked
	$(CC) $(ALL_CFLAGS) -DHZ_CHECKED=1 -c $< -o $@
$(BUILD)/obj-nocheck/%.o: src/%.c $(HDRS) Makefile | $(BUILD)/obj-nocheck
	$(CC) $(ALL_CFLAGS) -DHZ_NOCHECK=1 -c $< -o $@
$(BUILD)/obj $(BUILD)/obj-checked $(BUILD)/obj-nocheck:
	mkdir -p $@

$(LIB_SO).$(VERSION): $(OBJS)
	$(CC) -shared -Wl,-soname,libhakozuna.so.$(SOVERSION) -Wl,-z,now -Wl,-z,nodelete -o $@ $^ $(LDLIBS_LIB)
$(LIB_SO): $(LIB_SO).$(VERSION)
	ln -sf libhakozuna.so.$(VERSION) $(BUILD)/libhakozuna.so.$(SOVERSION)
	ln -sf libhakozuna.so.$(VERSION) $@
$(LIB_CHECKED): $(OBJS_CHECKED)
	$(CC) -shared -Wl,-soname,libhakozuna-checked.so -Wl,-z,now -Wl,-z,nodelete -o $@ $^ $(LDLIBS_LIB)
$(LIB_NOCHECK): $(OBJS_NOCHECK)
	$(CC) -shared -Wl,-soname,libhakozuna-nocheck.so -Wl,-z,now -Wl,-z,nodelete -o $@ $^ $(LDLIBS_LIB)
$(LIB_A): $(OBJS)
	rm -f $@ && $(AR) rcs $@ $^
$(LIB_DLL): $(OBJS)
	$(CC) -shared -o $@ $^ -Wl,--out-implib,$(LIB_IMPLIB) $(LDLIBS_LIB)
$(LIB_IMPLIB): $(LIB_DLL)
# One relocatable object: linking it overrides malloc in a static program.
$(LIB_OBJ): $(OBJS)
	$(LD) -r -o $@ $^

clean:
	rm -rf $(BUILD)

# The README's option table and the man pages (docs/man) are generated from
# src/options.c; check-docs (part of make test) fails when one is out of date.
.PHONY: options-doc check-docs man
$(BUILD)/options-doc: $(LIB_A)
	printf '#include "hakozuna.h"\nint main(void) { hz_options_markdown(stdout); return 0; }\n' | \
	  $(CC) -Iinclude -x c - -x none $(LIB_A) -lpthread -o $@
options-doc: $(BUILD)/options-doc
	@$(BUILD)/options-doc
check-docs: $(BUILD)/options-doc
	@$(BUILD)/options-doc > $(BUILD)/options.md
	@awk '/<!-- options:begin -->/{f=1;next} /<!-- options:end -->/{f=0} f' README.md | diff -u - $(BUILD)/options.md \
	  && echo "PASS check-docs: README option table matches src/options.c" \
	  || { echo "FAIL check-docs: run 'make options-doc' and paste the table into README.md"; exit 1; }
	@for page in $(MAN_PAGES); do \
	  $(call hz_man,docs/man/$$page.in) > $(BUILD)/$$page || exit 1; \
	  diff -u docs/man/$$page $(BUILD)/$$page || { echo "FAIL check-docs: docs/man/$$page is out of date: run 'make man'"; exit 1; }; \
	done; echo "PASS check-docs: docs/man/hakozuna.1 and hakozuna.3 match their templates and src/options.c"
# The man pages carry the date of this version's CHANGELOG entry.
MAN_PAGES := hakozuna.1 hakozuna.3
MAN_DATE = $(shell sed -n 's/^\#\# \[$(VERSION)\] - \([0-9-]*\).*/\1/p' CHANGELOG.md)
hz_man = $(BUILD)/options-doc | sh tools/man.sh $(1) $(VERSION) $(SOVERSION) '$(MAN_DATE)'
man: $(BUILD)/options-doc
	@for page in $(MAN_PAGES); do $(call hz_man,docs/man/$$page.in) > docs/man/$$page || exit 1; \
	  echo "  GEN  docs/man/$$page"; done
test: check-docs

# What tests need from the machine is checked (and, as root, installed) by
# tests/need.sh. hz_if_needed CAPABILITIES,TARGET: make TARGET when they
# work here; a SKIP line naming the Debian package when they cannot be had.
HZ_NEED := tests/need.sh
hz_if_needed = $(HZ_NEED) $(1); rc=$$?; \
	if [ $$rc = 77 ]; then echo "SKIP  $(2): needs $(1) (see the line above)"; exit 0; fi; \
	[ $$rc = 0 ] || exit $$rc; \
	$(MAKE) --no-print-directory $(2)

# Each mk/*.mk adds its own prerequisites to these (test-unit, test-install, ...).
.PHONY: test bench
test: lib

-include mk/test.mk
-include mk/bench.mk
-include mk/install.mk
-include mk/reliability.mk
-include mk/platform.mk
