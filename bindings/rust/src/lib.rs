// SPDX-License-Identifier: MIT
//! The hakozuna memory allocator for Rust.
//!
//! The crate compiles hakozuna's C sources into the program (without the
//! malloc/free overrides, so C code in the same process keeps its own
//! malloc) and offers [`Hakozuna`], a [`GlobalAlloc`] to install with
//! `#[global_allocator]`, plus the allocator's statistics and controls.
//!
//! ```
//! use hakozuna::Hakozuna;
//!
//! #[global_allocator]
//! static GLOBAL: Hakozuna = Hakozuna;
//!
//! fn main() {
//!     let v: Vec<u64> = (0..1000).collect();
//!     assert_eq!(v.iter().sum::<u64>(), 499_500);
//!     assert!(hakozuna::stats().mallocs() > 0);
//! }
//! ```
//!
//! Options are read from the environment at the first allocation, as for the
//! C library: `HAKOZUNA_STATS=1 ./program` prints the statistics at exit.
#![no_std]
#![warn(missing_docs)]

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;
use core::mem::{size_of, MaybeUninit};
use core::ptr;

/// `HZ_STATS_VERSION` of include/hakozuna.h: the layout of [`Stats`].
pub const STATS_VERSION: u32 = 1;
/// `HZ_STATS_MAX_CLASSES`: rows in [`Stats::classes`].
pub const STATS_MAX_CLASSES: usize = 96;

/// Alignment that `hz_malloc` gives every block (as glibc's malloc does).
const MIN_ALIGN: usize = 16;

mod ffi {
    use super::Stats;
    use core::ffi::c_void;

    extern "C" {
        pub fn hz_malloc(size: usize) -> *mut c_void;
        pub fn hz_calloc(count: usize, size: usize) -> *mut c_void;
        pub fn hz_realloc(p: *mut c_void, size: usize) -> *mut c_void;
        pub fn hz_free(p: *mut c_void);
        pub fn hz_free_sized(p: *mut c_void, size: usize);
        pub fn hz_aligned_alloc(alignment: usize, size: usize) -> *mut c_void;
        pub fn hz_usable_size(p: *const c_void) -> usize;
        pub fn hz_good_size(size: usize) -> usize;
        pub fn hz_collect(force: i32);
        pub fn hz_thread_done();
        pub fn hz_stats_get(out: *mut Stats) -> i32;
    }
}

/// The hakozuna allocator, for `#[global_allocator]`.
///
/// Blocks aligned to at most 16 bytes come from `hz_malloc` and are freed
/// with `hz_free_sized`, which checks the size Rust gives back against the
/// block; larger alignments use `hz_aligned_alloc` and `hz_free`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hakozuna;

/// Whether `hz_malloc`'s alignment serves this layout (as in std's System).
#[inline]
fn plain(layout: &Layout) -> bool {
    layout.align() <= MIN_ALIGN && layout.align() <= layout.size()
}

unsafe impl GlobalAlloc for Hakozuna {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if plain(&layout) {
            ffi::hz_malloc(layout.size()) as *mut u8
        } else {
            ffi::hz_aligned_alloc(layout.align(), layout.size()) as *mut u8
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if plain(&layout) {
            return ffi::hz_calloc(1, layout.size()) as *mut u8;
        }
        let p = self.alloc(layout);
        if !p.is_null() {
            ptr::write_bytes(p, 0, layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if plain(&layout) {
            ffi::hz_free_sized(p as *mut c_void, layout.size());
        } else {
            ffi::hz_free(p as *mut c_void);
        }
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if plain(&layout) && layout.align() <= new_size {
            return ffi::hz_realloc(p as *mut c_void, new_size) as *mut u8;
        }
        // A block that hz_realloc cannot move keeping its alignment.
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        let q = self.alloc(new_layout);
        if !q.is_null() {
            ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
            self.dealloc(p, layout);
        }
        q
    }
}

/// Bytes usable in the block at `p` (at least the size it was allocated
/// with); 0 for a null pointer.
///
/// # Safety
/// `p` must be null or point to the start of a live block allocated by
/// [`Hakozuna`] (for example a `Box` or `Vec` buffer while
/// `Hakozuna` is the global allocator).
pub unsafe fn usable_size(p: *const u8) -> usize {
    ffi::hz_usable_size(p as *const c_void)
}

/// The usable size that an allocation of `size` bytes would get.
pub fn good_size(size: usize) -> usize {
    unsafe { ffi::hz_good_size(size) }
}

/// Returns cached free memory to the operating system now. `force` also
/// flushes this thread's caches and the memory of threads that have exited.
pub fn collect(force: bool) {
    unsafe { ffi::hz_collect(force as i32) }
}

/// Hands this thread's cache back now, as if the thread had exited (for
/// threads of a pool that go idle); the thread may go on allocating.
pub fn thread_done() {
    unsafe { ffi::hz_thread_done() }
}

/// The allocator's statistics: a `#[repr(C)]` copy of `hz_stats_t`.
pub fn stats() -> Stats {
    // Every field is an integer, so all zeros is a valid value.
    let mut s: Stats = unsafe { MaybeUninit::zeroed().assume_init() };
    s.size = size_of::<Stats>() as u32;
    let rc = unsafe { ffi::hz_stats_get(&mut s) };
    // The C sources compiled into this crate define hz_stats_t; the layout
    // test keeps the two in step, so a refusal is a bug in this crate.
    assert!(rc == 0, "hz_stats_get refused hz_stats_t of {} bytes", s.size);
    s
}

/// Counters of one size class (`hz_class_stats_t`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Block size of the class; 0 for unused rows.
    pub block_size: usize,
    /// Blocks allocated now.
    pub live: u64,
    /// Highest `live` seen at a refill (approximate).
    pub peak: u64,
    /// Blocks allocated.
    pub mallocs: u64,
    /// Blocks freed, locally and remotely.
    pub frees: u64,
    /// Frees by a thread other than the owner.
    pub remote_frees: u64,
    /// Times the thread cache went to the slow path.
    pub refills: u64,
}

/// The allocator's statistics (`hz_stats_t`), from [`stats`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Layout version, [`STATS_VERSION`].
    pub version: u32,
    /// `size_of::<Stats>()`.
    pub size: u32,
    /// Rows of `classes` in use.
    pub class_count: u32,
    /// Live thread caches.
    pub thread_count: u32,
    /// Per size class; the first `class_count` rows are in use.
    pub classes: [ClassStats; STATS_MAX_CLASSES],
    /// Large blocks allocated.
    pub large_allocs: u64,
    /// Large blocks freed.
    pub large_frees: u64,
    /// Bytes in live large blocks.
    pub large_live_bytes: u64,
    /// Huge blocks allocated.
    pub huge_allocs: u64,
    /// Huge blocks freed.
    pub huge_frees: u64,
    /// Bytes in live huge blocks.
    pub huge_live_bytes: u64,
    /// 4 MiB segments mapped now.
    pub segments: u64,
    /// Address space mapped from the OS.
    pub bytes_reserved: u64,
    /// Part of it not returned with madvise.
    pub bytes_committed: u64,
    /// Part of it in spans and blocks in use.
    pub bytes_in_use: u64,
    /// Total bytes given back with madvise or munmap.
    pub bytes_returned: u64,
    /// mmap calls.
    pub mmap_calls: u64,
    /// munmap calls.
    pub munmap_calls: u64,
    /// madvise calls.
    pub madvise_calls: u64,
    /// Peak resident set size in bytes (getrusage).
    pub peak_rss: u64,
    /// Current resident set size in bytes (0 if unavailable).
    pub current_rss: u64,
}

