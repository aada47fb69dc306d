"""Every error deskdex raises on purpose, in one tree.

    DeskdexError
     ├── ConversionError            a file could not be turned into a Document
     │    ├── UnsupportedFormat     no converter for this MIME type (file still findable by name)
     │    ├── UnreadableFile        permission denied, vanished mid-run, I/O error
     │    │    └── Encrypted        needs a password or a DRM key (encrypted PDF, EPUB)
     │    ├── CorruptFile           the format's own parser rejected the bytes
     │    ├── HostileInput          path traversal, entity expansion, nesting too deep
     │    └── LimitExceeded         a configured limit stopped the work
     │         ├── TimeLimit
     │         ├── MemoryLimit
     │         └── SizeLimit
     ├── NotConfigured              an optional part cannot run here (missing library); turned off
     ├── StoreError                 the catalog, text store or tantivy index
     │    ├── IndexBusy             another process holds the writer lock on this home
     │    └── IndexMissing          nothing has been indexed under this home yet
     ├── QueryError                 a malformed search query (carries the position)
     ├── Interrupted                asked to stop (SIGTERM, Ctrl-C) with work left; what is done is committed
     └── ConfigError                a bad setting or configuration file

Each ConversionError has a short machine-readable ``reason`` (``"corrupt"``, ``"timeout"``...)
used to count failures by reason in ``deskdex status``. Library errors (pdfminer, zipfile,
lxml, tantivy) are translated into this tree where they enter our code, ``raise ... from exc``.
"""

from __future__ import annotations


class DeskdexError(Exception):
    """Base of every deliberate deskdex error."""

    code = "error"


class ConversionError(DeskdexError):
    reason = "conversion"
    code = "conversion_failed"


class UnsupportedFormat(ConversionError):
    reason = "unsupported"


class UnreadableFile(ConversionError):
    reason = "unreadable"


class CorruptFile(ConversionError):
    reason = "corrupt"


class Encrypted(UnreadableFile):
    """Readable only with a password or a DRM key: the file is fine, so not "corrupt"."""

    reason = "encrypted"


class HostileInput(ConversionError):
    reason = "hostile"


class LimitExceeded(ConversionError):
    reason = "limit"


class TimeLimit(LimitExceeded):
    reason = "timeout"


class MemoryLimit(LimitExceeded):
    reason = "memory"


class SizeLimit(LimitExceeded):
    reason = "too_large"


class NotConfigured(DeskdexError):
    code = "not_configured"


class StoreError(DeskdexError):
    code = "store_error"


class IndexBusy(StoreError):
    code = "index_busy"


class IndexMissing(StoreError):
    code = "index_missing"


class QueryError(DeskdexError):
    code = "bad_query"

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class Interrupted(DeskdexError):
    code = "interrupted"


class ConfigError(DeskdexError):
    code = "bad_config"
