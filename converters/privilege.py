"""Reading a user's file with that user's rights, never root's (enterprise mode: the daemon runs as
root and indexes every account's home).

Who reads a file is the account whose home holds it (``RunAs``), or ``NOBODY`` for a file in no
home. That account controls every name in its home: whatever a swap of a file for a symlink, a
hard link or a folder rename makes the daemon open there, the kernel checks it against that
account's uid, groups and ACLs at the moment of opening, so nothing is read that the account
could not read itself, and publish anyway.

Two ways, one for each kind of reader:

- ``as_user``: the daemon's own thread that computes a checksum takes the account's effective
  uid, gid and groups for the one ``open`` call, then root's back. Linux keeps credentials per
  thread; the C library's set*id wrappers change every thread of the process (POSIX asks for
  it), so the raw system calls are used here (as Samba does), and no other thread is affected.
  The saved uid stays 0, which is what lets root's rights come back.
- ``drop_to``: a converter process gives up root for good (groups, gid, then uid) before it takes
  its first file; ``preload`` first imports every module a conversion may need, since the
  account may not be allowed to read the interpreter's own files (a Python under /root).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import logging
import os
import platform
import sys
import threading
from dataclasses import dataclass
from typing import Iterator

from deskdex.errors import PrivilegeError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunAs:
    """An account's credentials: whose rights a file is read with."""

    uid: int
    gid: int
    groups: tuple[int, ...]


NOBODY = RunAs(65534, 65534, (65534,))  # Debian's nobody/nogroup: the reader of files in no home

# (setgroups, setresuid, setresgid) system call numbers.
_SYSCALLS = {"x86_64": (116, 117, 119), "aarch64": (159, 147, 149)}
_libc: ctypes.CDLL | None = None
_local = threading.local()


def supported() -> bool:
    return platform.system() == "Linux" and platform.machine() in _SYSCALLS


