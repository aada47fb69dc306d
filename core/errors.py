"""Every error deskdex raises on purpose, in one tree.

    DeskdexError
     ├── ConversionError            a file could not be turned into a Document
     │    ├── UnsupportedFormat     no converter for this MIME type (file still findable by name)
     │    ├── UnreadableFile        permission denied, vanished mid-run, I/O error
     │    │    ├── Encrypted        needs a password or a DRM key (encrypted PDF, EPUB)
     │    │    ├── Vanished         deleted or renamed between being listed and being read
     │    │    └── NotRegular       a FIFO, socket or device: never opened
     │    ├── CorruptFile           the format's own parser rejected the bytes
     │    ├── HostileInput          path traversal, entity expansion, nesting too deep
     │    ├── ConverterCrashed      the converter process died (a crash in a C library)
     │    ├── ConverterMissing      the format's converter cannot run here (its library is missing)
     │    │    └── HelperMissing    the helper program or optional package it needs is not installed
     │    └── LimitExceeded         a configured limit stopped the work
     │         ├── TimeLimit
     │         ├── MemoryLimit
     │         └── SizeLimit
     ├── NotConfigured              an optional part cannot run here (missing library); turned off
     ├── StoreError                 the catalog, text store or tantivy index (sqlite3 and tantivy
     │    │                         errors are translated into these where they enter index/)
     │    ├── IndexBusy             another process holds the writer lock on this home
     │    ├── IndexMissing          nothing has been indexed under this home yet
     │    └── StoreUnwritable       the store cannot be written now; retrying later may work
     │         ├── DiskFull         no space left on the device holding the index
     │         ├── StoreLocked      another program holds a lock on the catalog
     │         └── StoreReadOnly    the index's file system or files are read-only
     ├── QueryError                 a malformed search query (carries the position)
     ├── NotFound                   no such document for this caller: not indexed, or not readable
     ├── Interrupted                asked to stop (SIGTERM, Ctrl-C) with work left; what is done is committed
     ├── ConfigError                a bad setting, configuration file or home folder
     ├── AlreadyRunning             another daemon runs for this home
     ├── ServiceError               the service manager (systemd, launchd, schtasks) refused or is missing
     ├── FetchError                 a URL could not be fetched (carries the crawl's ``reason``)
     ├── SourceError                a mail account or network share could not be read (deskdex.sources)
     │    ├── SourceUnreachable     the server does not answer now: its documents are kept, tried again later
     │    └── SourceRefused         it refused the login, or no password can be found for it
     ├── ProtocolError              the daemon refused a request it cannot take
     │    ├── BadRequest            not a JSON object with a string "op"
     │    ├── TooLarge              the request line is too long
     │    ├── UnknownOp             no such operation
     │    ├── BadArgs               an argument is missing, unknown or of the wrong type or range
     │    ├── Forbidden             the caller may not do this (enterprise mode: only root changes things)
     │    ├── Busy                  the caller holds its share already (connections, searches, request rate)
     │    └── BadMessage            a message between machines that does not fit its schema (deskdex.wire):
     │                              a shard's question or answer, a cluster task or its result
     ├── DaemonUnavailable          no daemon answers on the socket (client side)
     └── DaemonError                the daemon failed on a request (its log has why), or answered with
                                    a code this client does not know

Every class has a ``code``: what crosses the socket when the daemon answers with that error
(deskdex.protocol maps codes back to these classes on the client side). Each ConversionError has
a short ``reason`` (``"corrupt"``, ``"timeout"``...) counted by reason in ``deskdex status``, and
says whether it is ``transient``: a failure that another try may not meet (a machine under load, a
crash) is tried again with back-off (``TRANSIENT_REASONS``); the others wait for the file to change.
Library errors (pdfminer, zipfile, lxml, sqlite3, tantivy) are translated into this tree where
they enter our code, ``raise ... from exc``.

This module imports nothing: the ``deskdex`` command's fast path loads it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class DeskdexError(Exception):
    """Base of every deliberate deskdex error."""

    code = "error"
    # Whether the message may go to any local user of an enterprise-mode daemon. Messages of other
    # errors can name internal paths; such a caller gets the code's meaning instead.
    shown_to_anyone = False

    def fields(self) -> dict[str, Any]:
        """Structured details that cross the socket beside the message (see QueryError)."""
        return {}

    @classmethod
    def from_wire(cls, message: str, fields: dict[str, Any]) -> DeskdexError:
        """The exception a client raises for an error reply with this class's code."""
        return cls(message)


class ConversionError(DeskdexError):
    reason = "conversion"
    code = "conversion_failed"
    transient = False  # the same bytes would fail the same way: tried again only when the file changes


class UnsupportedFormat(ConversionError):
    reason = "unsupported"


class UnreadableFile(ConversionError):
    reason = "unreadable"
    transient = True  # a permission fixed (chmod leaves the mtime alone), an I/O error that passes


class Vanished(UnreadableFile):
    """Deleted (or renamed) between being listed and being read: not a failure of any file."""

    reason = "vanished"


class NotRegular(UnreadableFile):
    """A FIFO, socket or device where a file was expected: never opened for reading (a FIFO
    blocks for ever, /dev/zero never ends)."""

    reason = "not_regular"


class PrivilegeError(UnreadableFile):
    """Enterprise mode: the daemon could not take the rights of the account a file is read as (or
    give root's back), so the file is not read at all (deskdex.converters.privilege)."""


class CorruptFile(ConversionError):
    reason = "corrupt"


class Encrypted(UnreadableFile):
    """Readable only with a password or a DRM key: the file is fine, so not "corrupt"."""

    reason = "encrypted"
    transient = False


