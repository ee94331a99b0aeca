#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/platform/wine.sh PROGRAM.exe [ARGS...]: runs a Windows x64 program
# under wine64 (Debian's wine64 keeps its loader in /usr/lib/wine).
# tests/platform/windows.sh sets WINEPREFIX and starts the wine server.
wine=$(command -v wine64 2>/dev/null || echo /usr/lib/wine/wine64)
exec "$wine" "$@"
