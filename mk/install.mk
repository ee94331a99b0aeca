# SPDX-License-Identifier: MIT
# Install, uninstall, and the tests of the installed copy and the Rust crate.
#
#   make install   [PREFIX=/usr/local] [DESTDIR=/staging] [LIBDIR=...] ...
#   make uninstall (same variables): removes exactly the files install wrote
#   make test-install   install into a temporary prefix, build against it, uninstall
#   make test-rust      cargo test in bindings/rust (SKIP when cargo is missing)
#
# The paths below are where the files live at run time; DESTDIR only
# prefixes where they are written (for packaging), as in the GNU conventions.

PREFIX       ?= /usr/local
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
CMAKEDIR     ?= $(LIBDIR)/cmake/hakozuna
# The single relocatable object for overriding malloc in static programs.
HZ_OBJDIR    ?= $(LIBDIR)/hakozuna
MANDIR       ?= $(PREFIX)/share/man
INSTALL      ?= install

HZ_D := $(DESTDIR)
# Generated (path-substituted) copies of the templates, made per install.
HZ_GEN := $(BUILD)/install
HZ_TEMPLATES := hakozuna.pc hakozunaConfig.cmake hakozunaConfigVersion.cmake hakozunaTargets.cmake
HZ_SUBST = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
               -e 's|@PC_LIBDIR@|$(call hz_pc_path,$(LIBDIR))|g' \
               -e 's|@PC_INCLUDEDIR@|$(call hz_pc_path,$(INCLUDEDIR))|g' \
               -e 's|@PC_OBJDIR@|$(call hz_pc_path,$(HZ_OBJDIR))|g' \
               -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@HZ_OBJDIR@|$(HZ_OBJDIR)|g' \
               -e 's|@VERSION@|$(VERSION)|g' -e 's|@SOVERSION@|$(SOVERSION)|g' \
               -e 's|@POINTER_BYTES@|$(HZ_POINTER_BYTES)|g' \
               -e 's|@CMAKE_TO_PREFIX@|$(HZ_CMAKE_TO_PREFIX)|g' \
               -e 's|@CM_LIBDIR@|$(call hz_cm_path,$(LIBDIR))|g' \
               -e 's|@CM_INCLUDEDIR@|$(call hz_cm_path,$(INCLUDEDIR))|g' \
               -e 's|@CM_OBJDIR@|$(call hz_cm_path,$(HZ_OBJDIR))|g'
# A path under PREFIX as pkg-config writes it: ${prefix}/lib (so that
# pkg-config --define-prefix or --define-variable=prefix=... can move it).
hz_pc_path = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
# The same for the CMake files: ${_hz_prefix}/lib, where _hz_prefix is found
# from the config file's own directory (HZ_CMAKE_TO_PREFIX: ../../.. for
# lib/cmake/hakozuna), which makes the installed package relocatable.
hz_cm_path = $(patsubst $(PREFIX)/%,$${_hz_prefix}/%,$(1))
HZ_CMAKE_TO_PREFIX = $(shell realpath -m --relative-to='$(CMAKEDIR)' '$(PREFIX)')
# sizeof(void *) of the compiler that builds the libraries (for the CMake version check).
HZ_POINTER_BYTES = $(shell echo __SIZEOF_POINTER__ | $(CC) -E -P -x c - | tail -n 1)

# Every path install creates (without DESTDIR); uninstall removes these.
HZ_INSTALLED := \
  $(BINDIR)/hakozuna \
  $(LIBDIR)/libhakozuna.so.$(VERSION) \
  $(LIBDIR)/libhakozuna.so.$(SOVERSION) \
  $(LIBDIR)/libhakozuna.so \
  $(LIBDIR)/libhakozuna.a \
  $(LIBDIR)/libhakozuna-checked.so \
  $(HZ_OBJDIR)/hakozuna.o \
  $(INCLUDEDIR)/hakozuna.h \
  $(PKGCONFIGDIR)/hakozuna.pc \
  $(CMAKEDIR)/hakozunaConfig.cmake \
  $(CMAKEDIR)/hakozunaConfigVersion.cmake \
  $(CMAKEDIR)/hakozunaTargets.cmake \
  $(MANDIR)/man1/hakozuna.1 \
  $(MANDIR)/man3/hakozuna.3
# Directories that belong to hakozuna alone (removed by uninstall when empty).
HZ_OWNED_DIRS := $(HZ_OBJDIR) $(CMAKEDIR)

