# SPDX-License-Identifier: MIT
# mk/reliability.mk: fault, fuzz, sanitizer, valgrind and real-program tests
# (docs/reliability.md). Included by the root Makefile; `make test` runs:
#
#   make test-faults     out of memory under RLIMIT_AS (C and C++, threads)
#   make test-fuzz       libFuzzer: the committed corpus, then FUZZ_CI_SECONDS of fuzzing
#   make test-ubsan      the core suite and test-faults on a UBSan build ($(BUILD)/ubsan)
#   make test-tsan       the threaded tests on a ThreadSanitizer build ($(BUILD)/tsan)
#   make test-valgrind   memcheck with hakozuna linked, preloaded and in a static object
#   make test-programs   python's regression tests, redis, memcached, git, gcc, sqlite
#
# Not in `make test`:
#   make fuzz [FUZZ_SECONDS=600] [FUZZ_JOBS=1]   a longer fuzzing run
#   make fuzz-merge                              add new coverage to tests/fuzz/corpus
#   tools/soak.sh MINUTES [THREADS]              long stress, RSS over time
#
# HZ_LIB_DIR (default $(BUILD)) picks the libhakozuna.so that test-faults and
# test-programs run against. What they need (clang's fuzzer runtime, valgrind,
# redis, ...) is checked and, as root, installed by tests/need.sh; a test whose
# need cannot be met here is skipped with a line naming the Debian package.

REL_BIN     := $(BUILD)/reliability
HZ_LIB_DIR  ?= $(BUILD)
REL_LOGS    := $(REL_BIN)/logs
REL_RUN     := HZ_REL_LOGS=$(REL_LOGS) tests/faults/run.sh

REL_CFLAGS  := -std=gnu11 -O2 -g -Wall -Wextra -D_GNU_SOURCE -pthread -Itests -Itests/faults -Iinclude \
               -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-realloc -fno-builtin-free
REL_CXX     ?= c++
REL_HDRS    := tests/check.h tests/testutil.h tests/faults/squeeze.h include/hakozuna.h

.PHONY: test-faults test-fuzz test-ubsan test-valgrind test-programs fuzz fuzz-merge \
        rel-need-fuzzer test-fuzz-run test-valgrind-run test-ubsan-run ubsan-test-build
test: test-faults test-fuzz test-ubsan test-valgrind test-programs

# ---- faults --------------------------------------------------------------
# Linked against libhakozuna.so.0 without an rpath: LD_LIBRARY_PATH picks
# which build's library the run uses.
test-faults: lib $(REL_BIN)/oom $(REL_BIN)/oom_cxx
	@export LD_LIBRARY_PATH=$(abspath $(HZ_LIB_DIR)) HZ_TEST_TARGET=hakozuna; \
	 $(REL_RUN) faults/oom$(REL_SUFFIX) 180 $(REL_BIN)/oom 8 && \
	 $(REL_RUN) faults/oom-cxx$(REL_SUFFIX) 120 $(REL_BIN)/oom_cxx

$(REL_BIN)/oom: tests/faults/oom.c $(REL_HDRS) $(LIB_SO) | $(REL_BIN)
	$(CC) $(REL_CFLAGS) $< -o $@ -L$(BUILD) -lhakozuna -ldl
$(REL_BIN)/oom_cxx: tests/faults/oom_cxx.cc $(REL_HDRS) $(LIB_SO) | $(REL_BIN)
	$(REL_CXX) -std=gnu++17 -fsized-deallocation -O2 -g -Wall -Wextra -pthread -Itests -Itests/faults -Iinclude \
	    -fno-builtin-malloc -fno-builtin-free $< -o $@ -L$(BUILD) -lhakozuna -ldl
$(REL_BIN)/soak: tests/faults/soak.c tests/check.h tests/testutil.h | $(REL_BIN)
	$(CC) $(REL_CFLAGS) $< -o $@ -ldl
$(REL_BIN):
	mkdir -p $@

