#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/man.sh TEMPLATE VERSION SOVERSION DATE < options.md: a man page from
# its template (docs/man/*.in), with the option table that
# hz_options_markdown() prints (the README's) in place of the line
# ".@OPTIONS@". `make man` runs it; `make test` (check-docs) checks the
# pages in docs/man are current.
set -eu
template=$1 version=$2 soversion=$3 date=$4
# A table row "| `HAKOZUNA_X` | default | range | description |" becomes
# .TP / .B HAKOZUNA_X / description, then default and range.
options=$(awk -F' [|] ' '
  /^\| `HAKOZUNA_/ {
    name = $1; sub(/^\| `/, "", name); sub(/`$/, "", name)
    desc = $4; sub(/ \|$/, "", desc)
    line = desc ". Default " $2 ", range " $3 "."
    gsub(/\\/, "\\\\e", line); gsub(/-/, "\\-", line)
    print ".TP"; print ".B " name; print line
  }')
[ -n "$options" ] || { echo "man.sh: no option rows on stdin" >&2; exit 1; }
printf '%s\n' "$options" >"${TMPDIR:-/tmp}/hz-man-options.$$"
trap 'rm -f "${TMPDIR:-/tmp}/hz-man-options.$$"' EXIT
sed -e "s|@VERSION@|$version|g" -e "s|@SOVERSION@|$soversion|g" -e "s|@DATE@|$date|g" \
	-e "/^\.@OPTIONS@\$/{r ${TMPDIR:-/tmp}/hz-man-options.$$" -e 'd;}' "$template"