def _syscall(nr: int, *args: int | ctypes.Array[ctypes.c_uint]) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.syscall(nr, *args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _set_thread(uid: int, gid: int, groups: tuple[int, ...]) -> None:
    setgroups, setresuid, setresgid = _SYSCALLS[platform.machine()]
    keep = ctypes.c_uint(0xFFFFFFFF).value  # -1: leave that id as it is
    if uid != 0:  # to the user: groups and gid while still root, then the effective uid
        _syscall(setgroups, len(groups), (ctypes.c_uint * len(groups))(*groups))
        _syscall(setresgid, keep, gid, keep)
        _syscall(setresuid, keep, uid, keep)
    else:  # back to root: the effective uid first, which gives back the right to set the rest
        _syscall(setresuid, keep, 0, keep)
        _syscall(setresgid, keep, gid, keep)
        _syscall(setgroups, len(groups), (ctypes.c_uint * len(groups))(*groups))


@contextlib.contextmanager
def as_user(who: RunAs | None) -> Iterator[None]:
    """This thread holds ``who``'s rights inside the block (None: its own). Keep the block to the
    system calls that must be checked: anything else the thread does there is done as ``who``."""
    if who is None or os.geteuid() != 0:
        yield  # not root: the kernel already checks the daemon's own rights
        return
    if not supported():
        raise PrivilegeError(f"cannot take a user's rights on {platform.system()} {platform.machine()}")
    if getattr(_local, "held", False):
        raise PrivilegeError("a thread already holding a user's rights asked again")
    root = (os.getegid(), tuple(os.getgroups()))
    try:
        _set_thread(who.uid, who.gid, who.groups)
    except OSError as exc:
        _restore(root)
        raise PrivilegeError(f"cannot take the rights of uid {who.uid}: {exc}") from exc
    _local.held = True
    try:
        yield
    finally:
        _local.held = False
        _restore(root)


def _restore(root: tuple[int, tuple[int, ...]]) -> None:
    try:
        _set_thread(0, root[0], root[1])
    except OSError as exc:  # the thread would go on as the user: nothing it writes would work
        logger.critical("cannot take root's rights back: %s", exc)
        os._exit(70)  # EX_SOFTWARE: the service manager starts the daemon again


def drop_to(who: RunAs) -> None:
    """Give this process ``who``'s rights for good (a converter process, one thread)."""
    if os.geteuid() != 0:
        return
    os.setgroups(list(who.groups))
    os.setresgid(who.gid, who.gid, who.gid)
    os.setresuid(who.uid, who.uid, who.uid)
    if os.geteuid() != who.uid or os.getuid() != who.uid:  # never convert as root by mistake
        raise PrivilegeError(f"could not become uid {who.uid}")


# What conversions import when they first need it (function-level imports in converters/), and
# what decoding text of any declared charset loads: imported before a process drops to a user who
# may not read them. tests/test_privilege.py checks that every such import is listed.
LAZY_IMPORTS = (
    "warcio.archiveiterator", "warcio.exceptions", "docutils.nodes", "docutils.core", "docutils.utils",
    "markdown_it", "pypdfium2", "pypdfium2.raw", "pdfminer.high_level", "pdfminer.layout",
    "pdfminer.pdfdocument", "pdfminer.pdfparser", "pdfminer.psparser", "pdfminer.pdftypes", "pdfminer.utils",
    "striprtf.striprtf", "openpyxl", "openpyxl.workbook.workbook", "xlrd", "pptx", "pptx.shapes.base", "pptx.slide",
    "pptx.text.text", "pptx.enum.shapes", "docx", "docx.document", "docx.text.paragraph", "docx.opc.exceptions",
    "docx.text.hyperlink", "docx.text.run", "docx.oxml.table", "docx.oxml.text.paragraph", "docx.oxml.text.run",
    "docx.oxml.text.hyperlink", "lxml.etree", "io",
    "mutagen", "mutagen.id3", "PIL", "PIL.Image", "PIL.ExifTags", "PIL.IptcImagePlugin",
    "hachoir.core.config", "hachoir.metadata", "hachoir.parser", "hachoir.stream",
    # What mutagen.File and Pillow's Image.open and getxmp import on their first call.
    "mutagen.asf", "mutagen.apev2", "mutagen.flac", "mutagen.mp3", "mutagen.oggflac", "mutagen.oggspeex",
    "mutagen.oggtheora", "mutagen.oggvorbis", "mutagen.oggopus", "mutagen.trueaudio", "mutagen.wavpack",
    "mutagen.mp4", "mutagen.musepack", "mutagen.monkeysaudio", "mutagen.optimfrog", "mutagen.aiff",
    "mutagen.aac", "mutagen.ac3", "mutagen.smf", "mutagen.tak", "mutagen.dsf", "mutagen.dsdiff", "mutagen.wave",
    "PIL.JpegImagePlugin", "PIL.MpoImagePlugin", "PIL.PngImagePlugin", "PIL.TiffImagePlugin",
    "PIL.GifImagePlugin", "PIL.BmpImagePlugin", "PIL.WebPImagePlugin", "PIL.PpmImagePlugin", "defusedxml.ElementTree",
    # Office 97-2003 and Outlook (ole.py, doc.py, ppt.py, msg.py), and what msoffcrypto.OfficeFile imports on its call.
    "olefile", "olefile.olefile", "msoffcrypto", "msoffcrypto.format.doc97", "msoffcrypto.format.ppt97", "msoffcrypto.format.xls97",
    "msoffcrypto.format.ooxml", "extract_msg", "extract_msg.enums",
    # OCR (converters/ocr.py); Tesseract's language data is read when a file first needs it, from the
    # system's tessdata folder, which every account may read.
    "tesserocr",
    # The language of each text (language.py) and the main content of web pages (content.py).
    "py3langid.langid", "trafilatura", "trafilatura.settings", "platformdirs", "numpy", "lxml.html",
    # What libraries import on a call, found by tests/test_privilege_formats.py: datetime.strptime
    # (python-docx and python-pptx dates), numpy's masked arrays, docutils' reader, writer, language.
    "_strptime", "numpy.ma", "docutils.readers.standalone", "docutils.writers.null", "docutils.languages.en",
)
# Packages imported whole: docutils loads a directive's, a role's or a transform's module when a
# document first uses it (`.. table::`, `:sub:`), which any user's file may do.
LAZY_PACKAGES = ("docutils.parsers.rst", "docutils.transforms", "docutils.utils")
# What _warm_up converts: enough letters to be told a language, and a page short enough for
# trafilatura to ask its fallbacks too.
_WARM_TEXT = ("The worker reads the files it may read, converts them and hands their text to the index, "
              "which keeps one entry for every document of the folders it watches.")
_WARM_PAGE = f"<html><head><title>t</title></head><body><nav>Home</nav><p>{_WARM_TEXT}</p></body></html>"


def preload() -> list[str]:
    """Import what converters import lazily, and every text codec (the converters themselves:
    Registry.load_all); returns the modules that could not be imported (an optional library not
    installed: its formats then fail as they would anyway)."""
    import encodings
    import pkgutil

    missing = []
    # Every codec module of this Python, not only the targets of its aliases: utf_8_sig (a file
    # starting with a UTF-8 BOM), cp720, koi8_u... are nobody's alias, and after the drop the
    # lookup could not read them ("unknown encoding: utf-8-sig").
    codecs = sorted(f"encodings.{m.name}" for m in pkgutil.iter_modules(encodings.__path__))
    for name in list(LAZY_IMPORTS) + codecs:
        if not _load(name):
            missing.append(name)
    for package in LAZY_PACKAGES:
        if not _load(package):
            missing.append(package)
            continue
        path = getattr(sys.modules[package], "__path__", [])
        missing.extend(m.name for m in pkgutil.walk_packages(path, f"{package}.", onerror=missing.append)
                       if not _load(m.name))
    _warm_up()
    return missing


def _load(name: str) -> bool:
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001  an optional library not installed, a codec this Python lacks
        return False
    return True


def _warm_up() -> None:
    """Use once what reads its package's files on first use, not on import: py3langid's model and
    trafilatura's fallbacks (jusText's stop lists). After the drop they could be unreadable."""
    import lxml.html

    from . import content, language

    try:
        language.detect(_WARM_TEXT)
    except Exception:  # noqa: BLE001  the library missing: documents go without a language, as they would
        logger.debug("language detection unavailable", exc_info=True)
    content.library_text(lxml.html.fromstring(_WARM_PAGE))  # it logs and returns "" itself on failure
