// SPDX-License-Identifier: MIT
//! Hakozuna as the global allocator of this test binary: everything the
//! tests and the test harness allocate goes through it.

use std::alloc::{alloc, alloc_zeroed, dealloc, realloc, Layout};
use std::collections::HashMap;
use std::sync::mpsc;
use std::thread;

use hakozuna::Hakozuna;

#[global_allocator]
static GLOBAL: Hakozuna = Hakozuna;

const THREADS: u64 = 4;

#[test]
fn collections_across_threads() {
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            thread::spawn(move || {
                let mut map: HashMap<String, Vec<u64>> = HashMap::new();
                for i in 0..20_000u64 {
                    let key = format!("thread{}-key{}", t, i);
                    let value: Vec<u64> = (0..(i % 17)).map(|j| i * j + t).collect();
                    map.insert(key, value);
                }
                // Shrink half of it again, reallocating strings and vectors.
                for i in (0..20_000u64).step_by(2) {
                    let removed = map.remove(&format!("thread{}-key{}", t, i)).unwrap();
                    assert_eq!(removed.len() as u64, i % 17);
                }
                let mut text = String::new();
                for i in 0..10_000u64 {
                    text.push_str(&i.to_string());
                }
                let total: u64 = map.values().flatten().sum();
                (map.len(), total, text.len())
            })
        })
        .collect();
    for (t, handle) in handles.into_iter().enumerate() {
        let t = t as u64;
        let (len, total, text_len) = handle.join().unwrap();
        let expected: u64 = (1..20_000u64)
            .step_by(2)
            .map(|i| (0..(i % 17)).map(|j| i * j + t).sum::<u64>())
            .sum();
        assert_eq!(len, 10_000);
        assert_eq!(total, expected);
        assert_eq!(text_len, 38_890);
    }
}

#[test]
fn blocks_freed_by_other_threads() {
    // Producers allocate, consumers on other threads check and drop.
    let (to_consumers, from_producers) = mpsc::channel::<(u64, Vec<u8>, String, Box<[u64; 32]>)>();
    let producers: Vec<_> = (0..THREADS)
        .map(|t| {
            let tx = to_consumers.clone();
            thread::spawn(move || {
                for i in 0..5_000u64 {
                    let n = (i * 37 % 3000) as usize + 1;
                    let bytes = vec![(i % 251) as u8; n];
                    let text = format!("{}:{}", t, i);
                    tx.send((i, bytes, text, Box::new([i; 32]))).unwrap();
                }
            })
        })
        .collect();
    drop(to_consumers);
    let consumer = thread::spawn(move || {
        let mut count = 0u64;
        for (i, bytes, text, boxed) in from_producers {
            assert_eq!(bytes.len(), (i * 37 % 3000) as usize + 1);
            assert!(bytes.iter().all(|&b| b == (i % 251) as u8));
            assert!(text.ends_with(&format!(":{}", i)));
            assert!(boxed.iter().all(|&x| x == i));
            count += 1;
        }
        count
    });
    for p in producers {
        p.join().unwrap();
    }
    assert_eq!(consumer.join().unwrap(), THREADS * 5_000);
    hakozuna::collect(true);
}

#[test]
fn stats_count_this_programs_mallocs() {
    let before = hakozuna::stats();
    assert_eq!(before.version, hakozuna::STATS_VERSION);
    let boxes: Vec<Box<u64>> = (0..10_000).map(Box::new).collect();
    let after = hakozuna::stats();
    assert!(
        after.mallocs() >= before.mallocs() + 10_000,
        "mallocs went from {} to {}",
        before.mallocs(),
        after.mallocs()
    );
    assert!(after.classes().iter().any(|c| c.block_size >= 8 && c.mallocs > 0));
    assert!(after.bytes_in_use > 0);
    assert_eq!(boxes.iter().map(|b| **b).sum::<u64>(), 49_995_000);
}

#[test]
fn usable_size_of_a_box() {
    let b = Box::new([7u8; 100]);
    let usable = unsafe { hakozuna::usable_size(b.as_ptr()) };
    assert!(usable >= 100, "usable size {}", usable);
}

#[test]
fn layouts_alignments_and_realloc() {
    let sizes = [1usize, 7, 8, 15, 16, 24, 48, 100, 1000, 4096, 5000, 70_000, 1 << 20, 5 << 20];
    for &align in &[1usize, 2, 4, 8, 16, 32, 64, 128, 4096, 1 << 16] {
        for &size in &sizes {
            let layout = Layout::from_size_align(size, align).unwrap();
            unsafe {
                let p = alloc(layout);
                assert!(!p.is_null(), "alloc {:?}", layout);
                assert_eq!(p as usize % align, 0, "alloc {:?} gave {:p}", layout, p);
                for i in 0..size {
                    *p.add(i) = (i % 253) as u8;
                }
                let grown = size * 3 + 5;
                let q = realloc(p, layout, grown);
                assert!(!q.is_null());
                assert_eq!(q as usize % align, 0, "realloc {:?} to {} gave {:p}", layout, grown, q);
                for i in 0..size {
                    assert_eq!(*q.add(i), (i % 253) as u8);
                }
                let shrunk = (size / 2).max(1);
                let r = realloc(q, Layout::from_size_align(grown, align).unwrap(), shrunk);
                assert!(!r.is_null());
                assert_eq!(r as usize % align, 0);
                for i in 0..shrunk {
                    assert_eq!(*r.add(i), (i % 253) as u8);
                }
                dealloc(r, Layout::from_size_align(shrunk, align).unwrap());

                let z = alloc_zeroed(layout);
                assert!(!z.is_null());
                assert_eq!(z as usize % align, 0);
                assert!((0..size).all(|i| *z.add(i) == 0), "alloc_zeroed {:?}", layout);
                dealloc(z, layout);
            }
        }
    }
}

#[test]
fn thread_done_then_go_on() {
    thread::spawn(|| {
        let v: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        hakozuna::thread_done();
        let w: Vec<String> = v.iter().map(|s| s.repeat(2)).collect();
        assert_eq!(w[999], "999999");
    })
    .join()
    .unwrap();
}