class HostileInput(ConversionError):
    reason = "hostile"


class ConverterCrashed(ConversionError):
    """The worker process died under the file (a segfault in a C library, a kill by the OOM
    killer): maybe the file, maybe the moment. Never a worker deskdex itself stopped."""

    reason = "crash"
    transient = True


class ConverterMissing(ConversionError):
    """The converter of the file's format is turned off here (NotConfigured: its library is
    missing): installing it, or a new deskdex, lets the file be converted."""

    reason = "no_converter"
    transient = True


class HelperMissing(ConverterMissing):
    """The helper program or optional package the format needs is not on this machine (antiword,
    djvutxt, Tesseract...): ``deskdex formats`` says what to install; the file is tried again later."""

    reason = "helper_missing"


class LimitExceeded(ConversionError):
    reason = "limit"


class TimeLimit(LimitExceeded):
    reason = "timeout"
    transient = True  # a busy machine gives the worker less of the limit


class MemoryLimit(LimitExceeded):
    reason = "memory"
    transient = True


class SizeLimit(LimitExceeded):
    reason = "too_large"


def _tree(cls: type[ConversionError]) -> list[type[ConversionError]]:
    return [cls] + [c for sub in cls.__subclasses__() for c in _tree(sub)]


# The reasons of failures tried again with back-off, and at once when deskdex or its limits change.
TRANSIENT_REASONS = frozenset(c.reason for c in _tree(ConversionError) if c.transient)


class NotConfigured(DeskdexError):
    code = "not_configured"


class StoreError(DeskdexError):
    code = "store_error"
    condition = "index error"  # what ``deskdex status`` shows as the daemon's state reason


class IndexBusy(StoreError):
    code = "index_busy"


class IndexMissing(StoreError):
    code = "index_missing"


class StoreUnwritable(StoreError):
    """A condition outside deskdex stops writes for now; the daemon waits and tries again."""

    code = "store_unwritable"
    condition = "unwritable"  # what ``deskdex status`` shows as the daemon's state reason


class DiskFull(StoreUnwritable):
    code = "disk_full"
    condition = "disk full"


class StoreLocked(StoreUnwritable):
    code = "store_locked"
    condition = "catalog locked by another program"


class BrokerUnavailable(StoreUnwritable):
    """The Redis broker that hands conversions to ``deskdex worker`` processes (setting ``broker``)
    cannot be reached, or was lost. Like an index that cannot be written, a condition outside
    deskdex that passes: the daemon keeps the work, shows ``stalled`` and tries again."""

    condition = "broker unreachable"


class StoreReadOnly(StoreUnwritable):
    code = "store_read_only"
    condition = "index is read-only"


class QueryError(DeskdexError):
    code = "bad_query"
    shown_to_anyone = True  # it quotes the caller's own query

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position

    def fields(self) -> dict[str, Any]:
        return {"position": self.position} if self.position is not None else {}

    @classmethod
    def from_wire(cls, message: str, fields: dict[str, Any]) -> DeskdexError:
        position = fields.get("position")
        return cls(message, position if isinstance(position, int) and not isinstance(position, bool) else None)


class NotFound(DeskdexError):
    """No such document for this caller: one not indexed and one the caller may not read get the
    same answer (the ``document`` op), so that the error tells nothing of others' files."""

    code = "not_found"
    shown_to_anyone = True  # its messages name nothing but what the caller asked for


class Interrupted(DeskdexError):
    code = "interrupted"


class ConfigError(DeskdexError):
    code = "bad_config"


class AlreadyRunning(DeskdexError):
    code = "already_running"


class ServiceError(DeskdexError):
    code = "service_error"


class FetchError(DeskdexError):
    """A per-URL failure; ``reason`` is what ``crawl status`` counts."""

    code = "fetch_failed"

    def __init__(self, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_after = retry_after

    @classmethod
    def from_wire(cls, message: str, fields: dict[str, Any]) -> DeskdexError:
        return cls(str(fields.get("reason", "fetch")), message)

    def fields(self) -> dict[str, Any]:
        return {"reason": self.reason}


class SourceError(DeskdexError):
    """A source beyond the local disk (an IMAP account, an SMB share) could not be read."""

    code = "source_error"


class SourceUnreachable(SourceError):
    """The server could not be reached or stopped answering: a state of the source, never a reason
    to forget what was indexed from it."""

    code = "source_unreachable"


class SourceRefused(SourceError):
    """The server refused the credentials, or there are none (no keyring entry, a failing
    password command): nothing changes until the user fixes them."""

    code = "source_refused"


class ProtocolError(DeskdexError):
    code = "bad_request"
    shown_to_anyone = True  # says what was wrong with the caller's own request


class BadRequest(ProtocolError):
    code = "bad_request"


class TooLarge(ProtocolError):
    code = "too_large"


class UnknownOp(ProtocolError):
    code = "unknown_op"


class BadArgs(ProtocolError):
    code = "bad_args"


class Forbidden(ProtocolError):
    code = "forbidden"


class Busy(ProtocolError):
    """One local user of an enterprise-mode daemon asked for more than their share (connections,
    searches at once, requests a second): refused at once so that the others are served."""

    code = "busy"


class BadMessage(ProtocolError):
    """A message between machines (deskdex.wire) that does not fit its schema: a question to a
    shard (answered with HTTP 400 and this code), a shard's answer, a task from the broker or a
    worker's result. The message names the message, the field and why."""

    code = "bad_message"


class DaemonUnavailable(DeskdexError):
    code = "unavailable"


class DaemonError(DeskdexError):
    """The daemon failed on a request; ``code`` is the wire's (``internal``, or one this client
    does not know, kept as it came)."""

    code = "internal"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
