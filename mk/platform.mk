# SPDX-License-Identifier: MIT
# mk/platform.mk: the other platforms' test runs (included by the root
# Makefile; `make test` runs them). Each cross-builds with make TARGET=... and
# runs the portable part of the suite under an emulator; see docs/testing.md.
#
#   make test-arm64     aarch64-linux-gnu under qemu-aarch64 (tests/platform/arm64.sh)
#   make test-windows   x86_64-w64-mingw32 under wine (tests/platform/windows.sh)
#   make test-musl      x86_64-linux-musl, run natively (tests/platform/musl.sh)

.PHONY: test-arm64 test-windows test-musl win-test-build musl-test-build
test: test-arm64 test-windows test-musl
test-arm64:
	@MAKE="$(MAKE)" tests/platform/arm64.sh $(TESTS)
test-windows:
	@MAKE="$(MAKE)" tests/platform/windows.sh $(TESTS)
test-musl:
	@MAKE="$(MAKE)" tests/platform/musl.sh $(TESTS)

# The musl programs (make TARGET=x86_64-linux-musl musl-test-build): the
# suite's C programs but purge/single, which reads glibc's
# __libc_single_threaded (musl-gcc compiles no C++: no api/cxx). musl-gcc
# searches musl's headers alone; the kernel's that tests/seccomp.h includes
# (linux/, asm/) are the host's, through links of their own.
MUSL_TESTS := $(filter-out $(TEST_DIR)/api/cxx $(TEST_DIR)/purge/single,$(TEST_GENERIC_ALL) $(TEST_LINKED))
MUSL_KERNEL_HEADERS := $(BUILD)/kernel-headers
musl-test-build: $(MUSL_TESTS)
ifneq ($(HZ_MUSL),)
TEST_CFLAGS += -idirafter $(MUSL_KERNEL_HEADERS)
$(MUSL_TESTS): | $(MUSL_KERNEL_HEADERS)
$(MUSL_KERNEL_HEADERS):
	mkdir -p $@
	ln -sfn /usr/include/linux $@/linux
	ln -sfn /usr/include/asm-generic $@/asm-generic
	ln -sfn /usr/include/$(subst musl,gnu,$(TARGET))/asm $@/asm
endif

# The Windows programs (make TARGET=x86_64-w64-mingw32 win-test-build): the
# portable tests and two benchmarks, each linked with the static library
# ahead of the C runtime (so malloc is hakozuna's), fully static (nothing to
# find under wine); api-dll uses the hz_* names through hakozuna.dll.
WIN_TESTS := $(addprefix $(TEST_DIR)/,api/api-hz.exe threads/stress.exe threads/churn.exe misuse/misuse.exe \
               options/options.exe options/stats.exe)
WIN_BENCH := $(addprefix $(TEST_DIR)/bench/,random_mixed.exe mt_remote.exe)
WIN_LINK  := $(LIB_A) -static -lbcrypt
WIN_CFLAGS := -D__USE_MINGW_ANSI_STDIO=1 # printf with %zu
# std::thread needs the posix thread model of Debian's mingw g++.
WIN_CXX   := $(TARGET)-g++-posix
win-test-build: $(TEST_DIR)/api/cxx.exe $(WIN_TESTS) $(WIN_BENCH) $(TEST_DIR)/api/api-dll.exe $(TEST_DIR)/api/hakozuna.dll
$(TEST_DIR)/api/api-hz.exe: tests/api/api.c $(TEST_HDRS) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(WIN_CFLAGS) -DHZ_API $< -o $@ $(WIN_LINK)
$(TEST_DIR)/api/api-dll.exe: tests/api/api.c $(TEST_HDRS) $(LIB_DLL)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(WIN_CFLAGS) -DHZ_API -DHZ_API_ONLY -DCHECK_NO_TARGET $< -o $@ -L$(BUILD) -l:libhakozuna.dll.a -static
$(TEST_DIR)/api/cxx.exe: tests/api/cxx.cc $(TEST_HDRS) $(LIB_A)
	@mkdir -p $(@D)
	$(WIN_CXX) $(TEST_CXXFLAGS) $(WIN_CFLAGS) $< -o $@ $(WIN_LINK)
$(TEST_DIR)/api/hakozuna.dll: $(LIB_DLL) # found next to the program
	@mkdir -p $(@D)
	cp $< $@
$(TEST_DIR)/%.exe: tests/%.c $(TEST_HDRS) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(WIN_CFLAGS) $< -o $@ $(WIN_LINK)
$(TEST_DIR)/bench/%.exe: bench/%.c $(BENCH_COMMON) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Wno-format -pthread $(WIN_CFLAGS) -Ibench -Iinclude $< bench/bench.c -o $@ $(WIN_LINK)
