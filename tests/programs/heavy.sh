#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/programs/heavy.sh [--lib LIB] [NAME...]: real programs under load
# with hakozuna preloaded, their results checked. NAME (default: all):
#
#   python     CPython's own regression tests (a subset, -j2, PYTHONMALLOC=malloc
#              so that every object goes through malloc)
#   redis      redis-server under redis-benchmark (SET/GET/LPUSH/LPOP, pipelined,
#              small and large values), then keys with known values written
#              and read back, DBSIZE checked, clean SHUTDOWN
#   memcached  memcached under tests/programs/mc_load.py (4 connections,
#              set/get/multi-get/delete/incr of values up to 400 KB, verified)
#   git        a generated history (branches, merges, renames) built, packed
#              with repack -adf, fsck'ed, cloned and logged; every output and
#              object id must equal the run without the preload
#   gcc        a generated 22-file project built with make -j2 and one large
#              file at -O2; objects and binary byte-identical to the build
#              without the preload, and the program prints what it must
#   sqlite     120,000 rows, indexes, updates, deletes, big sorts, VACUUM,
#              integrity_check; results equal to the run without the preload
#
# Prints one PASS/FAIL line per program and exits 1 if any failed. Servers
# run on random free loopback ports in a temporary directory and are killed
# on exit. Missing programs are installed with apt-get by tests/need.sh when
# root; a program that cannot be had here is skipped (SKIP line naming the package).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lib=$root/build/libhakozuna.so
if [ "${1:-}" = --lib ]; then
  lib=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
  shift 2
fi
[ -e "$lib" ] || { echo "heavy.sh: $lib does not exist (make lib)" >&2; exit 2; }
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(python redis memcached git gcc sqlite)

