"""What a source beyond the local disk is to the indexer: folders of items, each item fetched as bytes.

A source (an IMAP account, an SMB share) is listed a folder at a time. A folder is listed whole or
not at all: the sync deletes what it indexed under a folder's ``prefix`` only when the folder's
listing says it is gone, never because the server could not be asked (``items`` None). A folder's
``stamp`` changes whenever its content may have (IMAP: UIDVALIDITY, UIDNEXT and the message count;
SMB: nothing cheaper than the listing, so None): an unchanged stamp spares the listing.

An item's ``size`` None means its bytes never change under its URI (an IMAP message: its UID is
never reused within a UIDVALIDITY): once indexed it is fetched again only if it is gone and back.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Iterator, Mapping

if TYPE_CHECKING:
    from deskdex.errors import ConversionError


@dataclass(frozen=True, slots=True)
class Item:
    uri: str  # the document's URI, which names it for good (RFC 5092 for a message)
    name: str  # what format detection reads the suffix of ("message.eml", "report.pdf")
    size: int | None = None  # None: immutable under its URI (see the module's docstring)
    mtime: float | None = None
    key: Any = None  # what the source needs to fetch it again (an IMAP UID, a path on the share)
    display: str = ""  # how a result shows where it is
    mime: str | None = None  # the source's word for its format; detection may overrule it
    # Enterprise mode (Options.rights): the local accounts (uids) that may read it, from the server's
    # rights, and whether anyone may; None: not told (nobody but root on an enterprise-mode daemon).
    readers: frozenset[int] | None = None
    everyone: bool = False


@dataclass(frozen=True, slots=True)
class Options:
    """How a source is read, besides its URL and password."""

    user: str | None = None  # the account to log in as when the URL names none (SMB: DOMAIN\\name)
    rights: bool = False  # enterprise mode: each item's readers from the server's rights (SMB: its ACL)
    sid_map: Mapping[str, str] = field(default_factory=dict)  # a Windows SID -> a local account's name


@dataclass(frozen=True, slots=True)
class Folder:
    name: str
    prefix: str  # every item's URI in it starts with this, and no other's
    stamp: str | None = None  # changes whenever its items may have; None: always listed
    key: Any = None  # what the source needs to list or fetch from it
    # Only its direct items are under its prefix as far as the sync is concerned: a URI under it with a
    # further "/" after the prefix is another folder's (SMB: one folder per directory, its subdirectories'
    # files are theirs). False: everything under the prefix is its (IMAP; an SMB directory not listed).
    flat: bool = False


class RemoteSource(ABC):
    """One configured source, connected on first use. Each method raises SourceUnreachable when
    the server cannot be reached or stops answering, SourceRefused when it refuses the login."""

    scheme: ClassVar[tuple[str, ...]]  # the URL schemes it reads (``imap``, ``imaps``)
    kind: ClassVar[str]  # the catalog's ``source`` column for its documents

    def __init__(self, url: str, password: Callable[[], str], timeout: float = 30.0,
                 options: Options = Options()) -> None:
        self.url = url
        self.password = password  # asked at each login: a changed keyring entry is taken at once
        self.timeout = timeout
        self.options = options

    @property
    @abstractmethod
    def prefix(self) -> str:
        """What every URI of this source's documents starts with, and no other's."""

    @abstractmethod
    def folders(self) -> Iterator[Folder]:
        """Every folder there is now, each once."""

    @abstractmethod
    def items(self, folder: Folder) -> list[Item] | None:
        """Every item of ``folder``; None when it cannot be listed now (what is indexed of it stays)."""

    @abstractmethod
    def fetch(self, folder: Folder, items: Iterable[Item], max_bytes: int
              ) -> Iterator[tuple[Item, bytes | ConversionError | None]]:
        """Each item with its bytes (and its size and mtime filled in), or why it cannot be read
        (SizeLimit over ``max_bytes``); None for an item gone since it was listed."""

    @abstractmethod
    def original(self, uri: str) -> tuple[str, bytes]:
        """The name and bytes of the item ``uri`` as the server holds it now (what opening a hit
        shows); NotFound when it is gone."""

    def wait_for_change(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for the server to say something changed (IMAP IDLE): True if it
        did, False at the timeout. A source that cannot be told just sleeps. ``interrupt`` ends it."""
        import threading

        self._interrupted = threading.Event()
        return self._interrupted.wait(seconds) and False

    def interrupt(self) -> None:
        """End a ``wait_for_change`` from another thread."""
        event = getattr(self, "_interrupted", None)
        if event is not None:
            event.set()

    @abstractmethod
    def close(self) -> None:
        """Log out; the next call connects again."""
