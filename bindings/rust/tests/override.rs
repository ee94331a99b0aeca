// SPDX-License-Identifier: MIT
//! The `override` feature: the crate's library exports malloc & co., so C
//! code in the process (here libc's strdup, which calls malloc through the
//! PLT) allocates from hakozuna. Without the feature, the C side keeps
//! libc's malloc. One test in this binary, so that no other thread
//! allocates between the two statistics readings.
#![cfg(feature = "override")]

extern "C" {
    fn strdup(s: *const u8) -> *mut u8;
    fn free(p: *mut u8);
}

#[test]
fn c_code_allocates_from_hakozuna() {
    let before = hakozuna::stats().mallocs();
    let p = unsafe { strdup(b"allocated by libc's strdup\0".as_ptr()) };
    assert!(!p.is_null());
    let after = hakozuna::stats().mallocs();
    assert!(after > before, "strdup's malloc was not hakozuna's ({} -> {} mallocs)", before, after);
    // hz_usable_size aborts on a block that is not hakozuna's.
    assert!(unsafe { hakozuna::usable_size(p) } >= 27);
    unsafe { free(p) };
}
