"""Settings: built-in defaults, then the TOML file under the config folder. There is no third layer:
command-line options such as ``deskdex index --workers`` apply to that one run and are not settings.

``SETTINGS`` is the one table of every setting, the ``[crawl]`` table's included: it validates the
file, and a test checks each setting's name, type and default against docs/configuration.md.
A setting of a table is named with its table (``crawl.delay``), as TOML's dotted keys would.

Values are checked both ways: ``save`` refuses one that does not fit before writing, and ``read``
refuses a file holding one. The daemon reads leniently instead (``problems``): a setting that does
not fit is reported and its default used, so a hand-edited file cannot keep it from starting (an
enterprise-mode daemon serves every user of the machine).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from typing import Any, Mapping

from .errors import ConfigError
from .paths import Home


@dataclass(frozen=True, slots=True)
class Setting:
    name: str  # "workers", or "crawl.delay" for a key of the [crawl] table
    default: Any
    help: str
    items: type | None = None  # a list's elements, or a table's values, must be of this type

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


SETTINGS: tuple[Setting, ...] = (
    Setting("folders", [], "Folders to index and watch. Empty: the Documents folder if it exists, else the home folder.", str),
    Setting("exclude", [], "Extra gitignore-style patterns to leave out, added to the built-in exclusions.", str),
    Setting("workers", 2, "Converter processes running at once (each at idle priority in the daemon)."),
    Setting("time_limit", 60.0, "Seconds one file may take to convert before it is recorded as timed out."),
    Setting("memory_limit_mb", 1024, "Address space one converter process may use, in MiB."),
    Setting("max_file_mb", 256, "Files larger than this are recorded as too large and not read."),
    Setting("retry_first", 60.0, "Seconds before a file whose conversion failed in a way that may pass (timeout, "
                                 "crash, memory limit, unreadable, no converter) is tried again; doubled after "
                                 "each failure, up to a day."),
    Setting("converters", {}, "Converters of your own, or in place of the built-in ones: MIME type = "
                              "\"module:function\" (a function of a Source and a MIME type that returns a "
                              "Document), used when indexing files.", str),
    Setting("broker", "", "Redis URL (redis://[:password@]host:port/db) of a Celery broker: files are converted by "
                          "`deskdex worker` processes, on this or other machines, that read them at the same paths; "
                          "the index stays here. Empty: converted on this machine (docs/scale-out.md)."),
    Setting("redelivery", 300.0, "With a broker: seconds after which a file taken by a worker that died goes to "
                                 "another (Redis's visibility timeout). Longer than time_limit."),
    Setting("shards", [], "Other indexes searched with this one as one: the homes (or data folders) of shards "
                          "written elsewhere, e.g. by `deskdex index --shard I/N`, or the http(s):// address of a "
                          "shard another machine serves (`deskdex serve`) (docs/scale-out.md).", str),
    Setting("shard", "", "I/N: this home is shard I of N of a collection: it indexes (the daemon, and `deskdex "
                         "index`) only the files whose folder hashes to I; the others' homes hold the rest, searched "
                         "as one through the setting shards. Empty: every file (docs/scale-out.md)."),
    Setting("listen", "", "HOST:PORT where `deskdex serve` (and the daemon) answer other machines' merged "
                          "searches of this index, with the setting token. Empty: nothing listens."),
    Setting("tls_cert", "", "With listen: the certificate (PEM, its chain after it) to serve HTTPS with; empty: HTTP."),
    Setting("tls_key", "", "With tls_cert: its private key (PEM), when not in the certificate's file."),
    Setting("tls_ca", "", "The certificates (PEM) that https:// shards are checked against; empty: the system's."),
    Setting("token", "", "The secret a shard served with `listen` requires, and the one this home sends to the "
                         "http(s):// shards it searches; at least 16 characters."),
    Setting("commit_every", 1000, "Documents between two commits while indexing."),
    Setting("commit_seconds", 30.0, "Longest time between two commits while indexing (files, and crawled pages)."),
    Setting("dup_k", 4, "Near-duplicates: most simhash bits two documents may differ in (docs/duplicates.md)."),
    Setting("dup_min_similarity", 0.5, "Near-duplicates: least share of word 5-gram fingerprints in common."),
    Setting("index_on_battery", False, "Keep indexing when the computer runs on battery (else wait for power)."),
    Setting("release_after", 20.0, "Quiet seconds after which the daemon ends its converters and closes the index."),
    Setting("warm_for", 600.0, "Quiet seconds after which the daemon also ends the fork server that starts "
                               "converters in tens of milliseconds (about 50 MiB), so a change after a short "
                               "pause is searchable as fast as one in a burst."),
    Setting("cpu_budget", 100, "Percent of the time the daemon may spend converting (a duty cycle; 100: no pause)."),
    Setting("accounts", [], "Enterprise mode (`deskdex daemon --system`) only: the user accounts whose homes are "
                            "indexed. Empty: every regular account (uid from UID_MIN of /etc/login.defs, a home "
                            "and a login shell), including accounts added later.", str),
    Setting("connections_per_user", 32, "Enterprise mode only: connections one local user may hold open to the "
                                        "daemon at once (root is not limited)."),
    Setting("searches_per_user", 2, "Enterprise mode only: searches of one local user that run at once; the "
                                    "daemon's turns go to the users waiting longest with the fewest running."),
    Setting("requests_per_second", 50.0, "Enterprise mode only: requests one local user may send each second, "
                                         "in bursts of up to twice as many (a token bucket)."),
    Setting("ocr.enabled", True, "Read the words in images and in the pages of PDFs that are pictures (scans, faxes) "
                                 "with Tesseract (OCR), after every other file in the queue."),
    Setting("ocr.languages", [], "Tesseract's language codes to read (`eng`, `deu`, `fra`...). Empty: every language "
                                 "installed (`tesseract-ocr-LANG` packages), English first.", str),
    Setting("ocr.min_pixels", 70000, "Images with fewer pixels than this (width x height) are not read: icons, "
                                     "bullets, buttons (a 256 x 256 icon has 65536)."),
    Setting("ocr.time_limit", 30.0, "Seconds of OCR one file may take (at most three quarters of `time_limit`); "
                                    "pages past it are left, and the document says `ocr: partial`."),
    Setting("crawl.contact", "https://github.com/deskdex/deskdex",
            "A URL or address about your crawler, sent in its User-Agent so site owners can reach you."),
    Setting("crawl.delay", 1.0, "Seconds between two requests to one site (more if its robots.txt asks)."),
    Setting("crawl.allow_private_addresses", False,
            "Crawl private, loopback and link-local addresses too (off: a page cannot make the crawler reach "
            "your network)."),
    Setting("crawl.max_pages", 1000, "Pages one crawl of a site fetches at most."),
    Setting("crawl.max_depth", 5, "Links followed away from a seed at most."),
    Setting("crawl.timeout", 10.0, "Seconds a request may wait to connect, and between two reads of its answer."),
    Setting("crawl.deadline", 60.0, "Seconds one request may take in all, its whole answer included (a page that "
                                    "trickles in byte by byte fails with reason `timeout`)."),
    Setting("crawl.max_mb", 10, "Pages larger than this (MiB) are not fetched whole."),
    Setting("crawl.shard_timeout", 120.0, "With `deskdex crawl --shard I/N --broker`: seconds after which a shard of "
                                          "the crawl not heard from (stopped, or never started) is taken as gone: "
                                          "the others end without it, and the links handed to it wait in Redis "
                                          "until it is run again."),
    Setting("crawl.revisit_budget_per_day", 1000.0, "Known pages the daemon may fetch again each day to keep them fresh."),
    Setting("crawl.sites", [], "The crawls the daemon keeps fresh: tables with `url`, `scope` (host, domain or "
                               "prefix), and optional `max_pages`, `max_depth`, `topic` (`deskdex crawl add`).", dict),
)
BY_NAME = {s.name: s for s in SETTINGS}
DEFAULTS = {s.name: s.default for s in SETTINGS}
TABLES = frozenset(s.table for s in SETTINGS if s.table)


@dataclass(frozen=True)
class Config:
    """Every setting's value (``cfg["workers"]``, ``cfg["crawl.delay"]``) and the home it belongs to."""

    values: Mapping[str, Any]
    home: Home

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def configured_folders(self) -> list[str]:
        """The ``folders`` setting, as absolute paths."""
        return [os.path.abspath(os.path.expanduser(f)) for f in self["folders"]]

    def folders(self) -> list[str]:
        """The folders a user's daemon watches: the configured ones, else the default one."""
        return self.configured_folders() or [default_folder()]


