#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/platform/musl-run.sh PROGRAM [ARGS...]: runs a program built against
# musl (make TARGET=x86_64-linux-musl) natively, with the library to preload
# from HZ_GUEST_PRELOAD: LD_PRELOAD set by the runner would reach its own
# tools too (timeout, env), glibc's, whose loader cannot load a musl library.
[ -n "${HZ_GUEST_PRELOAD:-}" ] && export LD_PRELOAD="$HZ_GUEST_PRELOAD"
exec "$@"
