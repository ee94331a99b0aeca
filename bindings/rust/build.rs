// SPDX-License-Identifier: MIT
//! Compiles hakozuna's C sources into a static library for this crate.
//!
//! Where the sources are: in the repository, ../../src and ../../include
//! (this directory is bindings/rust of it); in the published crate, c/src
//! and c/include inside the crate, which `make crate-sources` copies there
//! before `cargo package` (Cargo.toml's `include` list takes them).
//!
//! Features: without `override`, HZ_NO_OVERRIDE=1 leaves out the
//! malloc/free/operator new overrides: the crate's copy has only the hz_*
//! functions and C code in the process keeps libc's malloc. With it, the
//! library also exports malloc & co., so C code in the same process (libc
//! itself, C libraries) allocates from hakozuna too. `checked` compiles the
//! checked build (HZ_CHECKED=1: canaries, guard pages, encoded free lists).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// One platform layer per build, as the Makefile chooses: the *_windows.c
/// files on Windows in place of os.c and the ELF-only profiler, the others
/// elsewhere.
fn for_this_target(path: &Path, windows: bool) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if windows {
        !matches!(name, "os.c" | "profile.c" | "pprof.c")
    } else {
        !name.ends_with("_windows.c")
    }
}

fn c_sources(dir: &Path) -> Vec<PathBuf> {
    let windows = env::var("CARGO_CFG_TARGET_OS").map_or(false, |os| os == "windows");
    let entries = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("hakozuna: cannot read the C sources in {}: {}", dir.display(), e));
    let mut sources: Vec<PathBuf> = entries
        .map(|entry| entry.expect("hakozuna: reading the source directory").path())
        .filter(|path| path.extension().map_or(false, |ext| ext == "c") && for_this_target(path, windows))
        .collect();
    sources.sort();
    if sources.is_empty() {
        panic!("hakozuna: no C sources in {}", dir.display());
    }
    sources
}

/// The C sources: the repository's when this crate sits in it, else the
/// copy packaged into the crate.
fn c_root(manifest: &Path) -> PathBuf {
    let repo = manifest.join("..").join("..");
    let ours = fs::canonicalize(repo.join("bindings").join("rust").join("build.rs")).ok();
    if ours.is_some() && ours == fs::canonicalize(manifest.join("build.rs")).ok() {
        repo
    } else {
        manifest.join("c")
    }
}

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = c_root(&manifest);
    let src = root.join("src");
    let include = root.join("include");

    // A directory here makes cargo rerun this script when anything in it changes.
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed={}", include.display());
    println!("cargo:rerun-if-changed=csrc");

    let mut build = cc::Build::new();
    if env::var_os("CARGO_FEATURE_OVERRIDE").is_none() {
        build.define("HZ_NO_OVERRIDE", "1");
    }
    if env::var_os("CARGO_FEATURE_CHECKED").is_some() {
        build.define("HZ_CHECKED", "1");
    }
    build
        .files(c_sources(&src))
        .file("csrc/layout.c")
        .include(&include)
        .include(&src)
        // The Makefile's VERSION, which tests/install/version.sh keeps equal to the crate's.
        .define("HZ_LIB_VERSION", format!("\"{}\"", env::var("CARGO_PKG_VERSION").expect("CARGO_PKG_VERSION")).as_str())
        .opt_level(2)
        .flag("-std=gnu11")
        .flag("-fvisibility=hidden")
        .flag("-ftls-model=initial-exec")
        .flag("-Wno-unused-parameter") // as the Makefile builds them
        .compile("hakozuna");
    println!("cargo:rustc-link-lib=pthread");
    // For crates that depend on this one (`links = "hakozuna"`): DEP_HAKOZUNA_INCLUDE.
    println!("cargo:include={}", include.display());
}
