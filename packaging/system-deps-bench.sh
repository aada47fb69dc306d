#!/usr/bin/env bash
# System packages benchmarks/compare_recoll.py needs: Recoll's command-line indexer and query tool, and the
# helpers its filters call for the formats in the corpus (so Recoll indexes the same formats deskdex does).
# Installed as root with apt-get on Debian. Idempotent: installs only what is missing, and runs
# `apt-get update` only then.
set -euo pipefail
# recollcmd: recollindex, recollq; python3-recoll: the Python module the filters import (rclexecm);
# poppler-utils: pdftotext (PDF); python3-lxml + xsltproc: the OpenXML/ODF/FB2/SVG/gnumeric filters;
# python3-chardet: text encoding guesses; unrtf: RTF; untex: TeX; antiword: Word 97 .doc.
PKGS=(recollcmd python3-recoll poppler-utils python3-lxml xsltproc python3-chardet unrtf untex antiword)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  else
    echo "system-deps-bench: missing ${missing[*]} (install them as root: sudo $0)" >&2
    exit 1
  fi
fi
