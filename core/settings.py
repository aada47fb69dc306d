"""Settings: built-in defaults, then the TOML file under the config folder. There is no third layer:
command-line options such as ``deskdex index --workers`` apply to that one run and are not settings.

``SETTINGS`` is the one table of every setting, the ``[crawl]`` table's included: it validates the
file, and a test checks each setting's name, type and default against docs/configuration.md.
A setting of a table is named with its table (``crawl.delay``), as TOML's dotted keys would.

Each setting has bounds besides its type: numbers a least and a most value, strings and the items
of lists and tables a shape (``check``: an exclusion compiles with the matcher the scanner uses, a
URL has a scheme and a host...). ``allowed`` says them in words, and docs/configuration.md shows
them (tests/test_docs.py compares). Values are checked both ways: ``save`` refuses one that does
not fit before writing, and ``read`` refuses a file holding one. The daemon and ``deskdex index``
read leniently instead (``problems``): a value that does not fit is reported (the setting, the
value, what is allowed) and its default used, an item of a list that does not fit (one pattern of
``exclude``) is left out and the others kept, so a hand-edited file cannot keep them from running
(an enterprise-mode daemon serves every user of the machine).

Code reads settings through the typed API: ``cfg.settings.workers``, ``cfg.settings.crawl.delay``
(``Config.settings``, a ``Settings`` of deskdex.typed_settings, generated from ``SETTINGS``), whose
every read mypy knows the type of. There is no untyped read (``cfg["workers"]`` is a TypeError);
``cfg.values`` is the raw mapping the file gave, for writing it back.
"""

from __future__ import annotations

import os
import re
import tomllib
import warnings
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from .errors import ConfigError
from .paths import Home
from .protocol import CRAWL_SCOPES
from .typed_settings import TABLES as TABLE_TYPES
# The typed classes, importable from here (``X as X``: re-exported, mypy --strict).
from .typed_settings import CrawlTable as CrawlTable
from .typed_settings import OcrTable as OcrTable
from .typed_settings import Settings as Settings
from .typed_settings import Site as Site

# Why one value (a string, a list's item, a table's (key, value) entry) does not fit; None: it does.
Check = Callable[[Any], "str | None"]


def pattern_problem(pattern: str) -> str | None:
    """An exclusion compiled as the scanner compiles it (pipeline/scan.py Spec: pathspec's git
    matcher, re2 first, the pure-Python backend for names that are not UTF-8): a pattern that does
    not compile would stop every scan, the daemon's and ``deskdex index``'s (``!``, ``[z-a]``)."""
    import pathspec

    if not pattern.strip():
        return "an empty pattern excludes nothing"
    try:
        with warnings.catch_warnings():  # "possible nested set": a pattern that compiles is fine
            warnings.simplefilter("ignore")
            for backend in ("best", "simple"):
                pathspec.GitIgnoreSpec.from_lines([pattern], backend=backend).check_file("a/b")
    except Exception as exc:  # pathspec's, re's and re2's errors alike (re2.error is no ValueError)
        return f"{pattern!r} is not a gitignore-style pattern ({exc})"
    return None


def _not_empty(text: str) -> str | None:
    return "an empty string names nothing" if not text.strip() else "a NUL character" if "\0" in text else None


def _url(text: str, schemes: tuple[str, ...]) -> str | None:
    """Why ``text`` is not a URL of one of ``schemes`` with a host (and a valid port, if any)."""
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  (raises ValueError for a port out of range)
    except ValueError as exc:
        return f"{text!r} is not a URL ({exc})"
    if parts.scheme not in schemes or not parts.hostname:
        return f"{text!r} is not a {' or '.join(s + '://' for s in schemes)} URL with a host"
    return None


def _broker(text: str) -> str | None:
    return None if not text else _url(text, ("redis", "rediss"))


def _shard_place(text: str) -> str | None:
    """A place in ``shards``: a home or data folder, or a served shard's http(s):// address."""
    if text.startswith(("http://", "https://")):
        return _url(text, ("http", "https"))
    return _not_empty(text)


def _shard(text: str) -> str | None:
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    return None if not text or (m and int(m[1]) < int(m[2])) else f"{text!r} is not I/N with 0 <= I < N"


def _host_port(text: str, lowest: int = 1) -> tuple[str, int] | None:
    host, sep, port = text.rpartition(":")
    return (host.strip("[]"), int(port)) if sep and host and port.isdigit() and lowest <= int(port) < 65536 else None


