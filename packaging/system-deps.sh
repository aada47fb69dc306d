#!/usr/bin/env bash
# The Debian packages `make test` needs beyond Python, checked before anything else runs (the Makefile's
# `test` target calls this first).
#   packaging/system-deps.sh           the test suite's packages
#   packaging/system-deps.sh PKG...    those packages instead (system-deps-bench.sh; tests pass made-up names)
# Nothing missing: silent, exit 0. Something missing: as root with apt-get, installs it (running
# `apt-get update` only then); as another user, names it with the command that installs it and exits 1,
# so `make test` stops before it creates a venv or runs a test, instead of tests skipping one by one.
# Without dpkg-query (not Debian) it cannot tell: it says so and exits 0; the tests needing a tool skip.
# $PYTHON_FOR_VENV, when set (the Makefile sets it while .venv does not exist yet): that Python must be
# able to create a venv, which Debian's python3 cannot without its pythonX.Y-venv package (ensurepip).
set -euo pipefail
# acl: getfacl/setfacl for the privacy tests; util-linux: setpriv, unshare; systemd: systemd-analyze
# verifies the user unit; xvfb and the X11/EGL libraries: Qt's xcb platform for the tray tests.
# The helper programs some formats need, all optional for `make run` (without one, its files fail
# `helper_missing` and `deskdex formats` names the package): antiword and catdoc (.doc, catppt for .ppt),
# djvulibre-bin (djvutxt, djvused), ghostscript (gs; PostScript also needs poppler-utils' pdftotext), catdvi
# (DVI; it brings TeX, with which the tests typeset their DVI files),
# tesseract-ocr + tesseract-ocr-eng (OCR's language data; fonts-dejavu-core: the OCR tests draw text with it).
# redis-server: tests/test_cluster.py starts its own, on 127.0.0.1, as Celery's broker.
# dovecot-imapd: the IMAP source tests run a real Dovecot of their own on 127.0.0.1 (tests/imap_server.py).
# samba: the SMB source tests run a real smbd of their own on 127.0.0.1 (tests/smb_server.py).
# chromium and chromium-driver: the web UI's end-to-end tests drive it headless with Selenium
# (tests/browser.py); libpam-runtime: /etc/pam.d/other, which the system daemon's web login checks with.
# dbus-daemon, dbus-bin (dbus-send), libglib2.0-bin (gdbus) and desktop-file-utils: tests/test_shell_search.py runs a
# private session bus, calls the search provider through it and validates the desktop files `service install` writes.
# xdg-utils (xdg-mime) and adwaita-icon-theme: tests/test_tray_window.py asks xdg-mime for the default PDF
# viewer, and checks the results' type icons from a theme (a bare X session names none).
# libreoffice-*-nogui, python3-uno, mkvtoolnix, groff and qpdf: only the tests need them, to make .doc/.ppt/.xls,
# password-protected .odt, .mkv, PostScript and AES-256 encrypted PDF files with the formats' own tools.
PKGS=(acl util-linux systemd poppler-utils xvfb libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1
      libxcb-image0 libxcb-randr0 libxcb-render-util0 libxcb-shape0 libxcb-xfixes0 libxcb-xkb1 libegl1 libgl1
      libfontconfig1 libdbus-1-3
      antiword catdoc djvulibre-bin ghostscript catdvi tesseract-ocr tesseract-ocr-eng fonts-dejavu-core mkvtoolnix groff qpdf python3-uno redis-server
      dovecot-imapd samba chromium chromium-driver libpam-runtime dbus-daemon dbus-bin libglib2.0-bin desktop-file-utils
      xdg-utils adwaita-icon-theme
      libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui)
if [ $# -gt 0 ]; then PKGS=("$@"); fi
if ! command -v dpkg-query >/dev/null; then
  echo "system-deps: not a Debian system (no dpkg-query): not checking ${PKGS[*]}; tests needing them will skip" >&2
  exit 0
fi
if [ -n "${PYTHON_FOR_VENV:-}" ]; then
  if ! command -v "$PYTHON_FOR_VENV" >/dev/null; then
    PKGS+=(python3-venv)  # depends on python3: a minimal Debian has neither
  elif ! "$PYTHON_FOR_VENV" -c 'import ensurepip' 2>/dev/null; then
    PKGS+=("$("$PYTHON_FOR_VENV" -c 'import sys; print("python%d.%d-venv" % sys.version_info[:2])')")
  fi
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "system-deps: installing ${missing[*]}" >&2
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  exit 0
fi
{
  echo "system-deps: missing Debian packages: ${missing[*]}"
  echo "Install them as root, then run the command again:"
  echo "  sudo apt-get install ${missing[*]}"
} >&2
exit 1
