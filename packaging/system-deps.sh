#!/usr/bin/env bash
# System packages the test suite needs beyond Python (installed as root with apt-get on Debian).
# Idempotent: installs only what is missing, and runs `apt-get update` only then.
set -euo pipefail
PKGS=(acl util-linux systemd)  # systemd: systemd-analyze verifies the user unit
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  else
    echo "system-deps: missing ${missing[*]} (install them as root); tests that need them will skip" >&2
  fi
fi
