"""The crawler against real HTTP servers on 127.0.0.1, asserted from the server's request log."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # the test site module lives beside the tests

import itertools
import time

import pytest

from deskdex.webcrawl.crawler import CrawlSettings, crawl
from deskdex.webcrawl.fetch import FetchSettings
from deskdex.webcrawl.frontier import Limits
from deskdex.webcrawl.sink import MemorySink
from webcrawl_site import SiteServer

DELAY = 0.05


def settings(*seeds: str, **kw: object) -> CrawlSettings:
    fetch = kw.pop("fetch", FetchSettings(timeout=0.5, max_bytes=2**20, allow_private=True))
    return CrawlSettings(list(seeds), delay=kw.pop("delay", DELAY), fetch=fetch,  # type: ignore[arg-type]
                         limits=kw.pop("limits", Limits(max_depth=5, max_pages_per_site=60)), **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def main_crawl():
    with SiteServer(slow_seconds=1.5) as site:
        sink = MemorySink()
        stats, crawler = crawl(settings(site.url("/")), sink)
        yield site, sink, stats, crawler


@pytest.mark.slow
def test_robots_first_and_obeyed(main_crawl):
    site, sink, stats, _ = main_crawl
    paths = site.paths()
    assert paths[0] == "/robots.txt"
    assert paths.count("/robots.txt") == 1
    assert "/private/secret" not in paths
    assert stats.outcomes[site.url("/private/secret")] == "robots_excluded"


def test_politeness_gap_from_server_side(main_crawl):
    site, *_ = main_crawl
    times = [t for t, *_ in site.log]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Every request starts at least the delay after the previous one started (one site, one at a time).
    assert min(gaps) >= DELAY * 0.9, min(gaps)


def test_no_url_fetched_twice_and_normalised(main_crawl):
    site, *_ = main_crawl
    pages = [p for p in site.paths("GET") if p not in ("/busy",)]
    assert len(pages) == len(set(pages))
    assert "/session?sid=abc" not in pages and "/session" in pages  # session ids dropped
    assert not any("#" in p or ".." in p for p in pages)


def test_sitemap_and_feed(main_crawl):
    site, sink, stats, _ = main_crawl
    assert "/sitemap_index.xml.gz" in site.paths() and "/sitemap-pages.xml" in site.paths()
    assert site.url("/hidden/only-in-sitemap") in sink.texts
    news = [p for p in site.paths() if p.startswith("/news/")]
    assert news == ["/news/3", "/news/2", "/news/1"]  # newest entry first
    assert stats.feeds[site.url("/feed.xml")] > 0


def test_trap_bounded(main_crawl):
    site, *_ = main_crawl
    months = [p for p in site.paths() if p.startswith("/calendar")]
    assert 0 < len(months) <= 6  # max_depth 5 below the home page


def test_bad_input_recorded_crawl_goes_on(main_crawl):
    site, sink, stats, _ = main_crawl
    o = stats.outcomes
    assert o[site.url("/slow")] == "timeout"
    assert o[site.url("/huge")] == "too_large"
    assert o[site.url("/image")] == "unwanted_type"
    assert o[site.url("/loop1")] == "redirect_loop"
    assert o[site.url("/malformed")] == "stored"
    assert o[site.url("/badenc")] == "stored" and "Caf" in sink.texts[site.url("/badenc")]
    # 429 with Retry-After: 1 -> asked again no sooner than a second later, then stored.
    busy = [t for t, m, p, _ in site.log if p == "/busy"]
    assert len(busy) == 2 and busy[1] - busy[0] >= 0.95
    assert o[site.url("/busy")] == "stored"
    assert all(site.url(f"/page/{i}") in sink.texts for i in range(20))


def test_near_duplicate_not_stored(main_crawl):
    site, sink, stats, _ = main_crawl
    dups = {site.url("/dup1"), site.url("/dup2")}
    assert len(dups & set(sink.duplicates)) == 1
    assert len(dups & set(sink.texts)) == 1
    assert sum(s.duplicates for s in stats.sites.values()) >= 1


def test_anchor_text_reaches_sink(main_crawl):
    site, sink, *_ = main_crawl
    assert "link /page/3" in sink.anchors[site.url("/page/3")]


@pytest.mark.slow
def test_revisit_uses_conditional_get():
    with SiteServer(pages=5, slow_seconds=0.01) as site:
        sink = MemorySink()
        crawl(settings(site.url("/"), sitemaps=False), sink)
        first = len(site.log)
        site.version["/page/2"] = 1  # one page changes between the runs
        stats, _ = crawl(settings(site.url("/"), sitemaps=False), sink)
        second = site.log[first:]
        page_gets = {p: h for _, m, p, h in second if p.startswith("/page/")}
        assert set(page_gets) == {f"/page/{i}" for i in range(5)}
        assert all("if-none-match" in h for h in page_gets.values())
        s = stats.sites[site.netloc]
        assert s.unchanged >= 4 and s.stored >= 1
        assert len(sink.versions[site.url("/page/2")]) == 2
        assert len(sink.versions[site.url("/page/1")]) == 1
        kp = sink.known(site.url("/page/1"))
        assert kp is not None and [v.changed for v in kp.visits] == [False, False]


def test_crawl_delay_from_robots_is_honoured():
    with SiteServer(pages=3, crawl_delay=0.3) as site:
        crawl(settings(site.url("/"), sitemaps=False, max_pages=4), MemorySink())
        times = [t for t, *_ in site.log]
        assert len(times) >= 3
        assert min(b - a for a, b in itertools.pairwise(times)) >= 0.27


def test_two_sites_fetched_at_once():
    with SiteServer(kind="big", pages=15) as a, SiteServer(kind="big", pages=15, seed=2) as b:
        stats, _ = crawl(settings(a.url("/"), b.url("/"), sitemaps=False), MemorySink())
        starts_a = [t for t, *_ in a.log]
        starts_b = [t for t, *_ in b.log]
        # The two sites interleave: b's requests fall inside a's crawl, not after it.
        assert starts_b[0] < starts_a[-1] and starts_a[0] < starts_b[-1]
        assert stats.sites[a.netloc].stored == 15 and stats.sites[b.netloc].stored == 15


def test_private_addresses_refused_unless_allowed():
    with SiteServer(kind="big", pages=3) as site:
        fetch = FetchSettings(timeout=0.5, allow_private=False)
        stats, _ = crawl(settings(site.url("/"), fetch=fetch), MemorySink())
        assert site.log == []  # not even robots.txt
        assert stats.outcomes == {site.url("/"): "private_address"}
        # localhost resolves to loopback too: a name is checked by its address.
        local = f"http://localhost:{site.server.server_address[1]}/"
        stats, _ = crawl(settings(local, fetch=fetch), MemorySink())
        assert site.log == []
        assert stats.outcomes == {local: "private_address"}


def test_shards_split_without_overlap():
    servers = [SiteServer(kind="big", pages=4) for _ in range(6)]
    for s in servers:
        s.__enter__()
    try:
        seeds = [s.url("/") for s in servers]
        for i in range(2):
            crawl(settings(*seeds, scope="host", sitemaps=False, shard=(i, 2)), MemorySink())
        counts = [sum(1 for _, m, p, _ in s.log if p.startswith("/p/") or p == "/") for s in servers]
        robots = [s.paths().count("/robots.txt") for s in servers]
        assert robots == [1] * 6  # each site crawled by exactly one instance
        assert counts == [5] * 6  # "/" and /p/0..3 (the home page is /p/0's twin), each once
    finally:
        for s in servers:
            s.__exit__()


def test_every_request_to_a_host_passes_its_politeness_gate():
    # A bare domain redirecting to its www. host, both in one crawl: the redirects from the first
    # (its guessed /sitemap.xml included) must not reach the second beside its own requests.
    delay = 0.3
    with SiteServer(kind="big", pages=4) as www, SiteServer(kind="redirect", redirect_to=www.url("/")) as bare:
        stats, _ = crawl(settings(bare.url("/"), www.url("/"), delay=delay), MemorySink())
        gets = www.paths("GET")
        assert "/sitemap.xml" in gets  # the site has no Sitemap: line: the usual place is tried
        assert len(gets) == len(set(gets)), gets  # no URL of the www. host fetched twice
        times = [t for t, *_ in www.log]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert min(gaps) >= delay * 0.9, (min(gaps), www.log)
        assert stats.sites[www.netloc].stored == 4


def test_trickling_page_fails_at_the_fetch_deadline():
    # One byte every 0.05 s never trips the 0.5 s read timeout; the whole answer has 1 s.
    with SiteServer(trickle_seconds=0.05) as site:
        fetch = FetchSettings(timeout=0.5, deadline=1.0, max_bytes=2**20, allow_private=True)
        started = time.monotonic()
        stats, _ = crawl(settings(site.url("/trickle"), fetch=fetch, sitemaps=False), MemorySink())
        took = time.monotonic() - started
    assert stats.outcomes[site.url("/trickle")] == "timeout"
    assert stats.sites[site.netloc].failed["timeout"] == 1
    assert took < 5, took  # the body alone would take about 30 s
