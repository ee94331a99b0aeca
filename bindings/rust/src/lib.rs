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
pub const STATS_VERSION: u32 = 2;
/// `HZ_STATS_MAX_CLASSES`: rows in [`Stats::classes`].
pub const STATS_MAX_CLASSES: usize = 96;

/// Alignment that `hz_malloc` gives every block (as glibc's malloc does).
const MIN_ALIGN: usize = 16;

/// The C API of include/hakozuna.h, function for function (the safe
/// wrappers below cover what Rust programs usually need). Each function is
/// documented in the header under the same name.
#[allow(missing_docs)]
pub mod sys {
    use super::Stats;
    use core::ffi::c_void;

    /// `hz_output_fn`: gets one NUL-terminated piece of text and the `arg`
    /// given to [`hz_set_output`] or [`hz_set_error`].
    pub type OutputFn = unsafe extern "C" fn(msg: *const u8, arg: *mut c_void);

    extern "C" {
        pub fn hz_version() -> i32;
        pub fn hz_version_string() -> *const u8;
        pub fn hz_malloc(size: usize) -> *mut c_void;
        pub fn hz_calloc(count: usize, size: usize) -> *mut c_void;
        pub fn hz_realloc(p: *mut c_void, size: usize) -> *mut c_void;
        pub fn hz_reallocarray(p: *mut c_void, count: usize, size: usize) -> *mut c_void;
        pub fn hz_free(p: *mut c_void);
        pub fn hz_free_sized(p: *mut c_void, size: usize);
        pub fn hz_free_aligned_sized(p: *mut c_void, alignment: usize, size: usize);
        pub fn hz_aligned_alloc(alignment: usize, size: usize) -> *mut c_void;
        pub fn hz_posix_memalign(out: *mut *mut c_void, alignment: usize, size: usize) -> i32;
        pub fn hz_memalign(alignment: usize, size: usize) -> *mut c_void;
        pub fn hz_valloc(size: usize) -> *mut c_void;
        pub fn hz_pvalloc(size: usize) -> *mut c_void;
        pub fn hz_usable_size(p: *const c_void) -> usize;
        pub fn hz_good_size(size: usize) -> usize;
        pub fn hz_collect(force: i32);
        pub fn hz_thread_done();
        // C's long: the pointer's size on every Linux target.
        pub fn hz_option_get(option: u32) -> isize;
        pub fn hz_option_set(option: u32, value: isize) -> i32;
        pub fn hz_option_get_string(option: u32) -> *const u8;
        pub fn hz_option_set_string(option: u32, value: *const u8) -> i32;
        pub fn hz_option_name(option: u32) -> *const u8;
        pub fn hz_option_description(option: u32) -> *const u8;
        /// `out` is a C `FILE *`.
        pub fn hz_options_markdown(out: *mut c_void);
        pub fn hz_stats_get(out: *mut Stats) -> i32;
        /// With a null `out`: to the output hook, or stderr.
        pub fn hz_stats_print(out: *mut c_void);
        pub fn hz_stats_json(buf: *mut u8, len: usize) -> usize;
        /// Writes the heap profile (pprof) to `path`, a NUL-terminated path
        /// (NULL: `HAKOZUNA_PROFILE_FILE`); 0 on success (docs/profiling.md).
        pub fn hz_profile_dump(path: *const u8) -> i32;
        pub fn hz_set_output(f: Option<OutputFn>, arg: *mut c_void);
        pub fn hz_set_error(f: Option<OutputFn>, arg: *mut c_void);
    }
}
use sys as ffi;

/// The hakozuna allocator, for `#[global_allocator]`.
///
/// Blocks aligned to at most 16 bytes come from `hz_malloc` and are freed
/// with `hz_free_sized`, which checks the size Rust gives back against the
/// block; larger alignments use `hz_aligned_alloc` and
/// `hz_free_aligned_sized`, which checks the alignment and size too.
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
            ffi::hz_free_aligned_sized(p as *mut c_void, layout.align(), layout.size());
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

/// The version of the C library compiled into this crate, as
/// `major * 10000 + minor * 100 + patch` (`hz_version`).
pub fn version() -> u32 {
    unsafe { ffi::hz_version() as u32 }
}