# ---- fuzzing -------------------------------------------------------------
# The allocator's sources are compiled into the harness with only the hz_*
# names (HZ_NO_OVERRIDE) and coverage instrumentation plus UBSan; the
# harness itself is compiled plainly (its checking loops would only slow
# the coverage hooks down). No ASan: the allocator is what is under test.
FUZZ_DIR         := $(BUILD)/fuzz
FUZZ_BIN         := $(FUZZ_DIR)/fuzz_ops
FUZZ_CC          ?= clang
FUZZ_SAN         := -fsanitize=undefined -fno-sanitize-recover=all
FUZZ_SECONDS     ?= 600
FUZZ_CI_SECONDS  ?= 40
FUZZ_JOBS        ?= 1
FUZZ_OPTS        := -max_len=2048 -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
                    -artifact_prefix=$(abspath $(FUZZ_DIR))/
FUZZ_OBJS        := $(patsubst src/%.c,$(FUZZ_DIR)/obj/%.o,$(SRCS))

rel-need-fuzzer:
	@$(HZ_NEED) fuzzer
$(FUZZ_DIR)/obj/%.o: src/%.c $(HDRS) | rel-need-fuzzer
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CFLAGS_BASE) -Wno-unused-function -DHZ_NO_OVERRIDE=1 -fsanitize=fuzzer-no-link $(FUZZ_SAN) \
	    -c $< -o $@
$(FUZZ_DIR)/fuzz_ops.o: tests/fuzz/fuzz_ops.c tests/testutil.h include/hakozuna.h | rel-need-fuzzer
	@mkdir -p $(@D)
	$(FUZZ_CC) -std=gnu11 -O2 -g -Wall -Wextra -Iinclude -Itests -c $< -o $@
$(FUZZ_BIN): $(FUZZ_DIR)/fuzz_ops.o $(FUZZ_OBJS)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) $^ -o $@ -lpthread

# Every committed input once, then new inputs (kept in $(FUZZ_DIR)/corpus).
test-fuzz:
	@$(call hz_if_needed,fuzzer,test-fuzz-run)
test-fuzz-run: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_DIR)/corpus
	@$(REL_RUN) fuzz/corpus 300 $(FUZZ_BIN) $(FUZZ_OPTS) -runs=0 tests/fuzz/corpus
	@$(REL_RUN) "fuzz/explore ($(FUZZ_CI_SECONDS)s)" $$(($(FUZZ_CI_SECONDS) + 120)) \
	    $(FUZZ_BIN) $(FUZZ_OPTS) -max_total_time=$(FUZZ_CI_SECONDS) $(FUZZ_DIR)/corpus tests/fuzz/corpus

fuzz: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_DIR)/corpus
	$(FUZZ_BIN) $(FUZZ_OPTS) -max_total_time=$(FUZZ_SECONDS) -jobs=$(FUZZ_JOBS) -workers=$(FUZZ_JOBS) \
	    $(FUZZ_DIR)/corpus tests/fuzz/corpus

fuzz-merge: $(FUZZ_BIN)
	$(FUZZ_BIN) $(FUZZ_OPTS) -merge=1 tests/fuzz/corpus $(FUZZ_DIR)/corpus

# ---- UBSan ---------------------------------------------------------------
# The allocator built with -fsanitize=undefined in its own build directory;
# the core suite (tests/run.sh --build) and the fault tests run against it.
# Left out: the link/* tests, which link libhakozuna.a / hakozuna.o into
# programs without libubsan.
UBSAN_BUILD := $(BUILD)/ubsan
UBSAN_FLAGS := -fsanitize=undefined -fno-sanitize-recover=all
UBSAN_MAKE  := $(MAKE) --no-print-directory BUILD=$(UBSAN_BUILD) CFLAGS='$(UBSAN_FLAGS)' \
               LDLIBS_LIB='-lpthread -lubsan'
test-ubsan: lib
	@$(call hz_if_needed,ubsan,test-ubsan-run)
