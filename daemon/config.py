"""Settings in layers: built-in defaults < the TOML file under the config dir < the command line.

``SETTINGS`` is the one table of settings: it validates the file, fills ``deskdex config``
and docs/configuration.md, and a test checks the docs name every one of them.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from typing import Any


from converters.errors import ConfigError
from converters.limits import Limits

from .paths import Home


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: Any
    help: str


SETTINGS: tuple[Setting, ...] = (
    Setting("folders", [], "Folders to index and watch. Empty: the Documents folder if it exists, else the home folder."),
    Setting("exclude", [], "Extra gitignore-style patterns to leave out, added to the built-in exclusions."),
    Setting("workers", 2, "Converter processes running at once (each at idle priority in the daemon)."),
    Setting("time_limit", 60.0, "Seconds one file may take to convert before it is recorded as timed out."),
    Setting("memory_limit_mb", 1024, "Address space one converter process may use, in MiB."),
    Setting("max_file_mb", 256, "Files larger than this are recorded as too large and not read."),
    Setting("commit_every", 1000, "Documents between two commits while indexing."),
    Setting("commit_seconds", 30.0, "Longest time between two commits while indexing."),
    Setting("dup_k", 4, "Near-duplicates: most simhash bits two documents may differ in (docs/duplicates.md)."),
    Setting("dup_min_similarity", 0.5, "Near-duplicates: least share of word 5-gram fingerprints in common."),
    Setting("index_on_battery", False, "Keep indexing when the computer runs on battery (else wait for power)."),
    Setting("release_after", 20.0, "Quiet seconds after which the daemon ends its converters and closes the index."),
    Setting("cpu_budget", 100, "Percent of the time the daemon may spend converting (a duty cycle; 100: no pause)."),
    Setting("accounts", [], "Enterprise mode (`deskdex daemon --system`) only: the user accounts whose homes are "
                            "indexed. Empty: every regular account (uid from UID_MIN of /etc/login.defs, a home "
                            "and a login shell), including accounts added later."),
)
DEFAULTS = {s.name: s.default for s in SETTINGS}


@dataclass(frozen=True)
class Config:
    values: dict[str, Any]
    home: Home

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def limits(self) -> Limits:
        return Limits(time_seconds=float(self["time_limit"]),
                      memory_bytes=int(self["memory_limit_mb"]) * 2**20,
                      file_bytes=int(self["max_file_mb"]) * 2**20)

    def open_collection(self, writable: bool = False) -> Any:
        from index import Collection

        return Collection.open(self.home.data_dir, writable, dup_k=int(self["dup_k"]),
                               dup_min_similarity=float(self["dup_min_similarity"]))

    def folders(self) -> list[str]:
        if self["folders"]:
            return [os.path.abspath(os.path.expanduser(f)) for f in self["folders"]]
        return [default_folder()]


def default_folder() -> str:
    import platformdirs

    docs = platformdirs.user_documents_dir()
    return docs if os.path.isdir(docs) and docs != os.path.expanduser("~") else os.path.expanduser("~")


def load(home: Home, overrides: dict[str, Any] | None = None) -> Config:
    values = dict(DEFAULTS)
    path = home.config_file
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from exc
        data.pop("crawl", None)  # the [crawl] table belongs to webcrawl/config.py, which checks it
        unknown = set(data) - set(DEFAULTS)
        if unknown:
            raise ConfigError(f"{path}: unknown setting(s): {', '.join(sorted(unknown))}")
        for k, v in data.items():
            if not isinstance(v, type(DEFAULTS[k])) and not (isinstance(v, int) and isinstance(DEFAULTS[k], float)):
                raise ConfigError(f"{path}: {k} must be a {type(DEFAULTS[k]).__name__}, not {v!r}")
        values.update(data)
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return Config(values, home)


def save(home: Home, updates: dict[str, Any]) -> None:
    """Write ``updates`` into the config file, keeping the other settings in it."""
    import tomli_w

    path = home.config_file
    data: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path, "rb") as f:
            data = tomllib.load(f)
    unknown = set(updates) - set(DEFAULTS) - {"crawl"}
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
    data.update(updates)
    os.makedirs(home.config_dir, mode=0o700, exist_ok=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        tomli_w.dump(data, f)
    os.replace(tmp, path)  # a crash never leaves half a config file