.PHONY: install uninstall install-generated test-install test-install-run test-rust

install-generated:
	@mkdir -p $(HZ_GEN)
	@for f in $(HZ_TEMPLATES); do \
	    echo "  GEN  $(HZ_GEN)/$$f"; \
	    $(HZ_SUBST) packaging/$$f.in > $(HZ_GEN)/$$f || exit 1; \
	done
	@echo "  GEN  $(HZ_GEN)/hakozuna"
	@sed -e "s|^HZ_LIBDIR=.*|HZ_LIBDIR='$(LIBDIR)'|" \
	    -e "s|^HZ_LIBDIR_REL=.*|HZ_LIBDIR_REL='$$(realpath -m --relative-to='$(BINDIR)' '$(LIBDIR)')'|" -e "s|^HZ_VERSION=.*|HZ_VERSION='$(VERSION)'|" \
	    -e "s|^HZ_SOVERSION=.*|HZ_SOVERSION='$(SOVERSION)'|" \
	    tools/hakozuna > $(HZ_GEN)/hakozuna

install: lib install-generated
	$(INSTALL) -d $(HZ_D)$(BINDIR) $(HZ_D)$(LIBDIR) $(HZ_D)$(INCLUDEDIR) \
	    $(HZ_D)$(PKGCONFIGDIR) $(HZ_D)$(CMAKEDIR) $(HZ_D)$(HZ_OBJDIR) \
	    $(HZ_D)$(MANDIR)/man1 $(HZ_D)$(MANDIR)/man3
	$(INSTALL) -m 755 $(LIB_SO).$(VERSION) $(LIB_CHECKED) $(HZ_D)$(LIBDIR)/
	ln -sf libhakozuna.so.$(VERSION) $(HZ_D)$(LIBDIR)/libhakozuna.so.$(SOVERSION)
	ln -sf libhakozuna.so.$(SOVERSION) $(HZ_D)$(LIBDIR)/libhakozuna.so
	$(INSTALL) -m 644 $(LIB_A) $(HZ_D)$(LIBDIR)/
	$(INSTALL) -m 644 $(LIB_OBJ) $(HZ_D)$(HZ_OBJDIR)/hakozuna.o
	$(INSTALL) -m 644 include/hakozuna.h $(HZ_D)$(INCLUDEDIR)/
	$(INSTALL) -m 644 $(HZ_GEN)/hakozuna.pc $(HZ_D)$(PKGCONFIGDIR)/
	$(INSTALL) -m 644 $(HZ_GEN)/hakozunaConfig.cmake $(HZ_GEN)/hakozunaConfigVersion.cmake \
	    $(HZ_GEN)/hakozunaTargets.cmake $(HZ_D)$(CMAKEDIR)/
	$(INSTALL) -m 755 $(HZ_GEN)/hakozuna $(HZ_D)$(BINDIR)/
	$(INSTALL) -m 644 docs/man/hakozuna.1 $(HZ_D)$(MANDIR)/man1/
	$(INSTALL) -m 644 docs/man/hakozuna.3 $(HZ_D)$(MANDIR)/man3/

uninstall:
	rm -f $(addprefix $(HZ_D),$(HZ_INSTALLED))
	rmdir $(addprefix $(HZ_D),$(HZ_OWNED_DIRS)) 2>/dev/null || true

# `test` has no recipe in the root Makefile; these only add prerequisites.
test: test-install test-rust

test-install: lib
	@$(call hz_if_needed,pkg-config cmake,test-install-run)
test-install-run: lib
	BUILD=$(BUILD) VERSION=$(VERSION) SOVERSION=$(SOVERSION) sh tests/install/run.sh
	@BUILD=$(BUILD) sh tests/install/version.sh && echo "PASS install/version: every version string is $(VERSION)"

