#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/programs/programs.sh NAME: a real program under
# LD_PRELOAD=$HZ_LIB; its output must equal the output without the preload.
# NAME: python (tests/programs/work.py), sort (a large generated file), gcc
# (compile and run a generated C file), git (init, add, commit, log),
# sqlite (10,000 rows). The dynamic loader's log of symbol bindings
# (LD_DEBUG=bindings) proves that malloc was hakozuna's in the preloaded run
# (a report at exit would not: sort closes stderr before exiting). Missing
# programs are installed with apt-get when root, else the test is skipped.
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
name=$1
: "${HZ_LIB:?HZ_LIB must name the library to preload}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run ref|hz COMMAND...: run in $tmp/ref or $tmp/hz, stdout to $tmp/ref.out
# or $tmp/hz.out; hz runs with hakozuna preloaded.
run() {
  mode=$1
  shift
  mkdir -p "$tmp/$mode"
  if [ "$mode" = hz ]; then
    (cd "$tmp/$mode" && env LD_PRELOAD="$HZ_LIB" LD_DEBUG=bindings \
      LD_DEBUG_OUTPUT="$tmp/bindings" "$@") \
      >>"$tmp/hz.out" 2>>"$tmp/hz.err"
  else
    (cd "$tmp/$mode" && "$@") >>"$tmp/ref.out" 2>>"$tmp/ref.err"
  fi || fail "$mode: $* exited with status $?: $(tail -c 600 "$tmp/$mode.err")"
}

# both COMMAND...: the command without and with the preload.
both() {
  run ref "$@"
  run hz "$@"
}

compare() {
  if ! cmp -s "$tmp/ref.out" "$tmp/hz.out"; then
    fail "output differs with hakozuna preloaded:"
    diff "$tmp/ref.out" "$tmp/hz.out" | head -20 >&2
  fi
  [ -s "$tmp/ref.out" ] || fail "no output"
  # e.g. "binding file sort [0] to .../libhakozuna.so [0]: normal symbol `malloc'"
  cat "$tmp"/bindings.* 2>/dev/null | grep -q "to $HZ_LIB.*symbol .malloc'" ||
    fail "malloc was not bound to $HZ_LIB (LD_DEBUG=bindings)"
}

case $name in
python)
  need python3
  both python3 "$here/work.py"
  ;;
sort)
  # 200,000 lines of numbers and words, sorted several ways.
  awk 'BEGIN { srand(7); for (i = 0; i < 200000; i++)
         printf "%d %s%d %.3f\n", int(rand() * 1e9), substr("abcdefghij", 1 + int(rand() * 10)), i % 977, rand() }' \
    >"$tmp/input"
  for args in "" "-n" "-k2,2 -k1,1n" "-r -S 4M --parallel=2" "-u -t. -k2"; do
    # shellcheck disable=SC2086 # args is a list of options
    both sh -c "sort $args \"$tmp/input\" | cksum"
  done
  ;;
gcc)
  need gcc
  awk 'BEGIN { print "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>";
         for (i = 0; i < 400; i++)
           printf "static int f%d(int x) { int a[%d]; for (int i = 0; i < %d; i++) a[i] = x * i + %d; return a[x %% %d] ^ (x << 3); }\n", i, i % 50 + 1, i % 50 + 1, i, i % 50 + 1;
         print "int main(void) { long s = 0;";
         for (i = 0; i < 400; i++) printf "  s += f%d(%d);\n", i, i;
         print "  char *p = malloc(100); strcpy(p, \"done\"); printf(\"%ld %s\\n\", s, p); free(p); return 0; }" }' \
    >"$tmp/prog.c"
  both gcc -O2 -S -o - "$tmp/prog.c"
  both sh -c "gcc -O1 -g -o prog \"$tmp/prog.c\" && ./prog"
  ;;
git)
  need git
  script='
    export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t
    export GIT_COMMITTER_EMAIL=t@example.com GIT_CONFIG_NOSYSTEM=1 HOME=$PWD
    export GIT_AUTHOR_DATE="2024-01-01T00:00:00Z" GIT_COMMITTER_DATE="2024-01-01T00:00:00Z"
    git init -q -b main repo && cd repo || exit 1
    i=0; while [ $i -lt 300 ]; do echo "file $i $(seq 1 $((i % 40)))" >f$i.txt; i=$((i + 1)); done
    git add . && git commit -q -m first || exit 1
    i=0; while [ $i -lt 300 ]; do echo "change $i" >>f$((i * 7 % 300)).txt; i=$((i + 3)); done
    git rm -q f1.txt f2.txt && git add . && git commit -q -m second || exit 1
    git log --stat --format="%H %s" && git diff HEAD~1 --stat | tail -1
    git gc -q && git fsck --no-progress && git count-objects -v | grep -v size'
  both sh -c "$script"
  ;;
sqlite)
  need sqlite3
  cat >"$tmp/q.sql" <<'SQL'
CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, v REAL);
BEGIN;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 10000)
  INSERT INTO t SELECT i, printf('name-%05d-%x', i, i * 2654435761 % 4294967296), i * 0.5 FROM c;
COMMIT;
CREATE INDEX t_name ON t (name);
SELECT count(*), sum(id), sum(v) FROM t;
SELECT name FROM t WHERE name LIKE 'name-0999%' ORDER BY name;
SELECT id % 7 AS k, count(*), max(name) FROM t GROUP BY k ORDER BY k;
UPDATE t SET name = upper(name) WHERE id % 2 = 0;
DELETE FROM t WHERE id % 3 = 0;
VACUUM;
SELECT count(*), sum(id), group_concat(substr(name, 1, 1), '') FROM
  (SELECT name, id FROM t ORDER BY id LIMIT 20);
SQL
  both sh -c "sqlite3 db <\"$tmp/q.sql\""
  head -1 "$tmp/ref.out" | grep -qx '10000|50005000|25002500.0' ||
    fail "sqlite: first result is '$(head -1 "$tmp/ref.out")'"
  ;;
*)
  echo "unknown program test '$name'" >&2
  exit 2
  ;;
esac
compare
finish