impl Stats {
    /// The size classes in use.
    pub fn classes(&self) -> &[ClassStats] {
        let n = (self.class_count as usize).min(STATS_MAX_CLASSES);
        &self.classes[..n]
    }

    /// Blocks allocated, of every size.
    pub fn mallocs(&self) -> u64 {
        let small: u64 = self.classes().iter().map(|c| c.mallocs).sum();
        small + self.large_allocs + self.huge_allocs
    }

    /// Blocks freed, of every size.
    pub fn frees(&self) -> u64 {
        let small: u64 = self.classes().iter().map(|c| c.frees).sum();
        small + self.large_frees + self.huge_frees
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        static hakozuna_rs_layout: [usize; 32];
        static hakozuna_rs_layout_len: usize;
    }

    /// Offset of a field, as C's offsetof.
    macro_rules! offset_of {
        ($ty:ty, $field:ident) => {{
            let value = MaybeUninit::<$ty>::uninit();
            let base = value.as_ptr();
            unsafe { ptr::addr_of!((*base).$field) as usize - base as usize }
        }};
    }

    #[test]
    fn layout_matches_hakozuna_h() {
        let rust = [
            STATS_VERSION as usize,
            STATS_MAX_CLASSES,
            size_of::<ClassStats>(),
            offset_of!(ClassStats, block_size),
            offset_of!(ClassStats, live),
            offset_of!(ClassStats, peak),
            offset_of!(ClassStats, mallocs),
            offset_of!(ClassStats, frees),
            offset_of!(ClassStats, remote_frees),
            offset_of!(ClassStats, refills),
            size_of::<Stats>(),
            offset_of!(Stats, version),
            offset_of!(Stats, size),
            offset_of!(Stats, class_count),
            offset_of!(Stats, thread_count),
            offset_of!(Stats, classes),
            offset_of!(Stats, large_allocs),
            offset_of!(Stats, large_frees),
            offset_of!(Stats, large_live_bytes),
            offset_of!(Stats, huge_allocs),
            offset_of!(Stats, huge_frees),
            offset_of!(Stats, huge_live_bytes),
            offset_of!(Stats, segments),
            offset_of!(Stats, bytes_reserved),
            offset_of!(Stats, bytes_committed),
            offset_of!(Stats, bytes_in_use),
            offset_of!(Stats, bytes_returned),
            offset_of!(Stats, mmap_calls),
            offset_of!(Stats, munmap_calls),
            offset_of!(Stats, madvise_calls),
            offset_of!(Stats, peak_rss),
            offset_of!(Stats, current_rss),
        ];
        let c = unsafe { &hakozuna_rs_layout };
        assert_eq!(unsafe { hakozuna_rs_layout_len }, rust.len(), "csrc/layout.c lists other fields");
        assert_eq!(&c[..], &rust[..], "hz_stats_t in include/hakozuna.h and Stats differ");
    }

    #[test]
    fn stats_are_filled() {
        let s = stats();
        assert_eq!(s.version, STATS_VERSION);
        assert_eq!(s.size as usize, size_of::<Stats>());
    }

    #[test]
    fn direct_calls() {
        unsafe {
            let layout = Layout::from_size_align(100, 8).unwrap();
            let p = Hakozuna.alloc(layout);
            assert!(!p.is_null());
            assert!(usable_size(p) >= 100);
            Hakozuna.dealloc(p, layout);
            assert_eq!(usable_size(ptr::null()), 0);
        }
        assert!(good_size(100) >= 100);
        collect(false);
        collect(true);
        thread_done();
    }
}
