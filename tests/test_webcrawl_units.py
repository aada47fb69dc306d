"""URL normalisation, the freshness estimator and schedule (fast simulation), sitemaps, feeds, topics."""

from __future__ import annotations

import gzip
import math
import os
import sys

import pytest

from deskdex.webcrawl import feeds, sitemaps
from deskdex.webcrawl.focus import TopicClassifier
from deskdex.webcrawl.freshness import estimate_rate, expected_age, mean_age, optimal_intervals
from deskdex.webcrawl.urls import in_scope, is_public_address, normalise, shard_of

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))


@pytest.mark.parametrize("raw, norm", [
    ("HTTP://Example.COM:80/a/./b/../c?b=2&a=1#top", "http://example.com/a/c?a=1&b=2"),
    ("https://example.com:443", "https://example.com/"),
    ("https://example.com:8443/x/", "https://example.com:8443/x/"),
    ("http://example.com/p?a=2&a=1", "http://example.com/p?a=2&a=1"),  # repeated key: order kept
    ("http://example.com/p?PHPSESSID=1&q=x", "http://example.com/p?q=x"),
    ("http://example.com/%7Euser/a%20b", "http://example.com/~user/a%20b"),
    ("mailto:a@example.com", None),
    ("javascript:void(0)", None),
    ("http://example.com:99999/", None),
])
def test_normalise(raw, norm):
    assert normalise(raw) == norm


def test_relative_and_scope():
    assert normalise("../x", "http://h/a/b/c") == "http://h/a/x"
    assert in_scope("http://www.example.co.uk/a", ["http://news.example.co.uk/"], "domain")
    assert not in_scope("http://www.example.co.uk/a", ["http://news.example.co.uk/"], "host")
    assert in_scope("http://h/docs/a/b", ["http://h/docs/index.html"], "prefix")
    assert not in_scope("http://h/other", ["http://h/docs/index.html"], "prefix")


def test_addresses_and_shards():
    assert not is_public_address("127.0.0.1") and not is_public_address("10.1.2.3")
    assert not is_public_address("169.254.1.1") and not is_public_address("::1")
    assert not is_public_address("::ffff:192.168.0.1") and is_public_address("93.184.216.34")
    hosts = [f"host{i}.example" for i in range(1000)]
    counts = [sum(1 for h in hosts if shard_of(h, 4) == i) for i in range(4)]
    assert min(counts) > 200 and shard_of("a.example", 4) == shard_of("a.example", 4)


def test_age_formula():
    # The notes' example: λ = 1/7; expected age grows with time since the crawl, slowly at first.
    assert expected_age(1 / 7, 0) == 0
    assert 0 < expected_age(1 / 7, 1) < expected_age(1 / 7, 7) < 7
    assert math.isclose(mean_age(0.5, 2), sum(expected_age(0.5, 2 * (k + 0.5) / 1000) for k in range(1000)) / 1000,
                        rel_tol=1e-4)


def test_estimator_counts_unchanged_visits():
    assert estimate_rate([1.0] * 10, [False] * 10) < estimate_rate([1.0] * 10, [True] + [False] * 9)
    assert estimate_rate([1.0] * 10, [True] * 10) < 100  # finite when every visit saw a change
    # A long quiet interval lowers the estimate: it is evidence, not missing data.
    assert estimate_rate([1.0, 1.0, 20.0], [True, True, False]) < estimate_rate([1.0, 1.0], [True, True])


def test_freshness_simulation_fast():
    from crawl_freshness import run

    r = run(pages=300, days=60, budget=30, seed=3)
    assert r["max_class_mean_error"] < 0.20  # rates within 20% after ten visits (mean per true rate)
    assert r["optimal_age_days"] < r["uniform_age_days"]
    assert math.isclose(r["optimal_visits_per_day"], 30, rel_tol=1e-3)  # the same budget


def test_optimal_intervals_favour_changing_pages():
    slow, fast = optimal_intervals([0.01, 1.0], budget=2)
    assert fast < slow


def test_sitemap_index_gzip_and_fields():
    index = gzip.compress(b"<sitemapindex xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>"
                          b"<sitemap><loc>http://h/s1.xml</loc></sitemap></sitemapindex>")
    assert sitemaps.parse(index).children == ["http://h/s1.xml"]
    sm = sitemaps.parse(b"<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'><url><loc>http://h/a</loc>"
                        b"<lastmod>2024-01-02T00:00:00Z</lastmod><changefreq>Weekly</changefreq>"
                        b"<priority>0.8</priority></url><url><priority>1</priority></url></urlset>")
    e, = sm.entries
    assert (e.url, e.changefreq, e.priority, e.lastmod) == ("http://h/a", "weekly", 0.8, 1704153600.0)
    with pytest.raises(ValueError):
        sitemaps.parse(b"<html><body>not a sitemap</body></html>")
    with pytest.raises(ValueError):
        sitemaps.parse(b"\x1f\x8b garbage")


def test_feed_newest_first_and_ttl():
    rss = (b"<rss version='2.0'><channel><title>T</title><ttl>15</ttl>"
           b"<item><link>http://h/old</link><pubDate>Mon, 01 Jan 2024 00:00:00 GMT</pubDate></item>"
           b"<item><link>http://h/new</link><pubDate>Tue, 02 Jan 2024 00:00:00 GMT</pubDate></item></channel></rss>")
    f = feeds.parse(rss, {})
    assert f.links == ["http://h/new", "http://h/old"] and f.poll_after == 900
    atom = (b"<feed xmlns='http://www.w3.org/2005/Atom'><title>A</title><entry><title>x</title>"
            b"<link href='http://h/e1'/><updated>2024-01-01T00:00:00Z</updated></entry></feed>")
    f = feeds.parse(atom, {"cache-control": "public, max-age=120"})
    assert f.links == ["http://h/e1"] and f.poll_after == 120
    assert feeds.is_feed("text/xml", b"<?xml version='1.0'?><rss>") and not feeds.is_feed("text/html", b"<rss")


def test_topic_classifier():
    topic = TopicClassifier.from_words("astronomy telescope galaxy planet")
    assert topic.score("The telescope showed a distant galaxy and a planet") > topic.threshold
    assert topic.score("Mix the flour and butter, then bake in the oven") < topic.threshold
    docs = TopicClassifier.from_documents(["planets orbit stars", "a telescope sees stars and planets"])
    assert docs.score("stars and planets tonight") > docs.score("pasta with garlic sauce")
