# SPDX-License-Identifier: MIT
# Benchmark suite (docs/benchmarks.md). Included by the root Makefile.
#
#   make bench                      default suite (about 10 minutes on 2 cores)
#   make bench QUICK=1              smoke run (under 2 minutes)
#   make bench FULL=1               whole grid, more runs
#   make bench BENCH=random_mixed,larson ALLOC=glibc,mimalloc RUNS=5 THREADS=1,2
#   make bench-instructions         instructions per malloc+free under callgrind
#
# The programs are plain C linked against libc; the allocator under test is
# LD_PRELOADed by bench/run.py, which also writes the report.

BENCH_BIN    := $(BUILD)/bench-bin
BENCH_CFLAGS := -std=gnu11 -O2 -g -gdwarf-4 -Wall -Wextra -pthread
BENCH_LIBS   := -ldl -lm
BENCH_PROGS  := random_mixed random_mixed-bump mt_remote larson prodcons handoff channel cache large calloc rounds \
                realloc_growth redis_like mc_client mem_return thread_flood thread_churn remote_fan idle_cache runchild \
                new_delete
BENCH_EXES   := $(addprefix $(BENCH_BIN)/,$(BENCH_PROGS))
BENCH_COMMON := bench/bench.c bench/bench.h

# /usr/bin/python3 is Debian's, where python3-matplotlib installs; run.py
# finds another interpreter for the charts if this one lacks matplotlib.
BENCH_PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)

bench_flag = $(if $(filter-out 0 no false,$(1)),$(2))
BENCH_OPTS = $(strip $(call bench_flag,$(QUICK),--quick) $(call bench_flag,$(FULL),--full) \
             $(if $(BENCH),--bench $(BENCH)) $(if $(ALLOC),--alloc $(ALLOC)) \
             $(if $(THREADS),--threads $(THREADS)) $(if $(RUNS),--runs $(RUNS)) \
             $(if $(OUT),--out $(OUT)) --build $(BUILD) $(BENCH_ARGS))

.PHONY: bench-progs bench-instructions
bench-progs: $(BENCH_EXES)

bench: lib lib-nocheck bench-progs
	$(BENCH_PYTHON) bench/run.py $(BENCH_OPTS)

bench-instructions: lib lib-nocheck bench-progs
	$(BENCH_PYTHON) bench/run.py --instructions $(BENCH_OPTS)

$(BENCH_BIN)/random_mixed-bump: bench/random_mixed.c $(BENCH_COMMON) | $(BENCH_BIN)
	$(CC) $(BENCH_CFLAGS) -DBENCH_BUMP -o $@ $< bench/bench.c $(BENCH_LIBS)
$(BENCH_BIN)/runchild: bench/runchild.c | $(BENCH_BIN)
	$(CC) $(BENCH_CFLAGS) -o $@ $<
$(BENCH_BIN)/new_delete: bench/new_delete.cc | $(BENCH_BIN)
	$(CXX) -std=gnu++17 -O2 -g -gdwarf-4 -Wall -Wextra -o $@ $<
$(BENCH_BIN)/%: bench/%.c $(BENCH_COMMON) | $(BENCH_BIN)
	$(CC) $(BENCH_CFLAGS) -o $@ $< bench/bench.c $(BENCH_LIBS)
$(BENCH_BIN):
	mkdir -p $@
