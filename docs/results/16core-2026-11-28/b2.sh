#!/bin/bash
# (run as the lent machine ran it: phase.sh and this file were one script there)
. "$(dirname "$0")/phase.sh"
A="prev=prev.so c0f7623=h-c0f7623.so cur=cur.so gap=gap.so big=big.so"
phase b2.tsv ${B1:-95} "$A" <<C
thread_flood 1000 1000 16 4096 1
C
echo done >> "$OUT/machine.txt"
