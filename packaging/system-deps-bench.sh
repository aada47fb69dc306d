#!/usr/bin/env bash
# System packages the Recoll benchmarks need (benchmarks/compare_recoll.py, benchmarks/formats_vs_recoll.py):
# Recoll's command-line indexer and query tool, and the helpers its filters call for every format in the
# corpus, so Recoll indexes all it can (the filters in /usr/share/recoll/filters name what they run; a
# missing one is listed in the config dir's `missing` file after an index run). Installed as root with
# apt-get on Debian by packaging/system-deps.sh (only what is missing); as another user it names what is
# missing and fails.
set -euo pipefail
# recollcmd: recollindex, recollq; python3-recoll: the Python module the filters import (rclexecm);
# poppler-utils: pdftotext (PDF, and PostScript after ps2pdf); python3-lxml + xsltproc: the OpenXML/ODF/
# FB2/SVG/Gnumeric/AbiWord filters; python3-chardet: text encoding guesses; unrtf: RTF; untex: TeX;
# antiword: Word 97 .doc (rcldoc.py; .xls and .ppt use the dumpers Recoll ships);
# libimage-exiftool-perl: image tags (rclimg); python3-mutagen: audio and MP4 tags (rclaudio.py);
# ghostscript: ps2pdf (rclps: PostScript, EPS); djvulibre-bin: djvutxt (rcldjvu.py); groff: man pages
# (rclman); catdvi: DVI (rcldvi); info: GNU info files (rclinfo.py); python3-py7zr: 7-Zip (rcl7z.py);
# jupyter-nbconvert: Jupyter notebooks (mimeconf runs `jupyter nbconvert`); tesseract-ocr +
# tesseract-ocr-eng: the OCR Recoll runs on PDFs without text (pdfocr = 1, ocrprogs = tesseract).
PKGS=(recollcmd python3-recoll poppler-utils python3-lxml xsltproc python3-chardet unrtf untex antiword
      libimage-exiftool-perl python3-mutagen ghostscript djvulibre-bin groff catdvi info python3-py7zr
      jupyter-nbconvert tesseract-ocr tesseract-ocr-eng)
exec "$(dirname "$0")/system-deps.sh" "${PKGS[@]}"
