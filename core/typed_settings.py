"""The settings as typed objects. GENERATED from the one settings table (``SETTINGS`` in
core/settings.py) by ``.venv/bin/python -m tests.settings_codegen``: do not edit by hand;
tests/test_typed_settings.py fails while this file and the table differ.

``Config.settings`` (deskdex.settings) is a ``Settings`` whose values were checked against the table
(type and bounds) when it was made; each table of the file is a nested object
(``cfg.settings.crawl.delay``). Lists are tuples and tables read-only mappings: a daemon's threads
share one ``Settings``, and a change is a new one (``Config.given_over``), never an edit in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Required, TypedDict


class Site(TypedDict, total=False):
    """One ``[[crawl.sites]]`` table, as ``deskdex crawl add`` writes it (webcrawl/config.py CrawlSite)."""

    url: Required[str]
    scope: str
    max_pages: int
    max_depth: int
    topic: str
    allow_private: bool


class SourceTable(TypedDict, total=False):
    """One ``[[sources]]`` table, as ``deskdex source add`` writes it (sources/config.py SourceEntry)."""

    url: Required[str]
    user: str
    password_command: str
    interval: float


@dataclass(frozen=True, slots=True, kw_only=True)
class OcrTable:
    """The ``[ocr]`` table of the config file."""

    enabled: bool = True
    """Read the words in images and in the pages of PDFs that are pictures (scans, faxes) with Tesseract (OCR),
    after every other file in the queue. Allowed: true or false."""
    languages: tuple[str, ...] = ()
    """Tesseract's language codes to read (`eng`, `deu`, `fra`...). Empty: every language installed
    (`tesseract-ocr-LANG` packages), English first. Allowed: Tesseract language codes."""
    min_pixels: int = 70000
    """Images with fewer pixels than this (width x height) are not read: icons, bullets, buttons (a 256 x 256 icon
    has 65536). Allowed: 0 to 1000000000."""
    time_limit: float = 30.0
    """Seconds of OCR one file may take (at most three quarters of `time_limit`); pages past it are left, and the
    document says `ocr: partial`. Allowed: 1 to 86400."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CrawlTable:
    """The ``[crawl]`` table of the config file."""

    contact: str = "https://github.com/deskdex/deskdex"
    """A URL or address about your crawler, sent in its User-Agent so site owners can reach you. Allowed: a URL or
    an address, not empty."""
    delay: float = 1.0
    """Seconds between two requests to one site (more if its robots.txt asks). Allowed: 0 to 3600."""
    allow_private_addresses: bool = False
    """Crawl private, loopback and link-local addresses too (off: a page cannot make the crawler reach your
    network). Allowed: true or false."""
    max_pages: int = 1000
    """Pages one crawl of a site fetches at most. Allowed: 1 to 1000000000."""
    max_depth: int = 5
    """Links followed away from a seed at most. Allowed: 0 to 1000."""
    timeout: float = 10.0
    """Seconds a request may wait to connect, and between two reads of its answer. Allowed: 0.1 to 3600."""
    deadline: float = 60.0
    """Seconds one request may take in all, its whole answer included (a page that trickles in byte by byte fails
    with reason `timeout`). Allowed: 0.1 to 86400."""
    max_mb: int = 10
    """Pages larger than this (MiB) are not fetched whole. Allowed: 1 to 10240."""
    shard_timeout: float = 120.0
    """With `deskdex crawl --shard I/N --broker`: seconds after which a shard of the crawl not heard from (stopped,
    or never started) is taken as gone: the others end without it, and the links handed to it wait in Redis until
    it is run again. Allowed: 1 to 604800."""
    revisit_budget_per_day: float = 1000.0
    """Known pages the daemon may fetch again each day to keep them fresh. Allowed: 0 to 1000000000."""
    sites: tuple[Site, ...] = ()
    """The crawls the daemon keeps fresh: tables with `url`, `scope` (host, domain or prefix), and optional
    `max_pages`, `max_depth`, `topic`, `allow_private` (`deskdex crawl add`; `allow_private = true`: added with
    --allow-private, its crawls may reach private addresses). Allowed: tables with url (http or https), scope
    (host, domain or prefix), max_pages, max_depth, topic, allow_private."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Every setting, typed (deskdex.settings ``Config.settings``)."""

    folders: tuple[str, ...] = ()
    """Folders to index and watch. Empty: the Documents folder if it exists, else the home folder. Allowed: folders
    (not empty)."""
    exclude: tuple[str, ...] = ()
    """Extra gitignore-style patterns to leave out, added to the built-in exclusions. Allowed: gitignore-style
    patterns."""
    workers: int = 2
    """Converter processes running at once (each at idle priority in the daemon). Allowed: 1 to 256."""
    time_limit: float = 60.0
    """Seconds one file may take to convert before it is recorded as timed out. Allowed: 1 to 86400."""
    memory_limit_mb: int = 1024
    """Address space one converter process may use, in MiB. Allowed: 64 to 1048576."""
    max_file_mb: int = 256
    """Files larger than this are recorded as too large and not read. Allowed: 1 to 10485760."""
    retry_first: float = 60.0
    """Seconds before a file whose conversion failed in a way that may pass (timeout, crash, memory limit,
    unreadable, no converter) is tried again; doubled after each failure, up to a day. Allowed: 1 to 86400."""
    converters: Mapping[str, str] = field(default_factory=dict)
    """Converters of your own, or in place of the built-in ones: MIME type = "module:function" (a function of a
    Source and a MIME type that returns a Document), used when indexing files. Allowed: MIME type =
    "module:function"."""
    broker: str = ""
    """Redis URL (redis://[:password@]host:port/db) of a Celery broker: files are converted by `deskdex worker`
    processes, on this or other machines, that read them at the same paths; the index stays here. Empty:
    converted on this machine (docs/scale-out.md). Allowed: empty, or a redis:// or rediss:// URL with a host."""
    redelivery: float = 300.0
    """With a broker: seconds after which a file taken by a worker that died goes to another: the coordinator's
    setting governs, whatever the workers' (cluster/redeliver.py). Longer than time_limit. Allowed: 1 to 604800."""
    shards: tuple[str, ...] = ()
    """Other indexes searched with this one as one: the homes (or data folders) of shards written elsewhere, e.g. by
    `deskdex index --shard I/N`, or the http(s):// address of a shard another machine serves (`deskdex serve`)
    (docs/scale-out.md). Allowed: folders, or http(s):// URLs with a host."""
    shard: str = ""
    """I/N: this home is shard I of N of a collection: it indexes (the daemon, and `deskdex index`) only the files
    whose folder hashes to I; the others' homes hold the rest, searched as one through the setting shards. Empty:
    every file (docs/scale-out.md). Allowed: empty, or I/N with 0 <= I < N."""
    listen: str = ""
    """HOST:PORT where `deskdex serve` (and the daemon) answer other machines' merged searches of this index, with
    the setting token. Empty: nothing listens. Allowed: empty, or HOST:PORT."""
    web: str = ""
    """HOST:PORT where the daemon serves its search page and REST API (docs/web.md); port 0: any free one. A user's
    daemon: 127.0.0.1 only, opened with a secret token (`deskdex web`); the system daemon: every account, after a
    login with its system password. Empty: no web. Allowed: empty, or HOST:PORT."""
    web_session_hours: float = 12.0
    """The web UI: hours a login (or a token's cookie) lasts without use. Allowed: 0.01 to 720."""
    web_pam_service: str = "deskdex"
    """The system daemon's web login: the PAM service that checks passwords (/etc/pam.d/NAME; PAM takes
    /etc/pam.d/other where there is none). Allowed: a PAM service name."""
    tls_cert: str = ""
    """With listen or web: the certificate (PEM, its chain after it) to serve HTTPS with; empty: HTTP. Allowed: a
    file's path, or empty."""
    tls_key: str = ""
    """With tls_cert: its private key (PEM), when not in the certificate's file. Allowed: a file's path, or empty."""
    tls_ca: str = ""
    """The certificates (PEM) that https:// shards are checked against; empty: the system's. Allowed: a file's path,
    or empty."""
    token: str = ""
    """The secret a shard served with `listen` requires, and the one this home sends to the http(s):// shards it
    searches; at least 16 characters. Allowed: empty, or at least 16 characters."""
    commit_every: int = 1000
    """Documents between two commits while indexing. Allowed: 1 to 10000000."""
    commit_seconds: float = 30.0
    """Longest time between two commits while indexing (files, and crawled pages). Allowed: 0.1 to 86400."""
    dup_k: int = 4
    """Near-duplicates: most simhash bits two documents may differ in (docs/duplicates.md). Allowed: 0 to 16."""
    dup_min_similarity: float = 0.5
    """Near-duplicates: least share of word 5-gram fingerprints in common. Allowed: 0 to 1."""
    meaning: bool = True
    """Find documents by meaning too (docs/search.md, "Meaning"): passages of each text are embedded while indexing
    (a small model shipped with deskdex, offline) and a search lists the documents nearest in meaning that hold
    none of its words after those its words find, marked as related; false: no vectors are made, and those made
    are dropped. Allowed: true or false."""
    index_on_battery: bool = False
    """Keep indexing when the computer runs on battery (else wait for power). Allowed: true or false."""
    release_after: float = 20.0
    """Quiet seconds after which the daemon ends its converters and closes the index. Allowed: 0.1 to 604800."""
    warm_for: float = 600.0
    """Quiet seconds after which the daemon also ends the fork server that starts converters in tens of milliseconds
    (about 50 MiB), so a change after a short pause is searchable as fast as one in a burst. Allowed: 0.1 to
    604800."""
    cpu_budget: int = 100
    """Percent of the time the daemon may spend converting (a duty cycle; 100: no pause). Allowed: 1 to 100."""
    accounts: tuple[str, ...] = ()
    """Enterprise mode (`deskdex daemon --system`) only: the user accounts whose homes are indexed. Empty: every
    regular account (uid from UID_MIN of /etc/login.defs, a home and a login shell), including accounts added
    later. Allowed: account names."""
    connections_per_user: int = 32
    """Enterprise mode only: connections one local user may hold open to the daemon at once (root is not limited).
    Allowed: 1 to 1024."""
    searches_per_user: int = 2
    """Enterprise mode only: searches of one local user that run at once; the daemon's turns go to the users waiting
    longest with the fewest running. Allowed: 1 to 64."""
    requests_per_second: float = 50.0
    """Enterprise mode only: requests one local user may send each second, in bursts of up to twice as many (a token
    bucket). Allowed: 0 to 1000000."""
    source_interval: float = 300.0
    """Seconds between two syncs of a mail account or network share (`deskdex source add`); new mail in an IMAP
    INBOX (IDLE) and what a share's server notifies (CHANGE_NOTIFY) are indexed at once. Allowed: 10 to 86400."""
    sources: tuple[SourceTable, ...] = ()
    """Mail accounts and network shares to index (docs/sources.md): tables with `url` (imap://, imaps:// or smb://,
    without a password), and optional `user`, `password_command` (prints the password; else the system keyring
    has it) and `interval` (seconds). Allowed: tables with url (imap, imaps or smb, no password), user,
    password_command, interval."""
    sid_map: Mapping[str, str] = field(default_factory=dict)
    """Enterprise mode, network shares: the local account each Windows SID of a share's ACLs stands for
    ("S-1-5-21-...-1104" = "alice"), beside Samba's own Unix SIDs (S-1-22-1-UID, S-1-22-2-GID) and winbind's
    mapping where it runs (docs/sources.md). Allowed: SID = account name."""
    ocr: OcrTable = field(default_factory=OcrTable)
    """The ``[ocr]`` table."""
    crawl: CrawlTable = field(default_factory=CrawlTable)
    """The ``[crawl]`` table."""


# The class of each table's object, for deskdex.settings to build them from the table's values.
TABLES: dict[str, type[OcrTable | CrawlTable]] = {"ocr": OcrTable, "crawl": CrawlTable}