def default_folder() -> str:
    import platformdirs

    docs = platformdirs.user_documents_dir()
    return docs if os.path.isdir(docs) and docs != os.path.expanduser("~") else os.path.expanduser("~")


def read(path: str, problems: list[str] | None = None) -> dict[str, Any]:
    """Every setting's value from the file at ``path`` (defaults where it is silent), checked
    against the table: an unknown setting or a value of the wrong type names the file and the
    setting, in a ConfigError, or (given ``problems``) appended to it, the setting's default used."""
    values = dict(DEFAULTS)
    for name, value in _flatten(_read_toml(path), path, problems).items():
        setting = BY_NAME.get(name)
        if setting is None:
            problem = f"{path}: unknown setting {name!r}"
        elif not _fits(value, setting):
            problem = f"{path}: {name} must be {_describe(setting)}, not {_shown(value)}"
        else:
            values[name] = float(value) if setting.kind is float else value
            continue
        if problems is None:
            raise ConfigError(problem)
        problems.append(problem + (" (ignored)" if setting is None else " (the default is used)"))
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


def save(home: Home, updates: Mapping[str, Any]) -> None:
    """Write ``updates`` (setting name → value) into the config file, keeping everything else in it."""
    save_file(home.config_file, updates)


def save_file(path: str, updates: Mapping[str, Any]) -> None:
    """``save`` for the config file at ``path``."""
    import tomli_w

    for name, value in updates.items():
        setting = BY_NAME.get(name)
        if setting is None:
            raise ConfigError(f"unknown setting {name!r}")
        if not _fits(value, setting):
            raise ConfigError(f"{name} must be {_describe(setting)}, not {value!r}")
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and not _is_text(text):
                # A name with bytes that are not UTF-8: TOML holds text only.
                raise ConfigError(f"{name}: {text.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8, and "
                                  f"the config file holds text only; rename it, or use the folder above it")
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


def _flatten(data: dict[str, Any], path: str, problems: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in TABLES:
            if not isinstance(value, dict):
                problem = f"{path}: [{key}] must be a table, not {_shown(value)}"
                if problems is None:
                    raise ConfigError(problem)
                problems.append(problem + " (the defaults are used)")
                continue
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def _fits(value: Any, setting: Setting) -> bool:
    kind = setting.kind
    if isinstance(value, bool) != (kind is bool):
        return False
    if not (isinstance(value, kind) or (kind is float and isinstance(value, int))):
        return False
    # Only list and table settings have items (and value is one, being of the setting's kind).
    items = setting.items
    if items is None:
        return True
    values = list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else [None]
    return all(isinstance(v, items) for v in values)


def _describe(setting: Setting) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "a table"}
    kind = names.get(setting.kind, setting.kind.__name__)
    return f"{kind} of {names[setting.items].split()[-1]}s" if setting.items is not None else kind