unset LD_PRELOAD
for v in $(env | sed -n 's/^\(HAKOZUNA_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
tmp=$(mktemp -d /tmp/hz-heavy.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- helpers -------------------------------------------------------------
why=""
skip=""
bad() { why="$*"; return 1; }
# needs CAPABILITY...: through tests/need.sh; one that cannot be had here
# skips the program (need.sh's line names the Debian package).
needs() {
  local out rc
  out=$("$root/tests/need.sh" "$@" 2>&1)
  rc=$?
  [ $rc = 0 ] && return 0
  if [ $rc = 77 ]; then skip=$(echo "$out" | grep -m1 SKIP); else bad "tests/need.sh $*: $out"; fi
  return 1
}
hz() { env LD_PRELOAD="$lib" "$@"; }
# (servers are started with env directly: $! is then the server's own pid)

# A free TCP port on 127.0.0.1 (bound once, then released).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_until SECONDS COMMAND...: poll COMMAND until it succeeds or time is up.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.1
  done
}

# The server PID must have the library mapped (the preload took).
preloaded() { grep -q libhakozuna "/proc/$1/maps" 2>/dev/null || bad "pid $1 does not have $lib mapped"; }

# stop_server PID SECONDS: wait for PID to exit by itself; its exit status.
wait_exit() {
  local pid=$1 deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    [ $SECONDS -ge $deadline ] && { kill -9 "$pid"; wait "$pid" 2>/dev/null; return 124; }
    sleep 0.1
  done
  wait "$pid"
}

# ref_and_hz DIR COMMAND: run the shell COMMAND in DIR/ref without the preload
# and in DIR/hz with it (same relative paths); outputs in DIR/{ref,hz}.out.
ref_and_hz() {
  local dir=$1 cmd=$2 m
  for m in ref hz; do
    mkdir -p "$dir/$m"
    if [ $m = hz ]; then
      (cd "$dir/$m" && hz sh -c "$cmd") >"$dir/$m.out" 2>"$dir/$m.err"
    else
      (cd "$dir/$m" && sh -c "$cmd") >"$dir/$m.out" 2>"$dir/$m.err"
    fi || { bad "$m run failed ($?): $(tail -c 400 "$dir/$m.err")"; return 1; }
  done
  [ -s "$dir/ref.out" ] || { bad "no output"; return 1; }
  cmp -s "$dir/ref.out" "$dir/hz.out" ||
    { bad "output differs with the preload: $(diff "$dir/ref.out" "$dir/hz.out" | head -5)"; return 1; }
}

# ---- python: CPython's regression tests ----------------------------------
PY_TESTS="test_dict test_list test_set test_tuple test_json test_re test_threading test_bytes test_unicode
  test_collections test_heapq test_gc test_weakref test_sort test_itertools test_functools test_pickle
  test_struct test_deque test_array test_string test_zlib test_hashlib test_long test_memoryview"
t_python() {
  needs python3 cpython-tests || return 1
  local out=$tmp/python.out
  # shellcheck disable=SC2086 # a list of test names
  (cd "$tmp" && hz env PYTHONMALLOC=malloc timeout -k 5 150 /usr/bin/python3 -m test -j2 $PY_TESTS) >"$out" 2>&1
  local rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && { bad "timed out after 150s: $(grep -E 'running:' "$out" | tail -1)"; return 1; }
  [ $rc -eq 0 ] && grep -q 'Tests result: SUCCESS' "$out" ||
    { bad "exit $rc: $(grep -E 'failed|crashed|Timeout' "$out" | head -5 | tr '\n' ' ')"; return 1; }
  local n
  n=$(echo $PY_TESTS | wc -w)
  grep -q "All $n tests OK" "$out" || { bad "not all $n tests ran: $(grep -E 'tests? OK' "$out")"; return 1; }
}

# ---- redis ---------------------------------------------------------------
t_redis() {
  needs redis || return 1
  local port dir=$tmp/redis pid
  port=$(free_port)
  mkdir -p "$dir"
  env LD_PRELOAD="$lib" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    --logfile "$dir/log" --daemonize no &
  pid=$!
  pids+=("$pid")
  local cli=(redis-cli -h 127.0.0.1 -p "$port")
  wait_until 15 sh -c "${cli[*]} ping | grep -q PONG" || { bad "redis did not answer PING in 15s"; return 1; }
  preloaded "$pid" || return 1
  redis-benchmark -h 127.0.0.1 -p "$port" -q -t set,get,lpush,lpop -n 200000 -P 16 -c 20 -r 100000 -d 100 \
    >"$dir/bench1" 2>&1 || { bad "redis-benchmark (small values) failed: $(tail -3 "$dir/bench1")"; return 1; }
  redis-benchmark -h 127.0.0.1 -p "$port" -q -t set,get -n 4000 -P 4 -c 8 -r 500 -d 150000 \
    >"$dir/bench2" 2>&1 || { bad "redis-benchmark (150 KB values) failed: $(tail -3 "$dir/bench2")"; return 1; }
  grep -c 'requests per second' "$dir/bench1" | grep -qx 4 || { bad "benchmark output: $(cat "$dir/bench1")"; return 1; }
  # Known data: 20,000 keys (values 1 byte to 20 KB), a 5,000-element list, a hash.
  local before after
  before=$("${cli[@]}" dbsize)
  # (mawk: no sprintf of more than 8 KB, so values are built by concatenation)
  awk 'function val(i) { return "v" i "-" substr(pad, 1, (i * 7919) % 20000) }
       BEGIN { pad = "x"; while (length(pad) < 20000) pad = pad pad
         for (i = 1; i <= 20000; i++) { v = val(i)
           printf "*3\r\n$3\r\nSET\r\n$%d\r\nhz:%d\r\n$%d\r\n%s\r\n", length("hz:" i), i, length(v), v }
         for (i = 1; i <= 5000; i++) printf "*3\r\n$5\r\nRPUSH\r\n$7\r\nhz:list\r\n$%d\r\n%d\r\n", length(i ""), i
         for (i = 1; i <= 1000; i++) printf "*4\r\n$4\r\nHSET\r\n$7\r\nhz:hash\r\n$%d\r\nf%d\r\n$%d\r\n%d\r\n",
           length("f" i), i, length(i * i ""), i * i }' >"$dir/load.resp"
  "${cli[@]}" --pipe <"$dir/load.resp" >"$dir/pipe.out" 2>&1
  grep -q 'errors: 0, replies: 26000' "$dir/pipe.out" || { bad "redis-cli --pipe: $(tail -2 "$dir/pipe.out")"; return 1; }
  after=$("${cli[@]}" dbsize)
  [ "$after" -eq $((before + 20002)) ] || { bad "DBSIZE $before -> $after, expected +20002"; return 1; }
  # Read everything back: MGET in batches of 1000, the list, the hash.
  local b
  for ((b = 0; b < 20; b++)); do
    # shellcheck disable=SC2046 # key names are words
    "${cli[@]}" --raw mget $(seq -f 'hz:%g' $((b * 1000 + 1)) $((b * 1000 + 1000)))
  done >"$dir/got"
  awk 'BEGIN { pad = "x"; while (length(pad) < 20000) pad = pad pad
         for (i = 1; i <= 20000; i++) print "v" i "-" substr(pad, 1, (i * 7919) % 20000) }' >"$dir/want"
  cmp -s "$dir/got" "$dir/want" || { bad "values read back differ from those written"; return 1; }
  [ "$("${cli[@]}" lrange hz:list 0 -1 | cksum)" = "$(seq 1 5000 | cksum)" ] || { bad "hz:list differs"; return 1; }
  [ "$("${cli[@]}" hget hz:hash f777)" = 603729 ] && [ "$("${cli[@]}" hlen hz:hash)" = 1000 ] ||
    { bad "hz:hash differs"; return 1; }
  "${cli[@]}" shutdown nosave >/dev/null 2>&1
  wait_exit "$pid" 20 || { bad "redis-server exited with status $? after SHUTDOWN"; return 1; }
  ! grep -qiE 'crash|assert|signal' "$dir/log" || { bad "redis log: $(grep -iE 'crash|assert|signal' "$dir/log" | head -3)"; return 1; }
}

