#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/platform/wine.sh PROGRAM.exe [ARGS...]: runs a Windows x64 program
# under wine64 (Debian's wine64 keeps its loader in /usr/lib/wine).
# tests/platform/windows.sh sets WINEPREFIX and starts the wine server.
# When wine itself fails ("wine client error": its server went away, seen
# once in CI right after the prefix was made), the server is started again
# and the program rerun once; the first run's messages stay in the log.
wine=$(command -v wine64 2>/dev/null || echo /usr/lib/wine/wine64)
wineserver=$(command -v wineserver 2>/dev/null || echo /usr/lib/wine/wineserver)
err=$(mktemp)
"$wine" "$@" 2>"$err"
rc=$?
cat "$err" >&2
if [ $rc -ne 0 ] && grep -q "^wine client error" "$err"; then
  echo "wine.sh: wine lost its server (above); starting it again, running $1 once more" >&2
  "$wineserver" -p 30 2>/dev/null
  "$wine" "$@"
  rc=$?
fi
rm -f "$err"
exit $rc
