"""The ``[crawl]`` table of the deskdex TOML config: crawler settings and the configured crawls.

    [crawl]
    contact = "https://example.org/about-my-crawler"
    delay = 1.0
    allow_private_addresses = false
    [[crawl.sites]]
    url = "https://example.org/"
    scope = "host"

Other tables and keys in the file are kept as they are when sites are added or removed.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import asdict, dataclass, field
from typing import Any

import tomli_w

from converters.errors import ConfigError

from .urls import normalise

DEFAULTS: dict[str, Any] = {"contact": "https://github.com/deskdex/deskdex", "delay": 1.0,
                            "allow_private_addresses": False, "max_pages": 1000, "max_depth": 5,
                            "timeout": 10.0, "max_mb": 10, "revisit_budget_per_day": 1000.0}
SCOPES = ("host", "domain", "prefix")


@dataclass
class CrawlSite:
    url: str
    scope: str = "host"
    max_pages: int | None = None
    max_depth: int | None = None
    topic: str | None = None


@dataclass
class CrawlConfig:
    values: dict[str, Any] = field(default_factory=lambda: dict(DEFAULTS))
    sites: list[CrawlSite] = field(default_factory=list)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def user_agent(self) -> str:
        return f"deskdex-crawler/0.1 (+{self['contact']})"


def _read(path: str) -> dict[str, Any]:
    if not os.path.exists(path):
        return {}
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def load(path: str) -> CrawlConfig:
    table = dict(_read(path).get("crawl", {}))
    raw_sites = table.pop("sites", [])
    unknown = set(table) - set(DEFAULTS)
    if unknown:
        raise ConfigError(f"{path}: unknown [crawl] setting(s): {', '.join(sorted(unknown))}")
    values = {**DEFAULTS, **table}
    for k, v in table.items():
        if not isinstance(v, type(DEFAULTS[k])) and not (isinstance(v, int) and isinstance(DEFAULTS[k], float)):
            raise ConfigError(f"{path}: crawl.{k} must be a {type(DEFAULTS[k]).__name__}, not {v!r}")
    sites = []
    for s in raw_sites:
        try:
            site = CrawlSite(**s)
        except TypeError as exc:
            raise ConfigError(f"{path}: bad [[crawl.sites]] entry {s!r}: {exc}") from exc
        if site.scope not in SCOPES:
            raise ConfigError(f"{path}: scope must be one of {', '.join(SCOPES)}, not {site.scope!r}")
        sites.append(site)
    return CrawlConfig(values, sites)


def _write_sites(path: str, sites: list[CrawlSite]) -> None:
    data = _read(path)
    crawl = data.setdefault("crawl", {})
    crawl["sites"] = [{k: v for k, v in asdict(s).items() if v is not None} for s in sites]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        tomli_w.dump(data, f)
    os.replace(tmp, path)


def add_site(path: str, site: CrawlSite) -> bool:
    """Add (or replace) the crawl of ``site.url``; False if the URL is not crawlable."""
    url = normalise(site.url)
    if url is None:
        return False
    site.url = url
    sites = [s for s in load(path).sites if s.url != url] + [site]
    _write_sites(path, sites)
    return True


def remove_site(path: str, url: str) -> bool:
    norm = normalise(url) or url
    sites = load(path).sites
    kept = [s for s in sites if s.url != norm]
    if len(kept) == len(sites):
        return False
    _write_sites(path, kept)
    return True
