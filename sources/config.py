"""The configured sources: the ``[[sources]]`` tables of the deskdex TOML config.

    [[sources]]
    url = "imaps://alice@mail.example.org"
    [[sources]]
    url = "smb://files.example.org/team/reports"
    user = "EXAMPLE\\alice"                  # SMB: the account to log in as (default: none in the URL)
    password_command = "pass show team-share" # else the password is in the system keyring

A password is never in the file: it is in the system keyring (``deskdex source add`` puts it
there), or printed by ``password_command``. A URL that carries one is refused.
Other tables and keys of the file are kept as they are when sources are added or removed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from urllib.parse import urlsplit, urlunsplit

from deskdex import settings
from deskdex.errors import ConfigError

from .registry import scheme_of


@dataclass
class SourceEntry:
    url: str
    user: str | None = None  # SMB's account when the URL has none (a domain's backslash fits badly in a URL)
    password_command: str | None = None  # a command printing the password on its first line
    interval: float | None = None  # seconds between two syncs; None: the setting source_interval

    @property
    def account(self) -> str:
        """Who logs in: the URL's user, else ``user``."""
        return urlsplit(self.url).username or self.user or ""


def normalise(url: str) -> str:
    """``url`` as it is kept (scheme and host in lower case, no trailing slash); ConfigError for
    a URL that is not a source's, has no host, or carries a password."""
    scheme_of(url)
    parts = urlsplit(url.strip())
    try:
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError as exc:
        raise ConfigError(f"{url!r}: {exc}") from exc
    if not parts.hostname:
        raise ConfigError(f"{url!r}: no server named (scheme://[user@]server[:port]/...)")
    if parts.password is not None:
        raise ConfigError(f"{parts.scheme}://{parts.username}:...@{parts.hostname}: a password in the URL would be "
                          "kept in the config file in clear; give the URL without it, and the password when asked "
                          "(or --password-command)")
    if parts.query or parts.fragment:
        raise ConfigError(f"{url!r}: a source's URL has no ?query or #fragment")
    netloc = parts.netloc.rpartition("@")
    host = netloc[2].lower()
    return urlunsplit((parts.scheme.lower(), netloc[0] + netloc[1] + host, parts.path.rstrip("/"), "", ""))


def load(path: str) -> list[SourceEntry]:
    """The sources of the config file at ``path`` (its tables were checked by the settings table)."""
    out = []
    for table in settings.typed(settings.read(path)).sources:
        entry = SourceEntry(**table)
        entry.url = normalise(entry.url)
        out.append(entry)
    return out


def find(path: str, url: str) -> SourceEntry | None:
    norm = normalise(url)
    return next((e for e in load(path) if e.url == norm), None)


def add(path: str, entry: SourceEntry) -> bool:
    """Add ``entry`` (or replace the source of its URL): True if it is new."""
    entry.url = normalise(entry.url)
    entries = load(path)
    kept = [e for e in entries if e.url != entry.url]
    _write(path, kept + [entry])
    return len(kept) == len(entries)


def remove(path: str, url: str) -> bool:
    """Remove the source of ``url``: False if there is none."""
    norm = normalise(url)
    entries = load(path)
    kept = [e for e in entries if e.url != norm]
    if len(kept) == len(entries):
        return False
    _write(path, kept)
    return True


def _write(path: str, entries: list[SourceEntry]) -> None:
    settings.save_file(path, {"sources": [{k: v for k, v in asdict(e).items() if v is not None} for e in entries]})