/// The same as text, e.g. `"0.2.0"` (`hz_version_string`).
pub fn version_string() -> &'static str {
    let bytes = unsafe { c_bytes(ffi::hz_version_string()) };
    core::str::from_utf8(bytes).unwrap_or("")
}

/// The bytes of a NUL-terminated C string that lives as long as the program.
unsafe fn c_bytes(p: *const u8) -> &'static [u8] {
    if p.is_null() {
        return &[];
    }
    let mut n = 0;
    while *p.add(n) != 0 {
        n += 1;
    }
    core::slice::from_raw_parts(p, n)
}

/// The allocator's options (`hz_option_t`); each is also the environment
/// variable `HAKOZUNA_<NAME>`, read at the first allocation.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    /// print diagnostics to stderr
    Verbose = 0,
    /// print the statistics report at exit
    Stats,
    /// ms before free memory goes back to the OS; -1 never
    PurgeDelay,
    /// purge in a background thread while the program idles
    PurgeThread,
    /// transparent huge pages: 1 asks the kernel for them, 0 for none in segments and blocks under 16 MiB (also under its "always" policy)
    Thp,
    /// MiB of address space reserved per OS request for segments
    ArenaReserve,
    /// KiB of empty spans a thread keeps cached
    ThreadCache,
    /// MiB of freed huge blocks kept for reuse
    HugeCache,
    /// on misuse: 1 report and abort (default), 0 report and go on
    Check,
    /// string: the exit report goes to this file (%p: pid)
    StatsFile,
    /// bytes: larger requests are mapped directly (mallopt M_MMAP_THRESHOLD)
    MmapThreshold,
    /// assume pages this large (a power of two); 0: the OS's
    PageSize,
    /// sample allocations; write a heap profile at exit
    Profile,
    /// mean bytes allocated between two samples
    ProfileRate,
    /// string: where the exit profile goes (%p: pid)
    ProfileFile,
    /// 0: random sampling; else a fixed seed (reproducible runs)
    ProfileSeed,
    /// sample allocations; report those still live at exit
    Leaks,
    /// KiB of freed blocks of 4 KiB and more a thread keeps per size class
    Stash,
}

/// All options, in the order of `hz_option_t`.
pub const OPTIONS: [Opt; 18] = [
    Opt::Verbose,
    Opt::Stats,
    Opt::PurgeDelay,
    Opt::PurgeThread,
    Opt::Thp,
    Opt::ArenaReserve,
    Opt::ThreadCache,
    Opt::HugeCache,
    Opt::Check,
    Opt::StatsFile,
    Opt::MmapThreshold,
    Opt::PageSize,
    Opt::Profile,
    Opt::ProfileRate,
    Opt::ProfileFile,
    Opt::ProfileSeed,
    Opt::Leaks,
    Opt::Stash,
];

/// An option value the allocator refused (out of range, a string for a
/// numeric option or the other way round, a path too long or without its
/// terminating NUL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidOption;

impl Opt {
    /// The option's name, e.g. `"purge_delay"` (`hz_option_name`).
    pub fn name(self) -> &'static str {
        core::str::from_utf8(unsafe { c_bytes(ffi::hz_option_name(self as u32)) }).unwrap_or("")
    }

    /// One line saying what it does (`hz_option_description`).
    pub fn description(self) -> &'static str {
        core::str::from_utf8(unsafe { c_bytes(ffi::hz_option_description(self as u32)) }).unwrap_or("")
    }

    /// The value now (`hz_option_get`); for a path option, 1 while one is set.
    pub fn get(self) -> isize {
        unsafe { ffi::hz_option_get(self as u32) }
    }

    /// Sets a numeric option (`hz_option_set`).
    pub fn set(self, value: isize) -> Result<(), InvalidOption> {
        match unsafe { ffi::hz_option_set(self as u32, value) } {
            0 => Ok(()),
            _ => Err(InvalidOption),
        }
    }

    /// The text of a path option (`hz_option_get_string`, empty when unset);
    /// `None` for a numeric option. The bytes stay valid until the option is
    /// set again.
    pub fn get_string(self) -> Option<&'static [u8]> {
        let p = unsafe { ffi::hz_option_get_string(self as u32) };
        if p.is_null() {
            None
        } else {
            Some(unsafe { c_bytes(p) })
        }
    }

    /// Sets a path option (`hz_option_set_string`); `value` must end with
    /// its NUL, e.g. `b"/tmp/hz-%p.txt\0"` (`%p` stands for the process id).
    pub fn set_string(self, value: &[u8]) -> Result<(), InvalidOption> {
        if value.last() != Some(&0) || value[..value.len() - 1].contains(&0) {
            return Err(InvalidOption);
        }
        match unsafe { ffi::hz_option_set_string(self as u32, value.as_ptr()) } {
            0 => Ok(()),
            _ => Err(InvalidOption),
        }
    }
}

