"""Focused crawling against breadth-first on a generated topic site; the crawl commands end to end."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # the test site module lives beside the tests

import argparse
import json
import tomllib

from deskdex.webcrawl import config as crawlconfig
from deskdex.clients.crawl import CrawlEnv, add_commands
from deskdex.webcrawl.crawler import CrawlSettings, crawl
from deskdex.webcrawl.fetch import FetchSettings
from deskdex.webcrawl.focus import TopicClassifier
from deskdex.webcrawl.sink import MemorySink
from webcrawl_site import TOPIC_WORDS, SiteServer

FETCH = FetchSettings(timeout=2.0, allow_private=True)


def harvest(site: SiteServer, focused: bool, budget: int) -> tuple[float, int]:
    topic = TopicClassifier.from_words(" ".join(TOPIC_WORDS[:5]))
    s = CrawlSettings([site.url("/")], delay=0.0, fetch=FETCH, topic=topic, focused=focused, max_pages=budget,
                      sitemaps=False, concurrency=1)
    _, crawler = crawl(s, MemorySink())
    on, classified = crawler.harvest
    return on / classified, classified


def test_focused_harvest_beats_breadth_first():
    with SiteServer(kind="topic", pages=60, seed=5) as site:
        focused, n1 = harvest(site, True, 25)
        bfs, n2 = harvest(site, False, 25)
    print(f"harvest rate at 25 pages: focused {focused:.2f}, breadth-first {bfs:.2f}")
    assert n1 == n2 == 25
    assert focused > bfs + 0.15


def test_off_topic_pages_not_indexed():
    with SiteServer(kind="topic", pages=30, seed=5) as site:
        sink = MemorySink()
        topic = TopicClassifier.from_words(" ".join(TOPIC_WORDS))
        stats, _ = crawl(CrawlSettings([site.url("/")], delay=0.0, fetch=FETCH, topic=topic, sitemaps=False), sink)
        s = stats.sites[site.netloc]
        assert s.off_topic > 0 and s.stored > 0
        assert all(topic.on_topic(t) for t in sink.texts.values())


def run_cli(argv: list[str], env: CrawlEnv) -> int:
    common = argparse.ArgumentParser(add_help=False)
    parser = argparse.ArgumentParser(prog="deskdex")
    add_commands(parser.add_subparsers(dest="command"), common, lambda args: env)
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_add_list_remove_crawl_status(tmp_path, capsys):
    cfg = tmp_path / "config.toml"
    cfg.write_text('folders = ["/x"]\n\n[crawl]\ndelay = 0.05\n')
    sink = MemorySink()
    env = CrawlEnv(str(cfg), str(tmp_path / "crawl-state.json"), lambda: sink)
    with SiteServer(kind="big", pages=6) as site:
        assert run_cli(["crawl", "add", site.url("/"), "--max-pages", "4", "--allow-private"], env) == 0  # 127.0.0.1
        assert run_cli(["crawl", "add", "ftp://nope"], env) == 2
        capsys.readouterr()
        assert run_cli(["crawl", "list"], env) == 0
        assert site.url("/") in capsys.readouterr().out
        assert tomllib.loads(cfg.read_text())["folders"] == ["/x"]  # other settings kept
        assert run_cli(["crawl", "--allow-private", "--json"], env) == 0  # the configured sites, max_pages 4
        out = json.loads(capsys.readouterr().out)
        assert out["fetched"] == 4 and out["stored"] == 4
        assert run_cli(["crawl", site.url("/"), "--allow-private", "--max-pages", "10", "--shard", "0/1"], env) == 0
        assert "unchanged" in capsys.readouterr().out
        assert run_cli(["crawl", "status", "--json"], env) == 0
        st = json.loads(capsys.readouterr().out)["sites"][site.netloc]
        assert st["known"] == 7 and st["unchanged"] == 4 and 0 < st["freshness"] <= 1
        assert run_cli(["crawl", "status"], env) == 0
        assert "average age" in capsys.readouterr().out
        assert run_cli(["crawl", "remove", site.url("/")], env) == 0
        assert crawlconfig.load(str(cfg)).sites == []
        assert run_cli(["crawl", "remove", site.url("/")], env) == 1
        assert run_cli(["crawl", site.url("/"), "--shard", "2/2"], env) == 2
