"""``deskdex crawl ...``: the crawler's commands, added to the main parser by ``add_commands``.

    deskdex crawl URL... [--scope host|domain|prefix] [--max-pages N] [--max-depth N]
                         [--topic "words" | --topic-from FILE...] [--delay S] [--allow-private] [--shard I/N]
    deskdex crawl                       crawl every configured site once
    deskdex crawl status [--json]       per site: known, fetched, unchanged, failed by reason, freshness, age
    deskdex crawl add URL [--scope ...] / crawl remove URL / crawl list

The caller (clients/managing.py, crawl_env) passes ``env``: a function of the parsed arguments giving the config
path, the crawl state path and a sink factory, so this module never opens the index itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from . import config as crawlconfig

# The crawler itself (httpx, the index) is imported only when a crawl command runs, so that
# adding these commands to the main parser keeps every other deskdex command quick to start.
if TYPE_CHECKING:
    from .sink import PageSink
    from .stats import CrawlStats

ACTIONS = ("status", "add", "remove", "list")
_T = TypeVar("_T")


@dataclass
class CrawlEnv:
    config_path: str
    state_path: str
    open_sink: Callable[[], "PageSink"]  # called once per command that needs the store; closed if it has close()


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
                 common_parent: argparse.ArgumentParser, env: Callable[[argparse.Namespace], CrawlEnv]) -> None:
    p = subparsers.add_parser("crawl", parents=[common_parent], help="crawl web sites into the index",
                              description="Crawl from seed URLs (or the configured sites) politely, into the index. "
                                          "Also: crawl status | crawl add URL | crawl remove URL | crawl list.")
    p.add_argument("words", nargs="*", metavar="URL | status | add URL | remove URL | list")
    p.add_argument("--scope", choices=crawlconfig.SCOPES, default=None, help="stay on the seed's host (default), "
                   "its registered domain, or under the seed URL")
    p.add_argument("--max-pages", type=int, default=None, help="pages to fetch in this run")
    p.add_argument("--max-depth", type=int, default=None, help="links to follow away from a seed")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--topic", default=None, help="focus on pages about these words")
    g.add_argument("--topic-from", nargs="+", metavar="FILE", default=None, help="focus on pages like these documents")
    p.add_argument("--delay", type=float, default=None, help="seconds between two requests to one site")
    p.add_argument("--allow-private", action="store_true", help="allow private, loopback and link-local addresses")
    p.add_argument("--shard", default="0/1", metavar="I/N", help="crawl only the sites whose host hashes to I of N")
    p.add_argument("--json", action="store_true", help="print the summary or status as JSON")
    p.set_defaults(func=lambda args: run_command(args, env(args)))


def run_command(args: argparse.Namespace, env: CrawlEnv) -> int:
    words = list(args.words)
    action = words.pop(0) if words and words[0] in ACTIONS else "crawl"
    if action == "list":
        for s in crawlconfig.load(env.config_path).sites:
            extra = "".join(f" {k}={v}" for k, v in vars(s).items() if v is not None and k not in ("url", "scope"))
            print(f"{s.url} scope={s.scope}{extra}")
        return 0
    if action == "add":
        for url in words:
            site = crawlconfig.CrawlSite(url, args.scope or "host", args.max_pages, args.max_depth, args.topic)
            if not crawlconfig.add_site(env.config_path, site):
                print(f"deskdex: not an http(s) URL: {url}", file=sys.stderr)
                return 2
        return 0
    if action == "remove":
        missing = [u for u in words if not crawlconfig.remove_site(env.config_path, u)]
        if missing:
            print(f"deskdex: not configured: {', '.join(missing)}", file=sys.stderr)
            return 1
        return 0
    from .stats import load_state, status

    with _sink(env) as sink:
        if action == "status":
            report = status(load_state(env.state_path), sink.known_pages())
            print(json.dumps(report) if args.json else format_status(report))
            return 0
        return _crawl(args, words, env, sink)


def _crawl(args: argparse.Namespace, urls: list[str], env: CrawlEnv, sink: "PageSink") -> int:
    from .crawler import CrawlSettings, crawl
    from .fetch import FetchSettings
    from .focus import TopicClassifier
    from .frontier import Limits
    from .stats import CrawlStats, save_state

    cfg = crawlconfig.load(env.config_path)
    try:
        i, n = (int(x) for x in args.shard.split("/"))
        assert 0 <= i < n
    except (ValueError, AssertionError):
        print(f"deskdex: --shard wants I/N with 0 <= I < N, not {args.shard!r}", file=sys.stderr)
        return 2
    topic = None
    if args.topic:
        topic = TopicClassifier.from_words(args.topic)
    elif args.topic_from:
        from deskdex.converters.convert import convert
        from deskdex.converters.source import Source

        texts = [o.document.text() for f in args.topic_from for o in convert(Source.from_path(f)) if o.document]
        topic = TopicClassifier.from_documents(texts)
    runs = [(urls, args.scope or "host", topic, None, None)] if urls else \
        [([s.url], s.scope, TopicClassifier.from_words(s.topic) if s.topic else topic, s.max_pages, s.max_depth)
         for s in cfg.sites]
    if not runs:
        print("deskdex: no URL given and no crawl configured (deskdex crawl add URL)", file=sys.stderr)
        return 2
    fetch = FetchSettings(user_agent=cfg.user_agent, timeout=cfg["timeout"], deadline=cfg["deadline"],
                          max_bytes=cfg["max_mb"] * 2**20,
                          allow_private=args.allow_private or cfg["allow_private_addresses"])
    progress = _progress if sys.stderr.isatty() else None
    total = CrawlStats()
    for seeds, scope, t, site_pages, site_depth in runs:
        depth = _first(args.max_depth, site_depth, cfg["max_depth"])
        settings = CrawlSettings(seeds=seeds, scope=scope, max_pages=_first(args.max_pages, site_pages, cfg["max_pages"]),
                                 limits=Limits(max_depth=depth),
                                 delay=args.delay if args.delay is not None else cfg["delay"], fetch=fetch, topic=t,
                                 shard=(i, n))
        stats, _ = crawl(settings, sink, progress)
        save_state(env.state_path, stats)
        total.sites.update(stats.sites)
    if progress:
        sys.stderr.write("\n")
    sums = total.totals()
    if args.json:
        print(json.dumps({"sites": {k: v.to_json() for k, v in total.sites.items()}, **sums.to_json()}))
    else:
        print(f"fetched {sums.fetched}, stored {sums.stored}, unchanged {sums.unchanged}, "
              f"duplicates {sums.duplicates}, robots-excluded {sums.robots_excluded}, off-topic {sums.off_topic}, "
              f"failed {sum(sums.failed.values())}")
        for reason, k in sums.failed.most_common():
            print(f"  failed ({reason}): {k}")
    return 0


def _first(*values: _T | None) -> _T:
    return next(v for v in values if v is not None)


def _progress(stats: "CrawlStats") -> None:
    t = stats.totals()
    sys.stderr.write(f"\rcrawl: fetched {t.fetched}, stored {t.stored}, failed {sum(t.failed.values())}   ")


def format_status(report: dict[str, Any]) -> str:
    lines = []
    for name, s in report["sites"].items():
        lines.append(f"{name}: known {s['known']}, fetched {s['fetched']}, unchanged {s['unchanged']}, "
                     f"duplicates {s['duplicates']}, robots-excluded {s['robots_excluded']}, "
                     f"freshness {s['freshness']:.2f}, average age {s['average_age_days']:.2f} days")
        lines.extend(f"  failed ({r}): {k}" for r, k in sorted(s["failed"].items()))
    c = report["collection"]
    lines.append(f"all sites: known {c['known']}, freshness {c['freshness']:.2f}, "
                 f"average age {c['average_age_days']:.2f} days")
    return "\n".join(lines)


class _sink:
    def __init__(self, env: CrawlEnv) -> None:
        self.env = env

    def __enter__(self) -> "PageSink":
        self.sink = self.env.open_sink()
        return self.sink

    def __exit__(self, *exc: object) -> None:
        close = getattr(self.sink, "close", None)
        if close:
            close()
