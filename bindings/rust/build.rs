// SPDX-License-Identifier: MIT
//! Compiles hakozuna's C sources (../../src/*.c) into a static library for
//! this crate. HZ_NO_OVERRIDE=1 leaves out the malloc/free/operator new
//! overrides: the crate's copy has only the hz_* functions, so it does not
//! replace the process's malloc; Rust code reaches it through `Hakozuna`.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn c_sources(dir: &Path) -> Vec<PathBuf> {
    let entries = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("hakozuna: cannot read the C sources in {}: {}", dir.display(), e));
    let mut sources: Vec<PathBuf> = entries
        .map(|entry| entry.expect("hakozuna: reading the source directory").path())
        .filter(|path| path.extension().map_or(false, |ext| ext == "c"))
        .collect();
    sources.sort();
    if sources.is_empty() {
        panic!("hakozuna: no C sources in {}", dir.display());
    }
    sources
}

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.join("..").join("..");
    let src = root.join("src");
    let include = root.join("include");

    // A directory here makes cargo rerun this script when anything in it changes.
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed={}", include.display());
    println!("cargo:rerun-if-changed=csrc");

    cc::Build::new()
        .files(c_sources(&src))
        .file("csrc/layout.c")
        .include(&include)
        .include(&src)
        .define("HZ_NO_OVERRIDE", "1")
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
