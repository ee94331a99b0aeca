#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/platform/qemu-aarch64.sh PROGRAM [ARGS...]: runs an aarch64 Linux
# program under qemu-user with Debian's cross sysroot. The library to preload
# comes in HZ_GUEST_PRELOAD: LD_PRELOAD would reach the (x86-64) emulator and
# this shell, not only the program.
exec qemu-aarch64 -L "${HZ_QEMU_SYSROOT:-/usr/aarch64-linux-gnu}" \
  ${HZ_GUEST_PRELOAD:+-E "LD_PRELOAD=$HZ_GUEST_PRELOAD"} "$@"
