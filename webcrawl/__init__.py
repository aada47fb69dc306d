"""The web crawler (step 6): a polite crawler that feeds fetched pages to a ``PageSink``.

    sink.py       FetchedPage, KnownPage, PageSink (the boundary to the index), MemorySink
    crawler.py    CrawlSettings, Crawler, crawl(settings, sink) -> (CrawlStats, Crawler)
    frontier.py   per-site priority queues, politeness clock, seen-set, trap bounds
    fetch.py      httpx client, DNS cache with the private-address rule, size cap, redirects, outcomes
    robots.py     robots.txt per RFC 9309 (Protego), cached 24 h
    sitemaps.py   sitemaps and sitemap indexes, gzip;  feeds.py: RSS/Atom pull feeds (feedparser)
    freshness.py  Poisson change-rate estimate, expected age, age-minimising revisit schedule
    focus.py      topic classifier for focused crawling;  links.py: links and anchor texts (lxml)
    urls.py       normalisation, scope, shard by host hash;  stats.py: per-site counters, status
    config.py     the [crawl] table of the TOML config (``deskdex crawl`` itself is a client: clients/crawl.py)

Other packages use the names of ``__all__`` alone, imported from here (tests/test_layout.py): each is
taken from its module on first use (core/lazy.py), so that the crawl commands' parser, which imports
this package, loads neither httpx nor the index.
"""

from __future__ import annotations

from deskdex import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import config
    from .config import SCOPES, CrawlConfig, CrawlSite, add_site, allows_private, private_address, remove_site
    from .crawler import CrawlSettings, Crawler, Fetcher, Remote, crawl, fetch_page, wants_text
    from .fetch import DNSCache, FetchSettings, make_client
    from .freshness import due
    from .frontier import Frontier, Request
    from .runs import CrawlRequest, CrawlRun, local_texts, parse_shard, plan, progress_of, summary
    from .sink import FetchedPage, KnownPage, MemorySink, PageSink, PutResult, Visit, page_source, record_visit
    from .stats import STATE_FILE, CrawlStats, SiteStats, load_state
    from .stats import status as crawl_status
    from .urls import shard_of, site_of

_WHERE = {
    "SCOPES": ".config", "CrawlConfig": ".config", "CrawlSite": ".config", "add_site": ".config",
    "remove_site": ".config", "allows_private": ".config", "private_address": ".config",
    "CrawlSettings": ".crawler", "Crawler": ".crawler", "Fetcher": ".crawler", "Remote": ".crawler",
    "crawl": ".crawler", "fetch_page": ".crawler", "wants_text": ".crawler",
    "DNSCache": ".fetch", "FetchSettings": ".fetch", "make_client": ".fetch",
    "due": ".freshness",
    "Frontier": ".frontier", "Request": ".frontier",
    "CrawlRequest": ".runs", "CrawlRun": ".runs", "local_texts": ".runs", "parse_shard": ".runs", "plan": ".runs",
    "progress_of": ".runs", "summary": ".runs",
    "FetchedPage": ".sink", "KnownPage": ".sink", "MemorySink": ".sink", "PageSink": ".sink", "PutResult": ".sink",
    "Visit": ".sink", "page_source": ".sink", "record_visit": ".sink",
    "STATE_FILE": ".stats", "CrawlStats": ".stats", "SiteStats": ".stats", "load_state": ".stats",
    "crawl_status": ".stats:status",
    "shard_of": ".urls", "site_of": ".urls",
}
__getattr__ = lazy.names(__name__, _WHERE)
__all__ = [
    "add_site", "allows_private", "config", "crawl", "crawl_status", "CrawlConfig", "Crawler", "CrawlRequest", "CrawlRun",
    "CrawlSettings", "CrawlSite", "CrawlStats", "DNSCache", "due", "fetch_page", "FetchedPage", "Fetcher",
    "FetchSettings", "Frontier", "KnownPage", "load_state", "local_texts", "make_client", "MemorySink",
    "page_source", "PageSink", "parse_shard", "plan", "private_address", "progress_of", "PutResult", "record_visit", "Remote",
    "remove_site", "Request", "SCOPES", "shard_of", "site_of", "SiteStats", "STATE_FILE", "summary", "Visit",
    "wants_text",
]