/// Prints the statistics report (the one `HAKOZUNA_STATS=1` prints at exit)
/// to the output hook ([`set_output`]), or stderr without one
/// (`hz_stats_print(NULL)`).
pub fn stats_print() {
    unsafe { ffi::hz_stats_print(ptr::null_mut()) }
}

/// Writes the statistics as JSON into `buf` (NUL-terminated, truncated to
/// fit) and returns the length the whole text needs, as `hz_stats_json`:
/// when it is `buf.len()` or more, call again with a larger buffer.
pub fn stats_json(buf: &mut [u8]) -> usize {
    unsafe { ffi::hz_stats_json(buf.as_mut_ptr(), buf.len()) }
}

/// Routes the output (the statistics report and `HAKOZUNA_VERBOSE`
/// diagnostics) to `f` instead of stderr; `None` gives stderr back
/// (`hz_set_output`). `f` gets one NUL-terminated piece of text per call,
/// usually a line, and `arg`.
///
/// # Safety
/// `f` must be safe to call with any message from any thread for as long as
/// it is set, and must not call the statistics functions.
pub unsafe fn set_output(f: Option<sys::OutputFn>, arg: *mut c_void) {
    ffi::hz_set_output(f, arg)
}

/// Routes warnings and misuse reports to `f` instead of stderr
/// (`hz_set_error`); a misuse report is followed by `abort()` unless
/// `HAKOZUNA_CHECK=0`.
///
/// # Safety
/// As [`set_output`]; moreover `f` must not allocate: it may be called with
/// the allocator's locks held (a failing munmap, a misuse report).
pub unsafe fn set_error(f: Option<sys::OutputFn>, arg: *mut c_void) {
    ffi::hz_set_error(f, arg)
}