# ---- memcached -----------------------------------------------------------
t_memcached() {
  needs memcached python3 || return 1
  local port pid
  port=$(free_port)
  env LD_PRELOAD="$lib" memcached -u root -l 127.0.0.1 -p "$port" -U 0 -m 256 -t 2 -c 128 -I 1m >"$tmp/mc.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_until 15 python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" ||
    { bad "memcached did not accept connections in 15s"; return 1; }
  preloaded "$pid" || return 1
  python3 "$here/mc_load.py" 127.0.0.1 "$port" >"$tmp/mc.out" 2>&1 || { bad "$(tail -3 "$tmp/mc.out")"; return 1; }
  kill -TERM "$pid"
  wait_exit "$pid" 20
  local rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 143 ] || { bad "memcached exited with status $rc: $(tail -3 "$tmp/mc.log")"; return 1; }
}

# ---- git -----------------------------------------------------------------
t_git() {
  needs git || return 1
  # shellcheck disable=SC2016 # expanded by the inner shell
  local script='
    set -e
    export GIT_AUTHOR_NAME=hz GIT_AUTHOR_EMAIL=hz@example.com GIT_COMMITTER_NAME=hz
    export GIT_COMMITTER_EMAIL=hz@example.com GIT_CONFIG_NOSYSTEM=1 HOME=$PWD
    export GIT_AUTHOR_DATE="2024-01-01T00:00:00Z" GIT_COMMITTER_DATE="2024-01-01T00:00:00Z"
    git init -q -b main repo; cd repo
    mkdir -p src docs data
    awk "BEGIN { for (i = 0; i < 240; i++) { f = (i % 3 ? \"src\" : \"docs\") \"/f\" i \".txt\"
           for (j = 0; j < 50 + i % 90; j++) print \"line\", j, \"of\", i, j * i % 977 > f } }"
    head -c 1000000 /dev/zero | tr "\0" "a" | fold -w 100 >data/big.txt
    git add -A; git commit -q -m "initial"
    for c in $(seq 1 24); do
      b=topic$((c % 4)); git checkout -q -B $b main
      awk -v c=$c "BEGIN { for (i = c; i < 240; i += 7) { f = (i % 3 ? \"src\" : \"docs\") \"/f\" i \".txt\"
             print \"change\", c, i >> f } }"
      [ $((c % 5)) = 0 ] && git mv -k src/f$((c * 3 + 1)).txt src/moved$c.txt
      echo "row $c" >>data/big.txt
      git add -A; git commit -q -m "change $c on $b"
      git checkout -q main; git merge -q --no-edit -X theirs $b
    done
    git log --stat --format="%H %P %s" | cksum
    git repack -q -adf --window=20 --depth=20
    git fsck --full --strict --no-progress
    git count-objects -v | grep -E "^(count|in-pack|packs)"
    git diff --stat topic1 topic2 | tail -1
    git blame -s src/f100.txt | cksum
    cd ..; git clone -q --no-local repo copy; cd copy
    git rev-parse HEAD; git ls-files -s | cksum; git log --all --oneline | wc -l
    git grep -c "change 4" | cksum'
  ref_and_hz "$tmp/git" "$script"
}

# ---- gcc -----------------------------------------------------------------
t_gcc() {
  needs gcc make || return 1
  local dir=$tmp/gcc
  mkdir -p "$dir/src"
  # 20 files of functions that compute known numbers; main prints their sum.
  awk -v dir="$dir/src" 'BEGIN {
    for (f = 0; f < 20; f++) {
      out = dir "/m" f ".c"
      print "#include \"decls.h\"" > out
      for (k = 0; k < 30; k++) {
        n = f * 30 + k
        printf "long fn%d(long x) { long a[%d]; for (int i = 0; i < %d; i++) a[i] = x * i + %d; long s = 0;\n", n, k + 4, k + 4, n > out
        printf "  for (int i = 0; i < %d; i++) s += a[i] %% 1000; return s; }\n", k + 4 > out
        printf "long fn%d(long x);\n", n > (dir "/decls.h")
      }
    }
    out = dir "/main.c"
    print "#include <stdio.h>\n#include \"decls.h\"\nint main(void) { long s = 0;" > out
    for (n = 0; n < 600; n++) printf "  s += fn%d(%d);\n", n, n % 13 > out
    print "  printf(\"%ld\\n\", s); return 0; }" > out
    # expected: sum over n, i < k+4 of ((n%13)*i + n) % 1000
    for (n = 0; n < 600; n++) { k = n % 30; x = n % 13; for (i = 0; i < k + 4; i++) total += (x * i + n) % 1000 }
    printf "%d\n", total > (dir "/expected") }'
  # one large file: a long chain of functions with switch tables, at -O2
  awk 'BEGIN { for (i = 0; i < 300; i++) {
      printf "int big%d(int x) { switch (x %% 16) {", i
      for (c = 0; c < 16; c++) printf " case %d: x = x * %d + %d; break;", c, c + i, i
      printf " } return x ^ %d; }\n", i }
    print "int big(int x) { int s = 0;"; for (i = 0; i < 300; i++) printf "  s += big%d(x + %d);\n", i, i
    print "  return s; }" }' >"$dir/src/big.c"
  cat >"$dir/src/Makefile" <<'MK'
