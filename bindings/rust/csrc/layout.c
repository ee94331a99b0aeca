// SPDX-License-Identifier: MIT
/* The sizes and offsets of the C statistics structs, for the crate's test
 * that its #[repr(C)] mirrors (src/lib.rs) match include/hakozuna.h. The
 * order is the one the test lists them in. */
#include <stddef.h>

#include "hakozuna.h"

#define CLASS(field) offsetof(hz_class_stats_t, field)
#define STATS(field) offsetof(hz_stats_t, field)

const size_t hakozuna_rs_layout[] = {
    HZ_STATS_VERSION,      HZ_STATS_MAX_CLASSES,      sizeof(hz_class_stats_t),
    CLASS(block_size),     CLASS(live),               CLASS(peak),
    CLASS(mallocs),        CLASS(frees),              CLASS(remote_frees),
    CLASS(refills),        sizeof(hz_stats_t),        STATS(version),
    STATS(size),           STATS(class_count),        STATS(thread_count),
    STATS(classes),        STATS(large_allocs),       STATS(large_frees),
    STATS(large_live_bytes), STATS(huge_allocs),      STATS(huge_frees),
    STATS(huge_live_bytes), STATS(segments),          STATS(bytes_reserved),
    STATS(bytes_committed), STATS(bytes_in_use),      STATS(bytes_returned),
    STATS(mmap_calls),     STATS(munmap_calls),       STATS(madvise_calls),
    STATS(peak_rss),       STATS(current_rss),        STATS(bytes_allocated),
    STATS(bytes_committed_peak), STATS(blocks_live),  STATS(unused_in_spans),
    STATS(unused_empty_spans), STATS(unused_span_cache), STATS(unused_huge_cache),
    STATS(unused_purge_backlog), STATS(metadata),     STATS(mprotect_calls),
    STATS(other_os_calls), STATS(unused_stashed),
};
const size_t hakozuna_rs_layout_len = sizeof hakozuna_rs_layout / sizeof hakozuna_rs_layout[0];
