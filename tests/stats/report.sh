#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/stats/report.sh: the statistics report, its hooks and malloc_info.
# Runs tests/stats/report.c's modes; checks the exit report's lines (the
# options in effect, bytes per class, where unused memory sits, "N blocks
# still live at exit") through the output hook and through
# HAKOZUNA_STATS_FILE, and parses malloc_info's output as XML in glibc's
# layout with python3. Needs TEST_BIN (run.sh).
. "$(dirname "$0")/../lib.sh"
prog=$TEST_BIN/stats/report
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$prog" usage || fail "report usage"
"$prog" counts || fail "report counts"
LD_PRELOAD="$TEST_BIN/../libhakozuna-checked.so" "$prog" counts || fail "report counts (checked build)"
HAKOZUNA_CHECK=0 "$prog" hooks 2>"$tmp/err" || fail "report hooks"
[ -s "$tmp/err" ] && fail "hooks set, yet stderr got: $(head -c 300 "$tmp/err")"

# The exit report through the output hook: nothing on stderr.
HAKOZUNA_STATS=1 HAKOZUNA_PURGE_DELAY=250 "$prog" exit >"$tmp/out" 2>"$tmp/err" || fail "report exit"
[ -s "$tmp/err" ] && fail "exit report with an output hook: stderr got: $(head -c 300 "$tmp/err")"
grep -q '^HOOK:options: .* purge_delay=250 ' "$tmp/out" || fail "no options line: $(head -c 400 "$tmp/out")"
grep -q '^HOOK: *block .* allocB .* liveB .* peak\*B' "$tmp/out" || fail "no byte columns: $(head -c 400 "$tmp/out")"
grep -q '^HOOK:  \* peak: ' "$tmp/out" || fail "the peak is not explained"
grep -q '^HOOK:committed, not in use: .* span caches, .* huge cache, .* purge backlog' "$tmp/out" ||
  fail "no line saying where unused memory is"
grep -Eq '^HOOK:[0-9]+ blocks \(.*\) still live at exit' "$tmp/out" || fail "no 'still live at exit' line"
live=$(sed -n 's/^HOOK:\([0-9]*\) blocks .* still live at exit$/\1/p' "$tmp/out")
[ "${live:-0}" = 3 ] || fail "$live blocks still live at exit, the program left 3 (the hook's stdout buffer comes after)"

# With a stats file the report goes there, hook or not.
HAKOZUNA_STATS_FILE="$tmp/st.%p" "$prog" exit >"$tmp/out" 2>"$tmp/err" || fail "report exit (file)"
grep -q 'still live at exit' "$tmp"/st.* || fail "HAKOZUNA_STATS_FILE: no exit report in the file"
grep -q '^HOOK:' "$tmp/out" && fail "HAKOZUNA_STATS_FILE set, yet the report went to the hook"
grep -q '^3 blocks (.*) still live at exit' "$tmp"/st.* ||
  fail "the program left 3 blocks: $(grep 'still live' "$tmp"/st.*)"
rm -f "$tmp"/st.*
# The report's own memory (its snapshot, its stream) is not the program's:
# a program that allocated nothing had 2 blocks (6.0K) live at exit.
for out in file stderr; do
  if [ $out = file ]; then HAKOZUNA_STATS_FILE="$tmp/none" "$prog" none || fail "report none"
  else HAKOZUNA_STATS=1 "$prog" none 2>"$tmp/none" || fail "report none"; fi
  grep -q '^0 blocks (0) still live at exit' "$tmp/none" ||
    fail "nothing allocated, yet ($out): $(grep 'still live' "$tmp/none")"
done

# malloc_info: glibc's XML layout, numbers that add up.
"$prog" info >"$tmp/info.xml" || fail "report info"
python3 - "$tmp/info.xml" <<'PY' || fail "malloc_info is not glibc-shaped XML: $(head -c 600 "$tmp/info.xml")"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "malloc" and root.get("version") == "1", root.attrib
heaps = root.findall("heap")
assert len(heaps) == 1 and heaps[0].get("nr") == "0"
sizes = heaps[0].find("sizes").findall("size")
assert sizes, "no <size> rows"
for s in sizes:
    lo, hi, total, count = (int(s.get(k)) for k in ("from", "to", "total", "count"))
    assert lo <= hi and total == count * hi, s.attrib
# The 200-byte class (208-byte blocks) has at least the 500 freed blocks free.
assert any(int(s.get("from")) <= 200 <= int(s.get("to")) and int(s.get("count")) >= 500 for s in sizes), \
    [s.attrib for s in sizes]
for node in (heaps[0], root):
    types = {(t.tag, t.get("type")) for t in node if t.tag in ("total", "system", "aspace")}
    for want in (("total", "fast"), ("total", "rest"), ("system", "current"), ("system", "max"),
                 ("aspace", "total"), ("aspace", "mprotect")):
        assert want in types, (node.tag, want)
mmap = [t for t in root.findall("total") if t.get("type") == "mmap"]
assert len(mmap) == 1 and int(mmap[0].get("count")) >= 1 and int(mmap[0].get("size")) >= 32 << 20, mmap[0].attrib
cur = {s.get("type"): int(s.get("size")) for s in root.findall("system")}
assert cur["max"] >= cur["current"] >= 32 << 20, cur
PY
finish
