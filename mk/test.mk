# SPDX-License-Identifier: MIT
# mk/test.mk: the test suite (included by the root Makefile).
#
#   make test                 build the libraries and the tests, run them all
#   make test TESTS=misuse    only the tests whose name contains "misuse"
#   make test-build           build the test programs only
#   make test-glibc           the allocator-independent tests on glibc
#
# The tests are in tests/ (see docs/testing.md); tests/run.sh runs them.

TEST_DIR := $(BUILD)/tests
TESTS ?=
# make's built-in CXX is g++; the C++ compiler the system names is c++
# (g++ or clang++), as CC defaults to cc.
ifeq ($(origin CXX),default)
CXX := c++
endif
# -fno-builtin-*: the tests call the allocator, not the compiler's idea of it.
# (posix_memalign: gcc takes it to leave errno alone, as POSIX says it
# does, and api.c's check that it set ENOMEM, as glibc's does, read a 0
# it had stored before the call: with musl's headers, and a plain glibc build)
TEST_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -D_GNU_SOURCE -pthread \
               -Itests -Iinclude -fno-builtin-malloc -fno-builtin-calloc \
               -fno-builtin-realloc -fno-builtin-free -fno-builtin-posix_memalign
TEST_CXXFLAGS := -std=gnu++17 -fsized-deallocation -O2 -g -Wall -Wextra -D_GNU_SOURCE -pthread \
                 -Itests -Iinclude -fno-builtin-malloc -fno-builtin-free
TEST_HDRS := tests/check.h tests/testutil.h tests/seccomp.h include/hakozuna.h
HZ_LINK := -L$(BUILD) -Wl,-rpath,$(abspath $(BUILD))

# Tests that use only the standard API: run preloaded (or on glibc).
TEST_GENERIC := $(addprefix $(TEST_DIR)/,api/api threads/stress threads/fork \
                  threads/churn threads/lastexit threads/join threads/join_tls threads/cancel_pending threads/smallstack init/ctor init/dlopen init/dlclose misuse/misuse \
                  init/reenter init/fork_stdio init/fork_signal purge/trim purge/trim_pages purge/calloc_reuse purge/errno purge/mlock arena/as_limit arena/as_release arena/as_budget arena/mlock_rss arena/no_mprotect \
                  purge/collect misuse/hardened heap/maps threads/tiny_remote arena/sandbox_kill)
TEST_GENERIC_ALL := $(TEST_GENERIC) $(TEST_DIR)/api/cxx \
                    $(TEST_DIR)/init/libdlhelper.so $(TEST_DIR)/init/liballocshim.so \
                    $(TEST_DIR)/threads/libjointls.so $(TEST_DIR)/threads/libjoinadopted.so \
                    $(TEST_DIR)/options/libnothreads.so
# Tests linked with hakozuna.
TEST_LINKED := $(addprefix $(TEST_DIR)/,api/api-hz api/api-hz-checked \
                 options/options options/options-static options/stats options/live stats/report profile/profile profile/profile-checked \
                 link/link-shared \
                 link/link-archive link/link-object link/link-static \
                 init/fork_reclaim purge/trim_huge purge/trim_huge-checked heap/collect \
                 heap/blockstart trim/idle trim/race heap/exit_return heap/busy_cache arena/busy_purge heap/span_reuse heap/stash purge/idle_free purge/idle_threaded threads/exit_pages purge/single purge/cycles purge/huge_reuse purge/huge_grow purge/huge_grow-checked purge/trim_rate purge/no_sleep threads/remote threads/idle_inbox threads/fork_trim threads/inbox_full threads/join_adopted threads/large_remote threads/adopt misuse/trim_double init/footprint arena/thp arena/regions arena/cpu_arenas arena/cpu_limit arena/impossible arena/sandbox)

.PHONY: test-run test-build test-glibc test-need
# The compilers and python3 every test build and shell test uses: installed
# as root on a bare machine, else make stops on a line naming the package.
# (Cross builds run their programs elsewhere: tests/platform/*.sh check
# their compilers, tests/need.sh arm64-cross and mingw.)
test-need:
ifeq ($(TARGET),)
	@CC='$(CC)' CXX='$(CXX)' $(HZ_NEED) cc cxx python3
endif
$(TEST_GENERIC_ALL) $(TEST_LINKED): | test-need
test: test-run
test-run: test-need lib test-build
	tests/run.sh --build $(BUILD) $(TESTS)
test-build: $(TEST_GENERIC_ALL) $(TEST_LINKED)
test-glibc: $(TEST_GENERIC_ALL)
	tests/run.sh --glibc --build $(BUILD) $(TESTS)

