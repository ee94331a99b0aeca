#!/bin/bash
# (run as the lent machine ran it: phase.sh and this file were one script there)
. "$(dirname "$0")/phase.sh"
R="cur=cur.so prev=prev.so tcmalloc=libtcmalloc_minimal.so.4 rpmalloc=librpmalloc.so mimalloc3=libmimalloc3.so"
phase remote-2048.tsv ${B1:-210} "$R" <<C
mt_remote 4 1000000 400 16 2048 50
mt_remote 8 1000000 400 16 2048 50
mt_remote 16 1000000 400 16 2048 50
mt_remote 4 1000000 400 16 2048 90
mt_remote 8 1000000 400 16 2048 90
mt_remote 16 1000000 400 16 2048 90
C
F="cur=cur.so curthp=cur.so,HAKOZUNA_THP=1 prev=prev.so jemalloc=libjemalloc.so.2 mimalloc3=libmimalloc3.so tcmalloc=libtcmalloc_minimal.so.4 rpmalloc=librpmalloc.so"
phase mixed.tsv ${B2:-160} "$F" <<C
thread_flood 1000 1000 16 4096 1
thread_flood 100 1000 16 4096 1
larson 16 30 20000 1000 8 1024 1
prodcons 8 1000000 16 2048 256 1
mt_remote 16 400000 400 16 131072 50
mt_remote 8 1000000 400 16 32768 50
C
echo done >> "$OUT/machine.txt"