test-ubsan-run: lib
	@$(UBSAN_MAKE) lib ubsan-test-build >/dev/null
	tests/run.sh --build $(UBSAN_BUILD) api/ threads/ misuse/ init/ heap/ purge/ options/ programs/
	@$(MAKE) --no-print-directory test-faults HZ_LIB_DIR=$(UBSAN_BUILD) REL_SUFFIX=-ubsan
ubsan-test-build: $(TEST_GENERIC_ALL) $(filter-out $(TEST_DIR)/link/%,$(TEST_LINKED))

# ---- valgrind ------------------------------------------------------------
VG_CFLAGS := -std=gnu11 -O1 -g -gdwarf-4 -fno-builtin -pthread -Iinclude
$(REL_BIN)/vg-linked: tests/faults/vg_prog.c $(LIB_SO) | $(REL_BIN)
	$(CC) $(VG_CFLAGS) $< -o $@ -L$(BUILD) -Wl,-rpath,$(abspath $(BUILD)) -Wl,--no-as-needed -lhakozuna
$(REL_BIN)/vg-plain: tests/faults/vg_prog.c | $(REL_BIN)
	$(CC) $(VG_CFLAGS) $< -o $@
$(REL_BIN)/vg-object: tests/faults/vg_prog.c $(LIB_OBJ) | $(REL_BIN)
	$(CC) $(VG_CFLAGS) $< $(LIB_OBJ) -o $@
test-valgrind: lib
	@$(call hz_if_needed,valgrind,test-valgrind-run)
test-valgrind-run: lib $(REL_BIN)/vg-linked $(REL_BIN)/vg-plain $(REL_BIN)/vg-object
	@$(REL_RUN) valgrind/memcheck 300 tests/faults/valgrind.sh $(REL_BIN) $(abspath $(BUILD))/libhakozuna.so

# ---- real programs -------------------------------------------------------
test-programs: lib
	@tests/programs/heavy.sh --lib $(HZ_LIB_DIR)/libhakozuna.so

# ---- ThreadSanitizer -----------------------------------------------------
# The allocator's sources built with -fsanitize=thread and only the hz_*
# names (TSan has its own malloc), linked into the threaded tests, whose
# malloc/free/... go to hz_* through tests/tsan/hz_names.h. TSan reports
# data races and lock-order inversions (ARCHITECTURE.md, the lock rule);
# any report fails the test. The purge thread is kept busy (1 ms delay).
TSAN_DIR    := $(BUILD)/tsan
TSAN_FLAGS  := -fsanitize=thread -O1
TSAN_OBJS   := $(patsubst src/%.c,$(TSAN_DIR)/obj/%.o,$(SRCS))
TSAN_TESTS  := threads/stress threads/churn purge/collect threads/inbox_full trim/race threads/large_remote threads/adopt
TSAN_BINS   := $(addprefix $(TSAN_DIR)/,$(TSAN_TESTS))
TSAN_ENV    := TSAN_OPTIONS='halt_on_error=1 second_deadlock_stack=1' HZ_TEST_TARGET=tsan \
               HAKOZUNA_PURGE_DELAY=1 HZ_STRESS_SECONDS=1 HZ_STRESS_MIN_OPS=1 HZ_CHURN_THREADS=1000

.PHONY: test-tsan test-tsan-run
test: test-tsan
test-tsan:
	@$(call hz_if_needed,tsan,test-tsan-run)
test-tsan-run: $(TSAN_BINS)
	@for t in $(TSAN_TESTS); do \
	  env $(TSAN_ENV) $(REL_RUN) "tsan/$$t" 300 $(TSAN_DIR)/$$t || exit 1; done
$(TSAN_DIR)/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -DHZ_NO_OVERRIDE=1 $(TSAN_FLAGS) -c $< -o $@
$(TSAN_BINS): $(TSAN_DIR)/%: tests/%.c $(TSAN_OBJS) tests/tsan/hz_names.h $(TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(TSAN_FLAGS) -include tests/tsan/hz_names.h $< $(TSAN_OBJS) -o $@ -ldl
