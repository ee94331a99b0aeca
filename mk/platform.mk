# SPDX-License-Identifier: MIT
# mk/platform.mk: the other platforms' test runs (included by the root
# Makefile; `make test` runs them). Each cross-builds with make TARGET=... and
# runs the portable part of the suite under an emulator; see docs/testing.md.
#
#   make test-arm64     aarch64-linux-gnu under qemu-aarch64 (tests/platform/arm64.sh)

.PHONY: test-arm64
test: test-arm64
test-arm64:
	@MAKE="$(MAKE)" tests/platform/arm64.sh $(TESTS)