$(TEST_GENERIC): $(TEST_DIR)/%: tests/%.c $(TEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ -ldl
$(TEST_DIR)/api/cxx: tests/api/cxx.cc $(TEST_HDRS)
	@mkdir -p $(@D)
	$(CXX) $(TEST_CXXFLAGS) $< -o $@ -ldl
$(TEST_DIR)/init/libdlhelper.so: tests/init/dlopen_lib.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -fPIC -shared $< -o $@
$(TEST_DIR)/init/dlopen: $(TEST_DIR)/init/libdlhelper.so
$(TEST_DIR)/threads/libjointls.so: tests/threads/join_tls_lib.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -fPIC -shared $< -o $@
$(TEST_DIR)/threads/join_tls: $(TEST_DIR)/threads/libjointls.so
$(TEST_DIR)/threads/libjoinadopted.so: tests/threads/join_tls_lib.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -fPIC -shared -DJOIN_TLS_BYTES='(256 << 10)' $< -o $@
$(TEST_DIR)/threads/join_adopted: $(TEST_DIR)/threads/libjoinadopted.so
$(TEST_DIR)/init/liballocshim.so: tests/init/alloc_shim.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -fPIC -shared $< -o $@
$(TEST_DIR)/init/fork_reclaim $(TEST_DIR)/purge/trim_huge $(TEST_DIR)/trim/idle $(TEST_DIR)/trim/race $(TEST_DIR)/heap/exit_return $(TEST_DIR)/heap/busy_cache $(TEST_DIR)/arena/busy_purge $(TEST_DIR)/heap/span_reuse $(TEST_DIR)/heap/stash $(TEST_DIR)/purge/idle_free $(TEST_DIR)/purge/idle_threaded $(TEST_DIR)/threads/exit_pages $(TEST_DIR)/purge/single $(TEST_DIR)/purge/cycles $(TEST_DIR)/purge/huge_reuse $(TEST_DIR)/purge/huge_grow $(TEST_DIR)/purge/trim_rate $(TEST_DIR)/purge/no_sleep $(TEST_DIR)/threads/remote $(TEST_DIR)/threads/idle_inbox $(TEST_DIR)/threads/fork_trim $(TEST_DIR)/threads/inbox_full $(TEST_DIR)/threads/join_adopted $(TEST_DIR)/threads/large_remote $(TEST_DIR)/threads/adopt $(TEST_DIR)/misuse/trim_double $(TEST_DIR)/init/footprint $(TEST_DIR)/arena/thp $(TEST_DIR)/arena/regions $(TEST_DIR)/arena/cpu_arenas $(TEST_DIR)/arena/cpu_limit $(TEST_DIR)/arena/impossible $(TEST_DIR)/arena/sandbox: $(TEST_DIR)/%: tests/%.c $(TEST_HDRS) $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(HZ_LINK) -lhakozuna -ldl
# White-box: compiles src/internal.h's inline functions, links nothing of ours.
$(TEST_DIR)/heap/blockstart: tests/heap/blockstart.c $(TEST_HDRS) src/internal.h
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@
# -rdynamic: the test's own pthread_create must be the one the library calls.
$(TEST_DIR)/heap/collect: tests/heap/collect.c $(TEST_HDRS) $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -rdynamic $< -o $@ $(HZ_LINK) -lhakozuna -ldl
$(TEST_DIR)/purge/trim_huge-checked: tests/purge/trim_huge.c $(TEST_HDRS) $(LIB_CHECKED)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DHZ_CHECKED_LIB $< -o $@ $(HZ_LINK) -l:libhakozuna-checked.so -ldl
$(TEST_DIR)/purge/huge_grow-checked: tests/purge/huge_grow.c $(TEST_HDRS) $(LIB_CHECKED)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DHZ_CHECKED_LIB $< -o $@ $(HZ_LINK) -l:libhakozuna-checked.so -ldl
$(TEST_DIR)/options/libnothreads.so: tests/options/nothreads.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -fPIC -shared $< -o $@

$(TEST_DIR)/api/api-hz: tests/api/api.c $(TEST_HDRS) $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DHZ_API $< -o $@ $(HZ_LINK) -lhakozuna -ldl
$(TEST_DIR)/api/api-hz-checked: tests/api/api.c $(TEST_HDRS) $(LIB_CHECKED)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DHZ_API -DHZ_CHECKED_TEST $< -o $@ $(HZ_LINK) -l:libhakozuna-checked.so -ldl
$(TEST_DIR)/options/%: tests/options/%.c $(TEST_HDRS) $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(HZ_LINK) -lhakozuna -ldl
$(TEST_DIR)/stats/%: tests/stats/%.c $(TEST_HDRS) $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(HZ_LINK) -lhakozuna -ldl
$(TEST_DIR)/profile/profile: tests/profile/profile.c $(TEST_HDRS) $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(HZ_LINK) -lhakozuna -ldl
$(TEST_DIR)/profile/profile-checked: tests/profile/profile.c $(TEST_HDRS) $(LIB_CHECKED)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(HZ_LINK) -l:libhakozuna-checked.so -ldl
$(TEST_DIR)/link/link-shared: tests/link/link.c $(TEST_HDRS) $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(HZ_LINK) -lhakozuna
$(TEST_DIR)/link/link-archive: tests/link/link.c $(TEST_HDRS) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< $(LIB_A) -o $@
$(TEST_DIR)/link/link-object: tests/link/link.c $(TEST_HDRS) $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< $(LIB_OBJ) -o $@
$(TEST_DIR)/link/link-static: tests/link/link.c $(TEST_HDRS) $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -static $< $(LIB_OBJ) -o $@
# options/secure makes a copy of it set-user-ID: linked whole, as a
# set-user-ID program gets no LD_PRELOAD or $ORIGIN-relative library path.
# ($(CFLAGS): the UBSan build's object needs its runtime, linked in too.)
$(TEST_DIR)/options/options-static: tests/options/options.c $(TEST_HDRS) $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(CFLAGS) -static $< $(LIB_OBJ) -o $@
