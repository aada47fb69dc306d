"""Which converter handles which format: one table, defaults merged with the user's settings.

A format is found by the file's suffix first, then by sniffing its first bytes (``detect``).
Converters are named by dotted path (``module:function``) and imported on first use; a
converter whose library is missing is turned off with one logged error, remembered, and its
files fail with ``no_converter`` (still found by name and path), tried again later. ``convert`` turns one Source into a Document.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import shutil
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Iterator, Union

from .document import Document
from deskdex.errors import ConversionError, NotConfigured, UnsupportedFormat
from .source import Source

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Member:
    """A child found inside a compound file, to be converted in its turn; with ``error`` the
    child is recorded as failed (too large, hostile) without being converted."""

    source: Source
    error: ConversionError | None = None


# A converter returns a Document; for a compound file an iterator that yields the parent
# Document first and then its Members; for a compressed single file the Source it holds (the
# file's URI, the decompressed bytes), converted in its place.
Result = Union[Document, Source, Iterator[Union[Document, Member]]]
Converter = Callable[[Source, str], Result]


@lru_cache(maxsize=None)
def which(program: str) -> str | None:
    """The program's path; remembered for the process's life (a helper installed later is seen by the
    next worker, and the files it failed are tried again: ``helper_missing`` is transient)."""
    return shutil.which(program)


def _module_found(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True, slots=True)
class Need:
    """What a format's converter needs beyond deskdex's own Python packages: a helper program on PATH
    (any one of ``names``) or an optional Python module, and the command that installs it, which
    ``deskdex formats`` shows. Converters run helpers through ``helpers.run``."""

    names: tuple[str, ...]
    install: str
    kind: str = "program"  # or "module"

    def found(self) -> bool:
        if self.kind == "module":
            return any(_module_found(n) for n in self.names)
        return any(which(n) is not None for n in self.names)


@dataclass(frozen=True, slots=True)
class Format:
    name: str
    mimes: tuple[str, ...]
    extensions: tuple[str, ...]
    handler: str  # "module:function"
    library: str  # what does the work, for `deskdex formats`
    needs: tuple[Need, ...] = ()  # helpers or optional packages; without them the files fail `helper_missing`

    def missing(self) -> list[Need]:
        """What this machine lacks to convert the format (empty: it converts here)."""
        return [n for n in self.needs if not n.found()]


# OCR of images and of scanned PDF pages (converters/ocr.py): without it images keep their metadata.
OCR = Need(("tesserocr",), "pip install tesserocr; apt install tesseract-ocr-eng (Tesseract's language data)",
           kind="module")

# Source code by suffix: converted as text, the language kept as metadata ("code_language").
SOURCE_LANGUAGES: dict[str, str] = {
    "py": "python", "pyi": "python", "c": "c", "h": "c", "cc": "c++", "cpp": "c++", "cxx": "c++",
    "hpp": "c++", "hh": "c++", "js": "javascript", "mjs": "javascript", "cjs": "javascript",
    "ts": "typescript", "tsx": "typescript", "jsx": "javascript", "java": "java", "kt": "kotlin",
    "scala": "scala", "go": "go", "rs": "rust", "rb": "ruby", "sh": "shell", "bash": "shell",
    "zsh": "shell", "pl": "perl", "pm": "perl", "php": "php", "cs": "c#", "swift": "swift",
    "lua": "lua", "sql": "sql", "r": "r", "hs": "haskell", "ml": "ocaml", "el": "lisp",
    "clj": "clojure", "erl": "erlang", "ex": "elixir", "exs": "elixir", "dart": "dart",
    "m4": "m4", "cmake": "cmake", "ps1": "powershell", "bat": "batch", "vim": "vim", "tcl": "tcl",
    "f90": "fortran", "jl": "julia", "zig": "zig", "nim": "nim",
}

# Manual pages by section suffix (ls.1, intro.n, foo.man): taken for roff only when the file starts as
# roff does, so a notes.1 of plain text stays plain text; any other section suffix (printf.3p,
# openssl.1ssl, EXIT_FAILURE.3const) is a man page when it starts as roff (detect.py).
MAN_SUFFIXES: tuple[str, ...] = (*(str(n) for n in range(1, 10)), "n", "man")

# Helper programs, named once: the format rows declare them and the converters run them (helpers.run).
GHOSTSCRIPT = Need(("gs",), "apt-get install ghostscript")
PDFTOTEXT = Need(("pdftotext",), "apt-get install poppler-utils")
DJVUTXT = Need(("djvutxt",), "apt-get install djvulibre-bin")
DJVUSED = Need(("djvused",), "apt-get install djvulibre-bin")
CATDVI = Need(("catdvi",), "apt-get install catdvi")
WORD_HELPERS = Need(("antiword", "catdoc"), "apt-get install antiword catdoc")  # either reads .doc
CATPPT = Need(("catppt",), "apt-get install catdoc")

FORMATS_BASE: tuple[Format, ...] = (
    Format("Plain text", ("text/plain",), ("txt", "text", "log", "readme", "1st", "me"),
           "deskdex.converters.plaintext:convert", "charset-normalizer"),
    Format("HTML", ("text/html", "application/xhtml+xml"), ("html", "htm", "xhtml", "shtml"),
           "deskdex.converters.html:convert", "lxml, trafilatura (main content)"),
    Format("PDF", ("application/pdf", "application/x-pdf"), ("pdf",), "deskdex.converters.pdf:convert",
           "pypdfium2 (pdfminer.six fallback)", (OCR,)),
    Format("Word (DOCX)", ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",),
           ("docx", "docm", "dotx"), "deskdex.converters.word:convert", "python-docx"),
    Format("OpenDocument text", ("application/vnd.oasis.opendocument.text",
                                 "application/vnd.oasis.opendocument.text-template",
                                 "application/vnd.oasis.opendocument.text-master",
                                 "application/vnd.oasis.opendocument.text-flat-xml"),
           ("odt", "ott", "odm", "fodt"), "deskdex.converters.opendocument:convert", "lxml"),
    Format("OpenDocument spreadsheet", ("application/vnd.oasis.opendocument.spreadsheet",
                                        "application/vnd.oasis.opendocument.spreadsheet-template",
                                        "application/vnd.oasis.opendocument.spreadsheet-flat-xml"),
           ("ods", "ots", "fods"), "deskdex.converters.opendocument:convert", "lxml"),
    Format("OpenDocument presentation", ("application/vnd.oasis.opendocument.presentation",
                                         "application/vnd.oasis.opendocument.presentation-template",
                                         "application/vnd.oasis.opendocument.presentation-flat-xml"),
           ("odp", "otp", "fodp"), "deskdex.converters.opendocument:convert", "lxml"),
    Format("OpenDocument drawing", ("application/vnd.oasis.opendocument.graphics",
                                    "application/vnd.oasis.opendocument.graphics-template",
                                    "application/vnd.oasis.opendocument.graphics-flat-xml"),
           ("odg", "otg", "fodg"), "deskdex.converters.opendocument:convert", "lxml"),
    Format("RTF", ("application/rtf", "text/rtf"), ("rtf",), "deskdex.converters.rtf:convert", "striprtf"),
    Format("PowerPoint (PPTX)", ("application/vnd.openxmlformats-officedocument.presentationml.presentation",
                                 "application/vnd.ms-powerpoint.presentation.macroEnabled.12",
                                 "application/vnd.openxmlformats-officedocument.presentationml.slideshow",
                                 "application/vnd.openxmlformats-officedocument.presentationml.template"),
           ("pptx", "pptm", "ppsx", "potx"), "deskdex.converters.slides:convert", "python-pptx"),
    Format("Excel (XLSX)", ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                            "application/vnd.ms-excel.sheet.macroEnabled.12",
                            "application/vnd.openxmlformats-officedocument.spreadsheetml.template",
                            "application/vnd.ms-excel.template.macroEnabled.12"),
           ("xlsx", "xlsm", "xltx", "xltm"), "deskdex.converters.sheets:convert", "openpyxl"),
    Format("Excel 97-2003 (XLS)", ("application/vnd.ms-excel",), ("xls", "xlt"),
           "deskdex.converters.xls:convert", "xlrd"),
    Format("Word 97-2003 (DOC)", ("application/msword",), ("doc", "dot"), "deskdex.converters.doc:convert",
           "antiword, catdoc", needs=(WORD_HELPERS,)),
    Format("PowerPoint 97-2003 (PPT)", ("application/vnd.ms-powerpoint",), ("ppt", "pps", "pot"),
           "deskdex.converters.ppt:convert", "catppt, olefile", needs=(CATPPT,)),
    Format("Outlook message (MSG)", ("application/vnd.ms-outlook",), ("msg",), "deskdex.converters.msg:convert",
           "extract-msg"),
    # Found by its first bytes only (no suffix, or a wrong one): handed to the converter of its kind.
    Format("OLE compound file", ("application/x-ole-storage",), (), "deskdex.converters.ole:convert", "olefile"),
    Format("EPUB", ("application/epub+zip",), ("epub",), "deskdex.converters.epub:convert", "lxml"),
    Format("PostScript", ("application/postscript", "application/eps", "image/x-eps"), ("ps", "eps", "epsf", "epsi"),
           "deskdex.converters.postscript:convert", "Ghostscript, pdftotext", (GHOSTSCRIPT, PDFTOTEXT)),
    Format("DjVu", ("image/vnd.djvu", "image/x-djvu"), ("djvu", "djv"), "deskdex.converters.djvu:convert",
           "djvulibre (djvutxt, djvused)", (DJVUTXT, DJVUSED)),
    Format("DVI (TeX)", ("application/x-dvi",), ("dvi",), "deskdex.converters.dvi:convert", "catdvi", needs=(CATDVI,)),
    Format("FictionBook", ("application/x-fictionbook+xml", "application/x-zip-compressed-fb2"), ("fb2", "fb2.zip"),
           "deskdex.converters.fictionbook:convert", "lxml"),
    Format("AbiWord", ("application/x-abiword", "application/x-abiword-template"), ("abw", "awt", "zabw"),
           "deskdex.converters.abiword:convert", "lxml"),
    Format("Gnumeric", ("application/x-gnumeric",), ("gnumeric",), "deskdex.converters.gnumeric:convert", "lxml"),
    Format("Markdown", ("text/markdown", "text/x-markdown"), ("md", "markdown", "mdown", "mkd"),
           "deskdex.converters.markup:markdown", "markdown-it-py"),
    Format("reStructuredText", ("text/x-rst",), ("rst", "rest"), "deskdex.converters.markup:rest", "docutils"),
    Format("Source code", ("text/x-source",), tuple(SOURCE_LANGUAGES), "deskdex.converters.markup:source_code", ""),
    Format("CSV", ("text/csv",), ("csv",), "deskdex.converters.markup:table", ""),
    Format("TSV", ("text/tab-separated-values",), ("tsv", "tab"), "deskdex.converters.markup:table", ""),
    Format("JSON", ("application/json",), ("json", "jsonl", "ndjson", "geojson"), "deskdex.converters.markup:json_text", ""),
    Format("XML", ("application/xml", "text/xml"), ("xml", "xsd", "xsl", "xslt", "rss", "atom", "svg", "docbook"),
           "deskdex.converters.markup:xml_text", "lxml"),
    Format("Manual page", ("text/troff", "application/x-troff-man", "text/x-troff-man"), MAN_SUFFIXES,
           "deskdex.converters.manpage:convert", ""),
    Format("E-mail", ("message/rfc822",), ("eml", "msg822"), "deskdex.converters.mail:eml", "email"),
    Format("Mailbox", ("application/mbox",), ("mbox", "mbx"), "deskdex.converters.mail:mbox", "email"),
    Format("ZIP", ("application/zip",), ("zip",), "deskdex.converters.archive:zip_members", "zipfile"),
    Format("TAR", ("application/x-tar", "application/x-gtar"),
           ("tar", "tgz", "tar.gz", "tbz2", "tar.bz2", "txz", "tar.xz"), "deskdex.converters.archive:tar_members", "tarfile"),
    Format("gzip", ("application/gzip", "application/x-gzip"), ("gz",), "deskdex.converters.archive:compressed", "gzip"),
    Format("bzip2", ("application/x-bzip2",), ("bz2",), "deskdex.converters.archive:compressed", "bz2"),
    Format("xz", ("application/x-xz",), ("xz",), "deskdex.converters.archive:compressed", "lzma"),
    Format("WARC", ("application/warc",), ("warc", "warc.gz"), "deskdex.converters.archive:warc_members", "warcio"),
    Format("TREC", ("application/x-trec",), ("trec",), "deskdex.converters.archive:trec_members", ""),
    Format("JPEG image", ("image/jpeg", "image/pjpeg"), ("jpg", "jpeg", "jpe", "jfif"),
           "deskdex.converters.media:image", "Pillow, Tesseract", (OCR,)),
    Format("PNG image", ("image/png",), ("png",), "deskdex.converters.media:image", "Pillow, Tesseract", (OCR,)),
    Format("TIFF image", ("image/tiff",), ("tif", "tiff"), "deskdex.converters.media:image", "Pillow, Tesseract", (OCR,)),
    Format("GIF image", ("image/gif",), ("gif",), "deskdex.converters.media:image", "Pillow, Tesseract", (OCR,)),
    Format("BMP image", ("image/bmp", "image/x-ms-bmp"), ("bmp", "dib"),
           "deskdex.converters.media:image", "Pillow, Tesseract", (OCR,)),
    Format("WebP image", ("image/webp",), ("webp",), "deskdex.converters.media:image", "Pillow, Tesseract", (OCR,)),
    # Audio and video by their tags: mutagen where it reads the container, hachoir (video.py) elsewhere.
    Format("MP3 audio", ("audio/mpeg", "audio/mp3"), ("mp3", "mp2"), "deskdex.converters.media:audio", "mutagen"),
    Format("FLAC audio", ("audio/flac", "audio/x-flac"), ("flac",), "deskdex.converters.media:audio", "mutagen"),
    Format("Ogg audio", ("audio/ogg", "audio/vorbis", "application/ogg"), ("ogg", "oga", "spx"),
           "deskdex.converters.media:audio", "mutagen"),
    Format("Opus audio", ("audio/opus",), ("opus",), "deskdex.converters.media:audio", "mutagen"),
    Format("MPEG-4 audio", ("audio/mp4", "audio/x-m4a"), ("m4a", "m4b", "m4p"),
           "deskdex.converters.media:audio", "mutagen"),
    Format("MPEG-4 video", ("video/mp4", "video/x-m4v"), ("mp4", "m4v"),
           "deskdex.converters.media:audio", "mutagen"),
    Format("WAV audio", ("audio/wav", "audio/x-wav", "audio/wave"), ("wav",),
           "deskdex.converters.media:audio", "mutagen"),
    Format("AIFF audio", ("audio/aiff", "audio/x-aiff"), ("aif", "aiff", "aifc"),
           "deskdex.converters.media:audio", "mutagen"),
    Format("Windows Media audio", ("audio/x-ms-wma",), ("wma",), "deskdex.converters.media:audio", "mutagen"),
    Format("Windows Media video", ("video/x-ms-wmv", "video/x-ms-asf"), ("wmv", "asf"),
           "deskdex.converters.media:audio", "mutagen"),
    Format("Matroska video", ("video/x-matroska", "audio/x-matroska"), ("mkv", "mka", "mk3d"),
           "deskdex.converters.video:convert", "hachoir"),
    Format("WebM video", ("video/webm", "audio/webm"), ("webm",), "deskdex.converters.video:convert", "hachoir"),
    Format("QuickTime video", ("video/quicktime",), ("mov", "qt"), "deskdex.converters.video:convert", "hachoir"),
    Format("AVI video", ("video/x-msvideo", "video/avi"), ("avi",), "deskdex.converters.video:convert", "hachoir"),
    Format("Flash video", ("video/x-flv",), ("flv",), "deskdex.converters.video:convert", "hachoir"),
)


# Converters that read a file's headers and tags only, seeking past the rest (songs, films): their files
# are converted whatever their size, past ``max_file_mb`` (a film is larger than any document).
HEADERS_ONLY = frozenset({"deskdex.converters.media:audio", "deskdex.converters.video:convert"})


class Registry:
    def __init__(self, formats: Iterable[Format] = FORMATS_BASE, overrides: dict[str, str] | None = None):
        self.formats = list(formats)
        self.by_mime: dict[str, str] = {}
        self.by_ext: dict[str, str] = {}
        for f in self.formats:
            for m in f.mimes:
                self.by_mime.setdefault(m, f.handler)
            for e in f.extensions:
                self.by_ext.setdefault(e, f.mimes[0])
        self.by_mime.update(overrides or {})
        self._loaded: dict[str, Converter] = {}
        self._broken: dict[str, str] = {}

    def mime_for_extension(self, ext: str) -> str | None:
        return self.by_ext.get(ext.lower())

    def headers_only(self, mime: str | None) -> bool:
        """Whether the converter of ``mime`` reads only headers and tags (HEADERS_ONLY): no size limit."""
        return mime is not None and self.by_mime.get(mime) in HEADERS_ONLY

    def converter(self, mime: str) -> Converter:
        handler = self.by_mime.get(mime)
        if handler is None:
            raise UnsupportedFormat(f"no converter for {mime}")
        if handler in self._broken:
            raise NotConfigured(self._broken[handler])
        conv = self._loaded.get(handler)
        if conv is None:
            conv = self._loaded[handler] = self._load(handler)
        return conv

    def load_all(self) -> None:
        """Import every converter now (a converter process about to drop to a user who may not
        read the interpreter's files); a broken one stays turned off, as on first use."""
        for mime in list(self.by_mime):
            try:
                self.converter(mime)
            except NotConfigured:
                pass

    def _load(self, handler: str) -> Converter:
        module, _, func = handler.partition(":")
        try:
            conv: Converter = getattr(importlib.import_module(module), func)  # a handler names a converter
            return conv
        except (ImportError, AttributeError) as exc:
            msg = f"converter {handler} is turned off: {exc}"
            self._broken[handler] = msg
            logger.error("%s", msg)
            raise NotConfigured(msg) from exc


_default: Registry | None = None


def default_registry() -> Registry:
    global _default
    if _default is None:
        _default = Registry()
    return _default
