#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/options/json.sh: hz_stats_json's text is JSON (an object).
. "$(dirname "$0")/../lib.sh"
need python3
"$TEST_BIN/options/stats" json >"${TMPDIR:-/tmp}/hz-json.$$" || fail "stats json"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d, dict) and d, "not a non-empty object: %r" % (d,)
' "${TMPDIR:-/tmp}/hz-json.$$" || fail "not JSON: $(head -c 500 "${TMPDIR:-/tmp}/hz-json.$$")"
rm -f "${TMPDIR:-/tmp}/hz-json.$$"
finish
