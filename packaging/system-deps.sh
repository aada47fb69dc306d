#!/usr/bin/env bash
# System packages the test suite needs beyond Python (installed as root with apt-get on Debian).
# Idempotent: installs only what is missing, and runs `apt-get update` only then.
#   packaging/system-deps.sh                 the test suite's packages; what is missing only warns
#   packaging/system-deps.sh --require P...  packages P (system-deps-bench.sh); missing ones fail
set -euo pipefail
require=0
if [ "${1:-}" = --require ]; then require=1; shift; fi
# acl: getfacl/setfacl for the privacy tests; util-linux: setpriv, unshare; systemd: systemd-analyze
# verifies the user unit; xvfb and the X11/EGL libraries: Qt's xcb platform for the tray tests.
PKGS=(acl util-linux systemd poppler-utils xvfb libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1
      libxcb-image0 libxcb-randr0 libxcb-render-util0 libxcb-shape0 libxcb-xfixes0 libxcb-xkb1 libegl1 libgl1
      libfontconfig1 libdbus-1-3)
if [ $# -gt 0 ]; then PKGS=("$@"); fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  elif [ $require = 1 ]; then
    echo "system-deps: missing ${missing[*]} (install them as root: sudo $0 --require ${missing[*]})" >&2
    exit 1
  else
    echo "system-deps: missing ${missing[*]} (install them as root); tests that need them will skip" >&2
  fi
fi
