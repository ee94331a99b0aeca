# SPDX-License-Identifier: MIT
"""tests/fuzz/make_seeds.py DIR: write the hand-made seed inputs of
fuzz_ops (see the format in fuzz_ops.c) into DIR. The committed corpus in
tests/fuzz/corpus is these plus what `make fuzz-merge` kept from fuzzing."""
import os
import sys

MALLOC, CALLOC, REALLOC, ALIGNED, POSIX, MEMALIGN, FREE, CHECK, GIVE, REALLOCARRAY, FREE_SIZED, OTHER = \
    0, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 15
TINY, SMALL, MEDIUM, BIG = 0x05, 0x45, 0x85, 0xC5  # a bytes: the four size ranges


def op(what, slot, a, b, d=0, thread=0):
    return bytes([what | thread << 4, slot, a, b, d])


def seeds():
    for a in (TINY, SMALL, MEDIUM, BIG):
        for what in (MALLOC, CALLOC, ALIGNED, POSIX, MEMALIGN):
            body = b"".join(op(what, s, a, 17 * s, s) for s in range(8))
            body += b"".join(op(CHECK, s, 0, 0) for s in range(8))
            body += b"".join(op(REALLOC, s, a ^ 0x40, 3 * s) for s in range(8))
            body += b"".join(op(FREE, s, 0, 0) for s in range(0, 8, 2))
            yield "st-%02x-%d" % (a, what), b"\x00" + body
    # realloc chains across every border, reallocarray, free_sized, valloc
    body = b"".join(op(REALLOC, 1, a, b) for a in (TINY, SMALL, MEDIUM, BIG, MEDIUM, SMALL, TINY) for b in (1, 200))
    body += op(REALLOCARRAY, 1, MEDIUM, 9, 3) + op(FREE_SIZED, 1, 0, 0)
    body += op(OTHER, 2, SMALL, 5, 10) + op(OTHER, 3, SMALL, 5, 11) + op(OTHER, 4, 0, 0, 1)
    yield "realloc-chain", b"\x00" + body
    # errors: invalid alignments, impossible sizes, calloc overflow
    body = op(ALIGNED, 0, SMALL, 1, 240) + op(POSIX, 1, SMALL, 1, 241) + op(POSIX, 2, TINY, 8, 2)
    body += op(MALLOC, 3, 255, 255) + op(CALLOC, 4, TINY, 8, 255) + op(MALLOC, 5, TINY, 9)
    body += op(REALLOC, 5, 255, 255) + op(REALLOCARRAY, 5, TINY, 9, 255) + op(CHECK, 5, 0, 0)
    yield "errors", b"\x00" + body
    # threads handing blocks over through the exchange
    for mode in (1, 3, 5):
        nthreads = 2 + (mode >> 1) % 3
        body = b""
        for r in range(6):
            for t in range(nthreads):
                a = (TINY, SMALL, MEDIUM, BIG)[(r + t) % 4]
                body += op(MALLOC, r, a, 31 * r + t, thread=t) + op(GIVE, r, 0, 0, r % 16, thread=t)
        for t in range(nthreads):
            body += b"".join(op(GIVE, s, 0, 0, s, thread=t) + op(FREE, s, 0, 0, thread=t) for s in range(6))
        yield "mt-%d" % nthreads, bytes([mode]) + body


out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, data in seeds():
    with open(os.path.join(out, "seed-" + name), "wb") as f:
        f.write(data)
