"""Pages per second crawling a generated local site with politeness off: deskdex's crawler and
Scrapy on the same site in the same run (Scrapy from the optional "bench" extra).

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python benchmarks/crawl_speed.py [--pages 2000] [--concurrency 16]

Both fetch robots.txt, follow links and parse every page; neither stores anything (deskdex gets a
sink that only counts), so the figure is the crawl machinery, not the converters.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from webcrawl_site import SiteServer  # noqa: E402

from deskdex.webcrawl.crawler import CrawlSettings, crawl  # noqa: E402
from deskdex.webcrawl.fetch import FetchSettings  # noqa: E402
from deskdex.webcrawl.frontier import Limits  # noqa: E402
from deskdex.webcrawl.sink import FetchedPage, KnownPage  # noqa: E402

SCRAPY_SPIDER = r'''
import json, sys, time
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

start, conc = sys.argv[1], int(sys.argv[2])
count = [0]

class Site(CrawlSpider):
    name = "site"
    start_urls = [start]
    rules = (Rule(LinkExtractor(allow=[r"/p/\d+$"]), callback="parse_item", follow=True),)

    def parse_item(self, response):
        count[0] += 1

proc = CrawlerProcess(settings={"LOG_LEVEL": "ERROR", "ROBOTSTXT_OBEY": True, "DOWNLOAD_DELAY": 0,
                                "CONCURRENT_REQUESTS": conc, "CONCURRENT_REQUESTS_PER_DOMAIN": conc,
                                "TELNETCONSOLE_ENABLED": False, "COOKIES_ENABLED": False,
                                "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7"})
proc.crawl(Site)
t = time.perf_counter()
proc.start()
print(json.dumps({"pages": count[0], "seconds": time.perf_counter() - t}))
'''


class CountingSink:
    def __init__(self) -> None:
        self.n = 0

    def put_page(self, page: FetchedPage) -> str:
        self.n += 1
        return "stored"

    def known(self, url: str) -> KnownPage | None:
        return None

    def known_pages(self) -> list[KnownPage]:
        return []


def run_deskdex(site: SiteServer, pages: int, concurrency: int) -> tuple[int, float]:
    sink = CountingSink()
    settings = CrawlSettings([site.url("/p/0")], delay=0.0, concurrency=concurrency, max_pages=pages + 10,
                             sitemaps=False, fetch=FetchSettings(allow_private=True, timeout=30),
                             limits=Limits(max_depth=10**6, max_pages_per_site=pages + 10))
    t = time.perf_counter()
    crawl(settings, sink)
    return sink.n, time.perf_counter() - t


def run_scrapy(site: SiteServer, concurrency: int) -> tuple[int, float] | None:
    try:
        import scrapy  # noqa: F401
    except ImportError:
        return None
    out = subprocess.run([sys.executable, "-c", SCRAPY_SPIDER, site.url("/p/0"), str(concurrency)],
                         capture_output=True, text=True, timeout=600, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["pages"], r["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=16)
    a = ap.parse_args()
    # Politeness is per site, so with one site the delay (0 here) is what limits both crawlers.
    with SiteServer(kind="big", pages=a.pages) as site:
        n, s = run_deskdex(site, a.pages, a.concurrency)
        print(f"deskdex: {n} pages in {s:.2f} s = {n / s:.0f} pages/s")
    with SiteServer(kind="big", pages=a.pages) as site:
        r = run_scrapy(site, a.concurrency)
        if r is None:
            print("scrapy:  not installed (pip install -e '.[bench]')")
        else:
            print(f"scrapy:  {r[0]} pages in {r[1]:.2f} s = {r[0] / r[1]:.0f} pages/s")


if __name__ == "__main__":
    main()
