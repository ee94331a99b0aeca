# SPDX-License-Identifier: MIT
# smaps_sum.py FILE: resident KiB per mapping (file name and permissions) of a /proc/PID/smaps dump, and the total. docs/perf.md §82.
import sys,re,collections
cur=None; d=collections.OrderedDict()
for line in open(sys.argv[1]):
    m=re.match(r'^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$',line)
    if m: cur=(m.group(4).split('/')[-1] or '[anon]')+' '+m.group(3); continue
    if line.startswith('Rss:'): d[cur]=d.get(cur,0)+int(line.split()[1])
tot=sum(d.values())
for k,v in d.items():
    if v: print(f"{v:6} {k}")
print(f"{tot:6} total")