/// Counters of one size class (`hz_class_stats_t`). Bytes of a class are
/// blocks times `block_size`: allocated = `mallocs * block_size` (bytes
/// handed out since the start), live = `live * block_size`, peak live =
/// `peak * block_size`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Block size of the class; 0 for unused rows.
    pub block_size: usize,
    /// Blocks allocated now.
    pub live: u64,
    /// Most blocks of the class in spans at once (per thread, summed): at
    /// least the most blocks ever live at once, which is not tracked.
    pub peak: u64,
    /// Blocks allocated.
    pub mallocs: u64,
    /// All frees, local and remote.
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
    /// Layout version: HZ_STATS_VERSION ([`STATS_VERSION`]).
    pub version: u32,
    /// sizeof(hz_stats_t) of the caller; set it before calling ([`stats`] does).
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
    /// Part of it in spans/blocks in use.
    pub bytes_in_use: u64,
    /// Total bytes given back with madvise/munmap.
    pub bytes_returned: u64,
    /// mmap calls.
    pub mmap_calls: u64,
    /// munmap calls.
    pub munmap_calls: u64,
    /// madvise calls.
    pub madvise_calls: u64,
    /// Peak resident set size in bytes, from getrusage.
    pub peak_rss: u64,
    /// Current resident set size in bytes, from /proc/self/statm (0 if unavailable).
    pub current_rss: u64,
    // Since version 2. Bytes of blocks count whole blocks (small: the class
    // size; large and huge: as mapped), as bytes_in_use does.
    /// Bytes handed out since the start (small, large and huge).
    pub bytes_allocated: u64,
    /// The most bytes committed at once, exactly (sampled at each change).
    pub bytes_committed_peak: u64,
    /// Blocks allocated now (small, large and huge).
    pub blocks_live: u64,
    /// Committed, not in use: free room in spans that hold live blocks.
    pub unused_in_spans: u64,
    /// Committed, not in use: empty small spans threads keep (current and spare).
    pub unused_empty_spans: u64,
    /// Committed, not in use: empty spans in thread span caches (HAKOZUNA_THREAD_CACHE).
    pub unused_span_cache: u64,
    /// Committed, not in use: freed huge blocks kept mapped (HAKOZUNA_HUGE_CACHE).
    pub unused_huge_cache: u64,
    /// Committed, not in use: free memory waiting out HAKOZUNA_PURGE_DELAY.
    pub unused_purge_backlog: u64,
    /// Segment headers (span descriptors).
    pub metadata: u64,
    /// mprotect calls (guard pages of the checked build).
    pub mprotect_calls: u64,
    /// Other system calls and libc system wrappers (threads, sleeps, rusage, ...).
    pub other_os_calls: u64,
    /// Committed, not in use: freed blocks in threads' stashes (HAKOZUNA_STASH).
    pub unused_stashed: u64,
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
        static hakozuna_rs_layout: [usize; 44];
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
            offset_of!(Stats, bytes_allocated),
            offset_of!(Stats, bytes_committed_peak),
            offset_of!(Stats, blocks_live),
            offset_of!(Stats, unused_in_spans),
            offset_of!(Stats, unused_empty_spans),
            offset_of!(Stats, unused_span_cache),
            offset_of!(Stats, unused_huge_cache),
            offset_of!(Stats, unused_purge_backlog),
            offset_of!(Stats, metadata),
            offset_of!(Stats, mprotect_calls),
            offset_of!(Stats, other_os_calls),
            offset_of!(Stats, unused_stashed),
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

    #[test]
    fn options_match_the_c_table() {
        for (i, opt) in OPTIONS.iter().enumerate() {
            assert_eq!(*opt as usize, i);
            assert!(!opt.name().is_empty() && !opt.description().is_empty());
        }
        assert_eq!(Opt::PurgeDelay.name(), "purge_delay");
        assert_eq!(Opt::StatsFile.name(), "stats_file");
        assert_eq!(Opt::MmapThreshold.name(), "mmap_threshold");
        // One past the table is refused: OPTIONS is the whole table.
        assert!(unsafe { sys::hz_option_name(OPTIONS.len() as u32) }.is_null());
        let old = Opt::ThreadCache.get();
        Opt::ThreadCache.set(1024).unwrap();
        assert_eq!(Opt::ThreadCache.get(), 1024);
        assert_eq!(Opt::ThreadCache.set(-5), Err(InvalidOption));
        Opt::ThreadCache.set(old).unwrap();
        assert_eq!(Opt::ThreadCache.get_string(), None);
        assert_eq!(Opt::StatsFile.set_string(b"no terminator"), Err(InvalidOption));
        Opt::StatsFile.set_string(b"/nonexistent/hz-%p.txt\0").unwrap();
        assert_eq!(Opt::StatsFile.get_string(), Some(&b"/nonexistent/hz-%p.txt"[..]));
        assert_eq!(Opt::StatsFile.get(), 1);
        Opt::StatsFile.set_string(b"\0").unwrap();
        assert_eq!(Opt::StatsFile.get(), 0);
    }

    #[test]
    fn version_and_json() {
        let v = version_string();
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap());
        let (major, minor, patch) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
        assert_eq!(version(), major * 10000 + minor * 100 + patch);
        assert_eq!(v, env!("CARGO_PKG_VERSION"));
        let mut small = [0u8; 8];
        let need = stats_json(&mut small);
        assert!(need > small.len());
        let mut buf = [0u8; 65536];
        let n = stats_json(&mut buf);
        assert!(n < buf.len());
        let text = core::str::from_utf8(&buf[..n]).unwrap();
        assert!(text.starts_with("{\"version\":2,"), "{}", text);
        assert!(text.contains("\"unused_purge_backlog\":"));
    }
}