def _listen(text: str) -> str | None:
    return None if not text or _host_port(text) else f"{text!r} is not HOST:PORT (a port from 1 to 65535)"


def _web(text: str) -> str | None:
    return None if not text or _host_port(text, 0) else f"{text!r} is not HOST:PORT (a port from 0 to 65535)"


def parse_listen(text: str, setting: str = "listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as (host, port); ConfigError for anything else.
    The setting web also takes port 0: any free port (the URL says which)."""
    where = _host_port(text, 0 if setting == "web" else 1)
    if where is None:
        raise ConfigError(f"setting {setting}: HOST:PORT, not {text!r}")
    return where


MIN_TOKEN = 16  # a served shard's secret: at least this long (daemon/shardserver.py refuses shorter)


def _token(text: str) -> str | None:
    return None if not text or len(text) >= MIN_TOKEN else f"a token has at least {MIN_TOKEN} characters"


def _converter(entry: tuple[str, str]) -> str | None:
    mime, target = entry
    if not re.fullmatch(r"[\w.+-]+/[\w.+-]+", mime):
        return f"{mime!r} is not a MIME type (type/subtype)"
    if not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", target):
        return f"{mime}: {target!r} is not module:function"
    return None


def _path(text: str) -> str | None:
    return "a NUL character" if "\0" in text else None


def _account(name: str) -> str | None:
    return None if re.fullmatch(r"[^\s:/]+", name) else f"{name!r} is not an account name"


def _language(code: str) -> str | None:
    return None if re.fullmatch(r"[A-Za-z0-9_/-]+", code) else f"{code!r} is not a Tesseract language code"


SITE_KEYS = {"url": str, "scope": str, "max_pages": int, "max_depth": int, "topic": str, "allow_private": bool}
SITE_REQUIRED = ("url",)


def _table_problem(table: dict[str, Any], keys: dict[str, type], required: tuple[str, ...], what: str) -> str | None:
    """Why one table of a list of tables (a [[crawl.sites]], a [[sources]]) does not fit ``keys``: a
    key unknown, a value of the wrong kind, a required key missing; None when it fits."""
    for key, value in table.items():
        kind = keys.get(key)
        if kind is None:
            return f"unknown key {key!r} in a {what} (known: {', '.join(keys)})"
        if not _of_kind(value, kind):
            wanted = {int: "an integer", float: "a number", bool: "true or false"}.get(kind, "a string")
            return f"a {what}'s {key} must be {wanted}, not {_shown(value)}"
    if missing := [k for k in required if k not in table]:
        return f"a {what} needs a {missing[0]}"
    return None


def _of_kind(value: Any, kind: type) -> bool:
    """Whether ``value`` is a TOML value of ``kind``: true/false only for a bool, an integer for a float too."""
    if isinstance(value, bool) != (kind is bool):
        return False
    return isinstance(value, kind) or (kind is float and isinstance(value, int))


def _site(site: dict[str, Any]) -> str | None:
    """One [[crawl.sites]] table, as ``deskdex crawl add`` writes it (webcrawl/config.py CrawlSite)."""
    if (why := _table_problem(site, SITE_KEYS, SITE_REQUIRED, "site")) is not None:
        return why
    if (why := _url(site["url"], ("http", "https"))) is not None:
        return why
    if site.get("scope", "host") not in CRAWL_SCOPES:
        return f"a site's scope is one of {', '.join(CRAWL_SCOPES)}, not {site['scope']!r}"
    if site.get("max_pages", 1) < 1 or site.get("max_depth", 0) < 0:
        return "a site's max_pages is 1 or more, its max_depth 0 or more"
    return None


SOURCE_KEYS = {"url": str, "user": str, "password_command": str, "interval": float}
SOURCE_REQUIRED = ("url",)
SOURCE_SCHEMES = ("imap", "imaps", "smb")  # deskdex.sources' registry reads these (tests/test_sources.py)


def _source(source: dict[str, Any]) -> str | None:
    """One [[sources]] table, as ``deskdex source add`` writes it (sources/config.py SourceEntry)."""
    if (why := _table_problem(source, SOURCE_KEYS, SOURCE_REQUIRED, "source")) is not None:
        return why
    if (why := _url(source["url"], SOURCE_SCHEMES)) is not None:
        return why
    if urlsplit(source["url"]).password is not None:
        return "a source's url carries no password (the keyring or password_command has it)"
    if not 10 <= source.get("interval", 10) <= 86400:
        return "a source's interval is 10 to 86400 seconds"
    return None


def _sid_entry(entry: tuple[str, str]) -> str | None:
    sid, account = entry
    if not re.fullmatch(r"S-1-\d+(-\d+)+", sid):
        return f"{sid!r} is not a Windows SID (S-1-5-21-...)"
    return _account(account)


@dataclass(frozen=True, slots=True)
class Setting:
    name: str  # "workers", or "crawl.delay" for a key of the [crawl] table
    default: Any
    help: str
    items: type | None = None  # a list's elements, or a table's values, must be of this type
    low: float | None = None  # a number's least value
    high: float | None = None  # a number's most value
    check: Check | None = None  # why a string, a list's item or a table's entry does not fit
    shape: str = ""  # what ``check`` wants, in words (docs/configuration.md's "allowed" column)

    @property
    def kind(self) -> type:
        """The TOML type a value must have (an integer is accepted where a float is wanted)."""
        return type(self.default)

    @property
    def table(self) -> str:
        return self.name.rsplit(".", 1)[0] if "." in self.name else ""

    @property
    def key(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    @property
    def allowed(self) -> str:
        """The values this setting takes besides its type, in words (the docs show the same)."""
        if self.kind is bool:
            return "true or false"
        if self.low is not None and self.high is not None:
            return f"{_number(self.low)} to {_number(self.high)}"
        return self.shape or "any"


SETTINGS: tuple[Setting, ...] = (
    Setting("folders", [], "Folders to index and watch. Empty: the Documents folder if it exists, else the home folder.", str,
            check=_not_empty, shape="folders (not empty)"),
    Setting("exclude", [], "Extra gitignore-style patterns to leave out, added to the built-in exclusions.", str,
            check=pattern_problem, shape="gitignore-style patterns"),
    Setting("workers", 2, "Converter processes running at once (each at idle priority in the daemon).",
            low=1, high=256),
    Setting("time_limit", 60.0, "Seconds one file may take to convert before it is recorded as timed out.",
            low=1, high=86400),
    Setting("memory_limit_mb", 1024, "Address space one converter process may use, in MiB.", low=64, high=1048576),
    Setting("max_file_mb", 256, "Files larger than this are recorded as too large and not read.", low=1, high=10485760),
    Setting("retry_first", 60.0, "Seconds before a file whose conversion failed in a way that may pass (timeout, "
                                 "crash, memory limit, unreadable, no converter) is tried again; doubled after "
                                 "each failure, up to a day.", low=1, high=86400),
    Setting("converters", {}, "Converters of your own, or in place of the built-in ones: MIME type = "
                              "\"module:function\" (a function of a Source and a MIME type that returns a "
                              "Document), used when indexing files.", str,
            check=_converter, shape="MIME type = \"module:function\""),
    Setting("broker", "", "Redis URL (redis://[:password@]host:port/db) of a Celery broker: files are converted by "
                          "`deskdex worker` processes, on this or other machines, that read them at the same paths; "
                          "the index stays here. Empty: converted on this machine (docs/scale-out.md).",
            check=_broker, shape="empty, or a redis:// or rediss:// URL with a host"),
    Setting("redelivery", 300.0, "With a broker: seconds after which a file taken by a worker that died goes to "
                                 "another: the coordinator's setting governs, whatever the workers' (cluster/redeliver.py). "
                                 "Longer than time_limit.", low=1, high=604800),
    Setting("shards", [], "Other indexes searched with this one as one: the homes (or data folders) of shards "
                          "written elsewhere, e.g. by `deskdex index --shard I/N`, or the http(s):// address of a "
                          "shard another machine serves (`deskdex serve`) (docs/scale-out.md).", str,
            check=_shard_place, shape="folders, or http(s):// URLs with a host"),
    Setting("shard", "", "I/N: this home is shard I of N of a collection: it indexes (the daemon, and `deskdex "
                         "index`) only the files whose folder hashes to I; the others' homes hold the rest, searched "
                         "as one through the setting shards. Empty: every file (docs/scale-out.md).",
            check=_shard, shape="empty, or I/N with 0 <= I < N"),
    Setting("listen", "", "HOST:PORT where `deskdex serve` (and the daemon) answer other machines' merged "
                          "searches of this index, with the setting token. Empty: nothing listens.",
            check=_listen, shape="empty, or HOST:PORT"),
    Setting("web", "", "HOST:PORT where the daemon serves its search page and REST API (docs/web.md); port 0: "
                       "any free one. A user's daemon: 127.0.0.1 only, opened with a secret token (`deskdex web`); "
                       "the system daemon: every account, after a login with its system password. Empty: no web.",
            check=_web, shape="empty, or HOST:PORT"),
    Setting("web_session_hours", 12.0, "The web UI: hours a login (or a token's cookie) lasts without use.",
            low=0.01, high=720),
    Setting("web_pam_service", "deskdex", "The system daemon's web login: the PAM service that checks passwords "
                                          "(/etc/pam.d/NAME; PAM takes /etc/pam.d/other where there is none).",
            check=lambda t: None if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", t) else f"{t!r} is not a PAM service name",
            shape="a PAM service name"),
    Setting("tls_cert", "", "With listen or web: the certificate (PEM, its chain after it) to serve HTTPS with; "
                            "empty: HTTP.",
            check=_path, shape="a file's path, or empty"),
    Setting("tls_key", "", "With tls_cert: its private key (PEM), when not in the certificate's file.",
            check=_path, shape="a file's path, or empty"),
    Setting("tls_ca", "", "The certificates (PEM) that https:// shards are checked against; empty: the system's.",
            check=_path, shape="a file's path, or empty"),
    Setting("token", "", "The secret a shard served with `listen` requires, and the one this home sends to the "
                         "http(s):// shards it searches; at least 16 characters.",
            check=_token, shape="empty, or at least 16 characters"),
    Setting("commit_every", 1000, "Documents between two commits while indexing.", low=1, high=10000000),
    Setting("commit_seconds", 30.0, "Longest time between two commits while indexing (files, and crawled pages).",
            low=0.1, high=86400),
    Setting("dup_k", 4, "Near-duplicates: most simhash bits two documents may differ in (docs/duplicates.md).",
            low=0, high=16),
    Setting("dup_min_similarity", 0.5, "Near-duplicates: least share of word 5-gram fingerprints in common.",
            low=0, high=1),
    Setting("meaning", True, "Find documents by meaning too (docs/search.md, \"Meaning\"): passages of each text "
                             "are embedded while indexing (a small model shipped with deskdex, offline) and a search "
                             "lists the documents nearest in meaning that hold none of its words after those its "
                             "words find, marked as related; false: no vectors are made, and those made are dropped."),
    Setting("index_on_battery", False, "Keep indexing when the computer runs on battery (else wait for power)."),
    Setting("release_after", 20.0, "Quiet seconds after which the daemon ends its converters and closes the index.",
            low=0.1, high=604800),
    Setting("warm_for", 600.0, "Quiet seconds after which the daemon also ends the fork server that starts "
                               "converters in tens of milliseconds (about 50 MiB), so a change after a short "
                               "pause is searchable as fast as one in a burst.", low=0.1, high=604800),
    Setting("cpu_budget", 100, "Percent of the time the daemon may spend converting (a duty cycle; 100: no pause).",
            low=1, high=100),
    Setting("accounts", [], "Enterprise mode (`deskdex daemon --system`) only: the user accounts whose homes are "
                            "indexed. Empty: every regular account (uid from UID_MIN of /etc/login.defs, a home "
                            "and a login shell), including accounts added later.", str,
            check=_account, shape="account names"),
    Setting("connections_per_user", 32, "Enterprise mode only: connections one local user may hold open to the "
                                        "daemon at once (root is not limited).", low=1, high=1024),
    Setting("searches_per_user", 2, "Enterprise mode only: searches of one local user that run at once; the "
                                    "daemon's turns go to the users waiting longest with the fewest running.",
            low=1, high=64),
    Setting("requests_per_second", 50.0, "Enterprise mode only: requests one local user may send each second, "
                                         "in bursts of up to twice as many (a token bucket).", low=0, high=1000000),
    Setting("ocr.enabled", True, "Read the words in images and in the pages of PDFs that are pictures (scans, faxes) "
                                 "with Tesseract (OCR), after every other file in the queue."),
    Setting("ocr.languages", [], "Tesseract's language codes to read (`eng`, `deu`, `fra`...). Empty: every language "
                                 "installed (`tesseract-ocr-LANG` packages), English first.", str,
            check=_language, shape="Tesseract language codes"),
    Setting("ocr.min_pixels", 70000, "Images with fewer pixels than this (width x height) are not read: icons, "
                                     "bullets, buttons (a 256 x 256 icon has 65536).", low=0, high=1000000000),
    Setting("ocr.time_limit", 30.0, "Seconds of OCR one file may take (at most three quarters of `time_limit`); "
                                    "pages past it are left, and the document says `ocr: partial`.", low=1, high=86400),
    Setting("source_interval", 300.0, "Seconds between two syncs of a mail account or network share (`deskdex source "
                                      "add`); new mail in an IMAP INBOX (IDLE) and what a share's server notifies "
                                      "(CHANGE_NOTIFY) are indexed at once.", low=10, high=86400),
    Setting("sources", [], "Mail accounts and network shares to index (docs/sources.md): tables with `url` "
                           "(imap://, imaps:// or smb://, without a password), and optional `user`, `password_command` "
                           "(prints the password; else the system keyring has it) and `interval` (seconds).", dict,
            check=_source,
            shape="tables with url (imap, imaps or smb, no password), user, password_command, interval"),
    Setting("sid_map", {}, "Enterprise mode, network shares: the local account each Windows SID of a share's ACLs "
                           "stands for (\"S-1-5-21-...-1104\" = \"alice\"), beside Samba's own Unix SIDs (S-1-22-1-UID, "
                           "S-1-22-2-GID) and winbind's mapping where it runs (docs/sources.md).", str,
            check=_sid_entry, shape="SID = account name"),
    Setting("crawl.contact", "https://github.com/deskdex/deskdex",
            "A URL or address about your crawler, sent in its User-Agent so site owners can reach you.",
            check=_not_empty, shape="a URL or an address, not empty"),
    Setting("crawl.delay", 1.0, "Seconds between two requests to one site (more if its robots.txt asks).",
            low=0, high=3600),
    Setting("crawl.allow_private_addresses", False,
            "Crawl private, loopback and link-local addresses too (off: a page cannot make the crawler reach "
            "your network)."),
    Setting("crawl.max_pages", 1000, "Pages one crawl of a site fetches at most.", low=1, high=1000000000),
    Setting("crawl.max_depth", 5, "Links followed away from a seed at most.", low=0, high=1000),
    Setting("crawl.timeout", 10.0, "Seconds a request may wait to connect, and between two reads of its answer.",
            low=0.1, high=3600),
    Setting("crawl.deadline", 60.0, "Seconds one request may take in all, its whole answer included (a page that "
                                    "trickles in byte by byte fails with reason `timeout`).", low=0.1, high=86400),
    Setting("crawl.max_mb", 10, "Pages larger than this (MiB) are not fetched whole.", low=1, high=10240),
    Setting("crawl.shard_timeout", 120.0, "With `deskdex crawl --shard I/N --broker`: seconds after which a shard of "
                                          "the crawl not heard from (stopped, or never started) is taken as gone: "
                                          "the others end without it, and the links handed to it wait in Redis "
                                          "until it is run again.", low=1, high=604800),
    Setting("crawl.revisit_budget_per_day", 1000.0, "Known pages the daemon may fetch again each day to keep them fresh.",
            low=0, high=1000000000),
    Setting("crawl.sites", [], "The crawls the daemon keeps fresh: tables with `url`, `scope` (host, domain or "
                               "prefix), and optional `max_pages`, `max_depth`, `topic`, `allow_private` (`deskdex crawl add`; "
                               "`allow_private = true`: added with --allow-private, its crawls may reach private "
                               "addresses).", dict,
            check=_site,
            shape="tables with url (http or https), scope (host, domain or prefix), max_pages, max_depth, topic, "
                  "allow_private"),
)
BY_NAME = {s.name: s for s in SETTINGS}
for _s in SETTINGS:  # every number has bounds, every string and list a shape
    assert (_s.low is not None and _s.high is not None) == (_s.kind in (int, float)), _s.name
    assert (_s.check is not None) == bool(_s.shape), _s.name
DEFAULTS = {s.name: s.default for s in SETTINGS}
TABLES = frozenset(s.table for s in SETTINGS if s.table)


def typed(values: Mapping[str, Any]) -> Settings:
    """The typed settings of ``values`` (setting name → value; a setting missing: its default),
    each checked for its type and bounds: ConfigError naming the setting, the value and what is
    allowed. Values from ``read`` or ``parse`` always pass (they were checked, or left at their
    defaults); this guards the values code puts together (``--broker``, a daemon's ``given_over``).
    The shapes of a list's items are not checked again: ``read`` and ``save`` did, each pattern
    compiled, and doing it for every ``Config`` would compile them twice."""
    top: dict[str, Any] = {}
    tables: dict[str, dict[str, Any]] = {}
    for s in SETTINGS:
        value = values.get(s.name, s.default)
        why = _problem(value, s)
        if why is not None:
            raise ConfigError(f"{s.name} {why}")
        (tables.setdefault(s.table, {}) if s.table else top)[s.key] = _frozen(value, s)
    top.update({t: TABLE_TYPES[t](**v) for t, v in tables.items()})
    return Settings(**top)


def _frozen(value: Any, setting: Setting) -> Any:
    """A checked value as the typed object holds it: lists as tuples, tables as read-only mappings
    (each ``[[crawl.sites]]`` table a copy), an integer given for a number as a float."""
    if isinstance(value, list):
        return tuple(dict(v) if isinstance(v, dict) else v for v in value)
    if isinstance(value, dict):
        return MappingProxyType(dict(value))
    return float(value) if setting.kind is float else value


@dataclass(frozen=True)
class Config:
    """The settings of a home: ``settings``, typed (``cfg.settings.workers``), and the home."""

    values: Mapping[str, Any]
    home: Home
    # Settings given on the command line for this run (``--broker``): they stand over the file's
    # values whenever a running daemon reads its file again, so a hand edit cannot drop them.
    given: Mapping[str, Any] = field(default_factory=dict)
    # The typed API: every read through it has a type mypy checks. Made from ``values`` (checked:
    # ConfigError for a value of the wrong type or out of bounds, naming the setting).
    settings: Settings = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A frozen dataclass's own fields. A list given as a tuple (code that took it from the typed
        # API) is held as the list a read of the file gives, so the two compare equal.
        if any(isinstance(v, tuple) for v in self.values.values()):
            lists = {k: list(v) if isinstance(v, tuple) else v for k, v in self.values.items()}
            object.__setattr__(self, "values", lists)
        object.__setattr__(self, "settings", typed(self.values))

    def given_over(self, values: Mapping[str, Any]) -> Config:
        """The settings ``values`` read anew from the file, with this run's command-line ones over them."""
        return Config({**values, **self.given}, self.home, self.given)

    def configured_folders(self) -> list[str]:
        """The ``folders`` setting, as absolute paths."""
        return [os.path.abspath(os.path.expanduser(f)) for f in self.settings.folders]

    def folders(self) -> list[str]:
        """The folders a user's daemon watches: the configured ones, else the default one."""
        return self.configured_folders() or [default_folder()]


def default_folder() -> str:
    import platformdirs

    docs = platformdirs.user_documents_dir()
    return docs if os.path.isdir(docs) and docs != os.path.expanduser("~") else os.path.expanduser("~")


def read(path: str, problems: list[str] | None = None) -> dict[str, Any]:
    """Every setting's value from the file at ``path`` (defaults where it is silent), checked
    against the table: an unknown setting, a value of the wrong type or out of its bounds names
    the file, the setting, the value and what is allowed, in a ConfigError, or (given
    ``problems``) appended to it, the setting's default used; a list's or table's items that do
    not fit are left out, the others kept. A file that is not TOML is a ConfigError either way."""
    return values_of(_read_toml(path), path, problems)


def parse(raw: bytes, path: str, problems: list[str] | None = None) -> dict[str, Any]:
    """``read`` for the bytes ``raw`` of the config file at ``path`` (named in messages)."""
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return values_of(data, path, problems)


def values_of(data: dict[str, Any], path: str, problems: list[str] | None = None) -> dict[str, Any]:
    """``read`` for the TOML ``data`` of the file at ``path``."""
    values = dict(DEFAULTS)
    found: list[str] = []
    for name, value in _flatten(data, path, found).items():
        setting = BY_NAME.get(name)
        if setting is None:
            found.append(f"{path}: unknown setting {name!r} (ignored)")
            continue
        why = _problem(value, setting)
        if why is not None:
            found.append(f"{path}: {name} {why} (the default {_shown(setting.default)} is used)")
            continue
        bad = _bad_items(value, setting)
        for _, item_why in bad:
            found.append(f"{path}: {name}: {item_why} (left out)")
        values[name] = _without(value, [item for item, _ in bad]) if bad else \
            float(value) if setting.kind is float else value
    if found and problems is None:
        raise ConfigError(found[0].rsplit(" (", 1)[0])
    if problems is not None:
        problems.extend(found)
    return values


def load(home: Home, problems: list[str] | None = None) -> Config:
    """The settings of ``home``; with ``problems``, leniently (see ``read``)."""
    return Config(read(home.config_file, problems), home)


def _shown(value: Any) -> str:
    """A value in a message, cut short: a hand-edited file may hold a long one."""
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check(name: str, value: Any) -> None:
    """Refuse, with a ConfigError that names the setting, the value and what is allowed, a value
    ``save`` would not write: what a command is about to save is checked before anything."""
    setting = BY_NAME.get(name)
    if setting is None:
        raise ConfigError(f"unknown setting {name!r}")
    why = _problem(value, setting) or next((w for _, w in _bad_items(value, setting)), None)
    if why is not None:
        raise ConfigError(f"{name} {why}" if why.startswith("must be") else f"{name}: {why}")
    for text in value if isinstance(value, list) else [value]:
        if isinstance(text, str) and not _is_text(text):
            # A name with bytes that are not UTF-8: TOML holds text only.
            raise ConfigError(f"{name}: {text.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8, and "
                              f"the config file holds text only; rename it, or use the folder above it")


def save(home: Home, updates: Mapping[str, Any]) -> None:
    """Write ``updates`` (setting name → value) into the config file, keeping everything else in it."""
    save_file(home.config_file, updates)


def save_file(path: str, updates: Mapping[str, Any]) -> None:
    """``save`` for the config file at ``path``."""
    import tomli_w

    for name, value in updates.items():
        check(name, value)
    data = _read_toml(path)
    for name, value in updates.items():
        table = data
        for part in name.split(".")[:-1]:
            table = table.setdefault(part, {})
        table[name.rsplit(".", 1)[-1]] = value
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        tomli_w.dump(data, f)
    os.replace(tmp, path)  # a crash never leaves half a config file


def _read_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def _flatten(data: dict[str, Any], path: str, problems: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in TABLES:
            if not isinstance(value, dict):
                problems.append(f"{path}: [{key}] must be a table, not {_shown(value)} (the defaults are used)")
                continue
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def _fits(value: Any, setting: Setting) -> bool:
    if not _of_kind(value, setting.kind):
        return False
    # Only list and table settings have items (and value is one, being of the setting's kind).
    items = setting.items
    if items is None:
        return True
    values = list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else [None]
    return all(isinstance(v, items) for v in values)


def _problem(value: Any, setting: Setting) -> str | None:
    """Why ``value`` as a whole does not fit ``setting`` ("must be ..., not ..."); None if it does
    (its items, a list's or a table's, are checked by ``_bad_items``)."""
    if not _fits(value, setting):
        return f"must be {_describe(setting)}, not {_shown(value)}"
    if setting.low is not None and setting.high is not None and not setting.low <= value <= setting.high:
        return f"must be from {setting.allowed}, not {_shown(value)}"
    if isinstance(value, str) and setting.check is not None and (why := setting.check(value)) is not None:
        return f"must be {setting.shape}, not {_shown(value)} ({why})"
    return None


def _bad_items(value: Any, setting: Setting) -> list[tuple[Any, str]]:
    """The items of a list (the keys of a table) that ``setting.check`` refuses, with why."""
    if setting.check is None or not isinstance(value, (list, dict)):
        return []
    entries = value.items() if isinstance(value, dict) else enumerate(value)
    found = [(key, setting.check((key, item) if isinstance(value, dict) else item)) for key, item in entries]
    return [(key, why) for key, why in found if why is not None]


def _without(value: Any, bad: list[Any]) -> Any:
    """A list or a table without the items (indexes or keys) in ``bad``."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in bad}
    return [item for i, item in enumerate(value) if i not in bad]


def _number(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


def _describe(setting: Setting) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "a table"}
    kind = names.get(setting.kind, setting.kind.__name__)
    return f"{kind} of {names[setting.items].split()[-1]}s" if setting.items is not None else kind