# cargo runs without make's jobserver (this recipe does not pass it on).
# test-rust: the crate's tests, then again with the features override and
# checked; test-rust-package: cargo package and cargo publish --dry-run
# (never a real publish); test-rust-msrv: a build with the rust-version the
# crate declares.
HZ_CARGO_TARGET := $(abspath $(BUILD))/cargo
# (both runs in the build's target folder: the second ran in bindings/rust/target,
# outside the build, which make clean leaves)
HZ_CARGO_ENV = env -u MAKEFLAGS -u MFLAGS CARGO_TARGET_DIR=$(HZ_CARGO_TARGET)
HZ_CARGO = cd bindings/rust && $(HZ_CARGO_ENV)
HZ_MSRV = $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' bindings/rust/Cargo.toml)
.PHONY: crate-sources test-rust-package test-rust-msrv
test: test-rust-package test-rust-msrv
test-rust:
	@python3 tests/install/rust_docs.py && echo "PASS rust-docs: the crate's Stats/ClassStats docs say what hakozuna.h says"
	@$(HZ_NEED) cargo; rc=$$?; \
	if [ $$rc = 77 ]; then echo "SKIP test-rust: needs cargo (see the line above)"; exit 0; fi; \
	[ $$rc = 0 ] || exit $$rc; \
	echo "cd bindings/rust && cargo test --locked && cargo test --locked --features 'override checked'"; \
	$(HZ_CARGO) cargo test --locked && $(HZ_CARGO_ENV) cargo test --locked --features 'override checked'

# The published crate carries the C sources it compiles (build.rs reads c/
# when the crate is not inside this repository) and the licence.
crate-sources:
	rm -rf bindings/rust/c
	mkdir -p bindings/rust/c/src bindings/rust/c/include
	cp src/*.c src/*.h bindings/rust/c/src/
	cp include/hakozuna.h bindings/rust/c/include/
	cp LICENSE bindings/rust/LICENSE

test-rust-package: crate-sources
	@if ! command -v cargo >/dev/null 2>&1; then echo "SKIP test-rust-package: cargo is not on PATH"; \
	elif ! (cd bindings/rust && cargo info cc@1.4.0 >/dev/null 2>&1); then \
	    echo "SKIP test-rust-package: crates.io cannot be reached, or this cargo has no cargo info (Rust 1.82+); cargo package resolves the dependencies there"; \
	else \
	    $(HZ_CARGO) cargo package --locked --allow-dirty && \
	    tar -tzf $(HZ_CARGO_TARGET)/package/hakozuna-$(VERSION).crate | grep -q '^hakozuna-$(VERSION)/c/src/alloc.c$$' && \
	    cargo publish --dry-run --locked --allow-dirty && \
	    echo "PASS test-rust-package: cargo package (built from the packaged sources) and cargo publish --dry-run"; \
	fi

# The declared minimum Rust: the toolchain from rustup (installed as root
# when missing, as the other tests install what they need). Cargo of Rust
# 1.63 reads only git registry indexes, so the dependencies locked in
# Cargo.lock are vendored by today's cargo first and built offline.
test-rust-msrv:
	@if ! command -v rustup >/dev/null 2>&1; then echo "SKIP test-rust-msrv: rustup is not on PATH (Rust $(HZ_MSRV) is needed)"; \
	elif ! rustup run $(HZ_MSRV) rustc --version >/dev/null 2>&1 && \
	     ! { [ "$$(id -u)" = 0 ] && rustup toolchain install $(HZ_MSRV) --profile minimal >/dev/null 2>&1; }; then \
	    echo "SKIP test-rust-msrv: Rust $(HZ_MSRV) is not installed (rustup toolchain install $(HZ_MSRV))"; \
	else \
	    echo "cd bindings/rust && cargo vendor && cargo +$(HZ_MSRV) test --locked --offline --features override"; \
	    $(HZ_CARGO) cargo vendor --locked $(HZ_CARGO_TARGET)/vendor >/dev/null && \
	    env -u MAKEFLAGS -u MFLAGS CARGO_TARGET_DIR=$(HZ_CARGO_TARGET)/msrv cargo +$(HZ_MSRV) test --locked --offline \
	        --features override --config 'source.crates-io.replace-with="vendored-sources"' \
	        --config 'source.vendored-sources.directory="$(HZ_CARGO_TARGET)/vendor"' && \
	    echo "PASS test-rust-msrv: the crate builds and passes its tests with Rust $(HZ_MSRV)"; \
	fi

# Debian packages: build/deb/libhakozuna<SOVERSION>_<VERSION>_<arch>.deb and
# libhakozuna-dev_<VERSION>_<arch>.deb (tools/deb.sh says what goes where);
# test-deb installs them with dpkg (as root only), see tests/install/deb.sh.
.PHONY: deb test-deb
deb: lib
	BUILD=$(BUILD) VERSION=$(VERSION) SOVERSION=$(SOVERSION) MAKE=$(MAKE) sh tools/deb.sh
test: test-deb
test-deb: lib
	@BUILD=$(BUILD) VERSION=$(VERSION) SOVERSION=$(SOVERSION) MAKE=$(MAKE) sh tests/install/deb.sh
