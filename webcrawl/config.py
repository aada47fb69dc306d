"""The ``[crawl]`` table of the deskdex TOML config: crawler settings and the configured crawls.

    [crawl]
    contact = "https://example.org/about-my-crawler"
    delay = 1.0
    allow_private_addresses = false
    [[crawl.sites]]
    url = "https://example.org/"
    scope = "host"
    [[crawl.sites]]
    url = "http://192.168.1.10/wiki/"
    allow_private = true    # added with --allow-private

Other tables and keys in the file are kept as they are when sites are added or removed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from deskdex import settings
from deskdex.errors import ConfigError
from deskdex.protocol import CRAWL_SCOPES
from deskdex.settings import CrawlTable

from .urls import is_public_address, normalise

SCOPES = CRAWL_SCOPES  # one tuple: the crawl op of the protocol checks a scope against it too


@dataclass
class CrawlSite:
    url: str
    scope: str = "host"
    max_pages: int | None = None
    max_depth: int | None = None
    topic: str | None = None
    # Added with --allow-private: its crawls may reach private, loopback and link-local addresses
    # (None, not False, when not: the site's table in the config file then says nothing of it).
    allow_private: bool | None = None


@dataclass
class CrawlConfig:
    """The ``[crawl]`` settings, typed (``cfg.settings.delay``), and the configured sites."""

    settings: CrawlTable = field(default_factory=CrawlTable)
    sites: list[CrawlSite] = field(default_factory=list)

    @property
    def user_agent(self) -> str:
        return f"deskdex-crawler/0.1 (+{self.settings.contact})"


def load(path: str) -> CrawlConfig:
    """The ``[crawl]`` table of the config file at ``path``, checked by the one settings table."""
    table = settings.typed(settings.read(path)).crawl
    sites = []
    for s in table.sites:
        try:
            site = CrawlSite(**s)
        except TypeError as exc:
            raise ConfigError(f"{path}: bad [[crawl.sites]] entry {s!r}: {exc}") from exc
        if site.scope not in SCOPES:
            raise ConfigError(f"{path}: scope must be one of {', '.join(SCOPES)}, not {site.scope!r}")
        sites.append(site)
    return CrawlConfig(table, sites)


def allows_private(cfg: CrawlConfig, urls: list[str]) -> bool:
    """Whether a crawl from ``urls`` may reach private, loopback and link-local addresses without
    being asked to: the setting allow_private_addresses, or every URL a site added with
    ``deskdex crawl add URL --allow-private`` (the choice kept with the site)."""
    allowed = {s.url for s in cfg.sites if s.allow_private}
    return cfg.settings.allow_private_addresses or bool(urls) and all(normalise(u) in allowed for u in urls)


def private_address(url: str) -> str | None:
    """The non-public address ``url`` names by itself (``127.0.0.1``, ``[::1]``, ``localhost``,
    ``192.168.1.2``), which a crawl refuses unless allowed; None for a public one or a host name (what a
    name resolves to is checked when it is fetched, webcrawl/fetch.py)."""
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(url.strip()).hostname or "").rstrip(".")
    except ValueError:
        return None
    if host == "localhost" or host.endswith(".localhost"):
        return host
    try:
        return None if is_public_address(host) else host
    except ValueError:  # a host name, not an address
        return None


def _write_sites(path: str, sites: list[CrawlSite]) -> None:
    settings.save_file(path, {"crawl.sites": [{k: v for k, v in asdict(s).items() if v is not None} for s in sites]})

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
