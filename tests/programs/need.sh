#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/programs/need.sh WHAT:PACKAGE...: make sure each WHAT (a command on
# PATH, or an absolute path) exists; the Debian PACKAGEs of those missing are
# installed with apt-get (as root, noninteractive), and named on stderr. Fails
# when something is still missing. Services that packages start on install
# (redis, memcached) are kept from starting: the tests start their own.
missing=""
for spec in "$@"; do
  what=${spec%%:*}
  pkg=${spec#*:}
  case $what in
  /*) [ -e "$what" ] && continue ;;
  *) command -v "$what" >/dev/null 2>&1 && continue ;;
  esac
  case " $missing " in *" $pkg "*) ;; *) missing="$missing $pkg" ;; esac
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "need.sh: missing packages:$missing (install them, or run as root on Debian)" >&2
  exit 1
fi
echo "need.sh: installing with apt-get:$missing" >&2
made_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made_policy=1
fi
export DEBIAN_FRONTEND=noninteractive
apt() { apt-get -q -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=300 -o Acquire::Retries=3 "$@"; }
# shellcheck disable=SC2086 # a list of package names
{ apt update >/dev/null && apt install -y --no-install-recommends $missing >/dev/null; } ||
  { apt update >/dev/null && apt install -y --no-install-recommends $missing >/dev/null; }
rc=$?
[ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
[ $rc -eq 0 ] || { echo "need.sh: apt-get install$missing failed" >&2; exit 1; }
for spec in "$@"; do
  what=${spec%%:*}
  case $what in
  /*) [ -e "$what" ] ;;
  *) command -v "$what" >/dev/null 2>&1 ;;
  esac || { echo "need.sh: $what is still missing after installing ${spec#*:}" >&2; exit 1; }
done
exit 0
