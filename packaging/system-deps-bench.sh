#!/usr/bin/env bash
# System packages benchmarks/compare_recoll.py needs: Recoll's command-line indexer and query tool, and the
# helpers its filters call for the formats in the corpus (so Recoll indexes the same formats deskdex does).
# Installed as root with apt-get on Debian by packaging/system-deps.sh (only what is missing); as another
# user it names what is missing and fails.
set -euo pipefail
# recollcmd: recollindex, recollq; python3-recoll: the Python module the filters import (rclexecm);
# poppler-utils: pdftotext (PDF); python3-lxml + xsltproc: the OpenXML/ODF/FB2/SVG/gnumeric filters;
# python3-chardet: text encoding guesses; unrtf: RTF; untex: TeX; antiword: Word 97 .doc.
PKGS=(recollcmd python3-recoll poppler-utils python3-lxml xsltproc python3-chardet unrtf untex antiword)
exec "$(dirname "$0")/system-deps.sh" "${PKGS[@]}"
