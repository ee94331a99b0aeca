#!/bin/bash
# (run as the lent machine ran it: phase.sh and this file were one script there)
. "$(dirname "$0")/phase.sh"
A="prev=prev.so"
for n in ff59832 c0f7623 fc64c48 f883696 612d785 e427738 126f83b 85d5415 988d0e7; do A="$A $n=h-$n.so"; done
A="$A cur=cur.so pt0=cur.so,HAKOZUNA_PURGE_THREAD=0 st0=cur.so,HAKOZUNA_STASH=0"
phase bisect.tsv ${B1:-220} "$A" <<C
thread_flood 1000 1000 16 4096 1
C
echo done >> "$OUT/machine.txt"