SRCS := $(wildcard m*.c) main.c big.c
prog: $(SRCS:.c=.o)
	$(CC) -o $@ $^
%.o: %.c decls.h
	$(CC) -O2 -g0 -c $< -o $@
MK
  # shellcheck disable=SC2016 # expanded by the inner shell
  ref_and_hz "$dir" 'cp -r ../src/. . && make -s -j2 CC=gcc prog && ./prog && cksum *.o prog' || return 1
  [ "$(head -1 "$dir/hz.out")" = "$(cat "$dir/src/expected")" ] ||
    { bad "prog printed $(head -1 "$dir/hz.out"), expected $(cat "$dir/src/expected")"; return 1; }
}

# ---- sqlite --------------------------------------------------------------
t_sqlite() {
  needs sqlite3 || return 1
  local dir=$tmp/sqlite
  mkdir -p "$dir"
  cat >"$dir/q.sql" <<'SQL'
PRAGMA cache_size = -65536;
CREATE TABLE t (id INTEGER PRIMARY KEY, k INTEGER, name TEXT, blob BLOB);
BEGIN;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 120000)
  INSERT INTO t SELECT i, (i * 2654435761) % 100003, printf('n%08x', (i * 40503) % 1000003),
                       zeroblob(i % 3000) FROM c;
COMMIT;
CREATE INDEX t_k ON t (k);
CREATE INDEX t_name ON t (name, k);
SELECT count(*), sum(id), sum(k), sum(length(blob)) FROM t;
SELECT k, count(*) FROM t GROUP BY k ORDER BY count(*) DESC, k LIMIT 5;
SELECT group_concat(name, ',') FROM (SELECT name FROM t ORDER BY name DESC LIMIT 20);
UPDATE t SET name = upper(name) || name, blob = randomblob(0) WHERE id % 4 = 0;
DELETE FROM t WHERE k % 5 = 0;
SELECT count(*), sum(id), max(name), min(name) FROM t;
SELECT sum(a.id) FROM t a JOIN t b ON a.id = b.k WHERE a.id < 50000;
CREATE TABLE u AS SELECT name || '-' || k AS s FROM t ORDER BY k DESC, name;
SELECT count(DISTINCT s), max(s) FROM u;
VACUUM;
PRAGMA integrity_check;
SQL
  # shellcheck disable=SC2016 # expanded by the inner shell
  ref_and_hz "$dir" 'sqlite3 db <../q.sql' || return 1
  # 120,000 rows: ids sum to 120000 * 120001 / 2; integrity_check says ok
  head -1 "$dir/hz.out" | grep -q '^120000|7200060000|' || { bad "first result: $(head -1 "$dir/hz.out")"; return 1; }
  [ "$(tail -1 "$dir/hz.out")" = ok ] || { bad "integrity_check: $(tail -1 "$dir/hz.out")"; return 1; }
}

# ---- run -----------------------------------------------------------------
"$root/tests/need.sh" python3 || exit 1
hz sh -c 'grep -q libhakozuna /proc/$$/maps' || { echo "FAIL  heavy: preloading $lib does not work" >&2; exit 1; }
failed=0
for name in "${names[@]}"; do
  if ! declare -F "t_$name" >/dev/null; then
    echo "heavy.sh: no program test '$name'" >&2
    exit 2
  fi
  why=""
  skip=""
  start=$SECONDS
  "t_$name"
  rc=$?
  if [ -n "$skip" ] && [ -z "$why" ]; then
    printf 'SKIP  programs/heavy/%-10s %4ss  %s\n' "$name" $((SECONDS - start)) "$skip"
  elif [ $rc = 0 ] && [ -z "$why" ]; then
    printf 'PASS  programs/heavy/%-10s %4ss\n' "$name" $((SECONDS - start))
  else
    printf 'FAIL  programs/heavy/%-10s %4ss  %s\n' "$name" $((SECONDS - start)) "${why:-see above}"
    failed=$((failed + 1))
  fi
done
[ $failed -eq 0 ]
