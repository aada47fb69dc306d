"""``deskdex crawl ...``: the crawler's commands, added to the main parser by ``add_commands``.

    deskdex crawl URL... [--scope host|domain|prefix] [--max-pages N] [--max-depth N]
                         [--topic "words" | --topic-from FILE...] [--delay S] [--allow-private] [--shard I/N]
    deskdex crawl                       crawl every configured site once
    deskdex crawl status [--json]       per site: known, fetched, unchanged, failed by reason, freshness, age
    deskdex crawl add URL [--scope ...] / crawl remove URL / crawl list

The caller (clients/managing.py, crawl_env) passes ``env``: a function of the parsed arguments giving the config
path, the crawl state path, a sink factory, a read-only view of the known pages and a way to ask the
running daemon, so this module never opens the index itself.

Beside a running daemon, which holds the index's one writer lock: ``crawl status`` reads without the
lock, ``crawl URL`` hands its crawl to the daemon (the crawl op) and follows it (crawl_job) to print
the same summary, and ``crawl add``/``remove`` tell the daemon to read its ``[crawl]`` table again.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

from deskdex.protocol import CRAWL_SCOPES, CRAWL_STATES

# The crawler itself (httpx, the index) is imported only when a crawl command runs, so that
# adding these commands to the main parser keeps every other deskdex command quick to start.
if TYPE_CHECKING:
    from deskdex.webcrawl import KnownPage, PageSink, Remote

    from .subcommands import Subcommands

ACTIONS = ("status", "add", "remove", "list")
FINAL = CRAWL_STATES[2:]  # a crawl job in one of these has ended


def _no_daemon(op: str, **args: Any) -> Any:
    return None


def _no_remote(broker: str | None) -> "Remote | None":
    return None


@dataclass
class CrawlEnv:
    config_path: str
    state_path: str
    # The writable store, called once per crawl that runs in this process (it takes the writer
    # lock: only when no daemon runs); closed if it has close().
    open_sink: Callable[[], "PageSink"]
    # Every known page, read without the writer lock (beside a daemon too); None: open_sink's.
    known_pages: Callable[[], Iterable["KnownPage"]] | None = None
    # The running daemon's answer to an op of deskdex.protocol, or None when no daemon runs.
    ask_daemon: Callable[..., Any] = _no_daemon
    # Cluster workers for a crawl in this process: through --broker's URL (None: the setting
    # broker), or None to crawl from here. Raises ConfigError when a broker cannot be used.
    open_remote: Callable[[str | None], "Remote | None"] = _no_remote

    def read_known_pages(self) -> list["KnownPage"]:
        if self.known_pages is not None:
            return list(self.known_pages())
        with _sink(self) as sink:
            return list(sink.known_pages())


def add_commands(subparsers: Subcommands,
                 common_parent: argparse.ArgumentParser, env: Callable[[argparse.Namespace], CrawlEnv]) -> None:
    p = subparsers.add_parser("crawl", parents=[common_parent], help="crawl web sites into the index",
                              description="Crawl from seed URLs (or the configured sites) politely, into the index. "
                                          "Also: crawl status | crawl add URL | crawl remove URL | crawl list.")
    p.add_argument("words", nargs="*", metavar="URL | status | add URL | remove URL | list")
    p.add_argument("--scope", choices=CRAWL_SCOPES, default=None, help="stay on the seed's host (default), "
                   "its registered domain, or under the seed URL")
    p.add_argument("--max-pages", type=int, default=None, help="pages to fetch in this run")
    p.add_argument("--max-depth", type=int, default=None, help="links to follow away from a seed")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--topic", default=None, help="focus on pages about these words")
    g.add_argument("--topic-from", nargs="+", metavar="FILE", default=None, help="focus on pages like these documents")
    p.add_argument("--delay", type=float, default=None, help="seconds between two requests to one site")
    p.add_argument("--allow-private", action="store_true", help="allow private, loopback and link-local addresses")
    p.add_argument("--shard", default="0/1", metavar="I/N", help="crawl only the sites whose host hashes to I of N")
    p.add_argument("--broker", metavar="URL", default=None,
                   help="make the requests on `deskdex worker` processes of this Redis broker (setting `broker`)")
    p.add_argument("--json", action="store_true", help="print the summary or status as JSON")
    p.set_defaults(func=lambda args: run_command(args, env(args)))


def run_command(args: argparse.Namespace, env: CrawlEnv) -> int:
    from deskdex.webcrawl import config as crawlconfig  # here: every command builds the parser

    words = list(args.words)
    action = words.pop(0) if words and words[0] in ACTIONS else "crawl"
    if action == "list":
        for s in crawlconfig.load(env.config_path).sites:
            extra = "".join(f" {k}={v}" for k, v in vars(s).items() if v is not None and k not in ("url", "scope"))
            print(f"{s.url} scope={s.scope}{extra}")
        return 0
    if action == "add":
        refused = _refused(args, words, env)
        if refused:
            print(f"deskdex: {refused}", file=sys.stderr)
            return 2
        for url in words:
            site = crawlconfig.CrawlSite(url, args.scope or "host", args.max_pages, args.max_depth, args.topic,
                                         True if args.allow_private else None)
            if not crawlconfig.add_site(env.config_path, site):
                print(f"deskdex: not an http(s) URL: {url}", file=sys.stderr)
                return 2
        env.ask_daemon("crawl_reload")  # a running daemon crawls the new sites now; else its next start does
        return 0
    if action == "remove":
        missing = [u for u in words if not crawlconfig.remove_site(env.config_path, u)]
        env.ask_daemon("crawl_reload")
        if missing:
            print(f"deskdex: not configured: {', '.join(missing)}", file=sys.stderr)
            return 1
        return 0
    if action == "status":
        from deskdex.webcrawl import crawl_status as status
        from deskdex.webcrawl import load_state

        # Read-only (the daemon may hold the writer lock): the state file and the catalog's pages.
        report = status(load_state(env.state_path), env.read_known_pages())
        print(json.dumps(report) if args.json else format_status(report))
        return 0
    return _crawl(args, words, env)


def _crawl(args: argparse.Namespace, urls: list[str], env: CrawlEnv) -> int:
    from deskdex.webcrawl import CrawlRequest, CrawlRun, local_texts, parse_shard, plan, progress_of, summary
    from deskdex.webcrawl import config as crawlconfig

    try:
        parse_shard(args.shard)
    except ValueError:
        print(f"deskdex: --shard wants I/N with 0 <= I < N, not {args.shard!r}", file=sys.stderr)
        return 2
    if not urls and not crawlconfig.load(env.config_path).sites:
        print("deskdex: no URL given and no crawl configured (deskdex crawl add URL)", file=sys.stderr)
        return 2
    refused = _refused(args, urls, env)
    if refused:
        print(f"deskdex: {refused}", file=sys.stderr)
        return 2
    # Paths made absolute here: a daemon does not share this command's working folder.
    request = CrawlRequest(urls or None, args.scope, args.max_pages, args.max_depth, args.topic,
                           [os.path.abspath(f) for f in args.topic_from] if args.topic_from else None,
                           args.delay, args.allow_private, args.shard)
    progress = sys.stderr.isatty()
    if args.broker is None:
        started = env.ask_daemon("crawl", **request.to_args())
        if started is not None:
            return _follow(env, started["job"], progress, args.json)  # the daemon holds the index: it crawls
    elif env.ask_daemon("status") is not None:
        print("deskdex: the daemon is running and holds the index: stop it to crawl with --broker, "
              "or set the setting broker for it", file=sys.stderr)
        return 1
    remote = env.open_remote(args.broker)
    try:
        with _sink(env) as sink:
            run = CrawlRun(plan(crawlconfig.load(env.config_path), request, local_texts), sink, env.state_path,
                           (lambda t: _progress(progress_of(t))) if progress else None, remote)
            result = summary(run.run())
    finally:
        if remote is not None:
            remote.close()
    if progress:
        sys.stderr.write("\n")
    print(json.dumps(result) if args.json else format_summary(result))
    _private_hint(result)
    return 0


ALLOW_PRIVATE = ("crawl it with --allow-private (deskdex crawl add URL --allow-private keeps the choice for that "
                 "site), or allow every site with the setting crawl.allow_private_addresses = true")


def _refused(args: argparse.Namespace, urls: list[str], env: CrawlEnv) -> str | None:
    """Why a crawl of ``urls`` would fetch nothing: one names a private, loopback or link-local
    address, and nothing allows those (--allow-private, the setting, the site's own choice); with
    how to allow it. None when it may go ahead (a host name's address is checked as it is fetched)."""
    from deskdex.webcrawl import config as crawlconfig

    private = [(u, a) for u in urls if (a := crawlconfig.private_address(u)) is not None]
    if not private or args.allow_private or crawlconfig.allows_private(crawlconfig.load(env.config_path), urls):
        return None
    url, address = private[0]
    return (f"{url}: {address} is a private or loopback address, which crawls refuse by default (a page could "
            f"make the crawler reach your own network): {ALLOW_PRIVATE}")


def _private_hint(result: dict[str, Any]) -> None:
    """After a crawl: pages refused because their host resolved to a private address, and how to allow them."""
    refused = Counter(result.get("failed") or {}).get("private_address", 0)
    if refused:
        print(f"deskdex: {refused} page{'s' if refused != 1 else ''} refused at a private address: {ALLOW_PRIVATE}",
              file=sys.stderr)


def _follow(env: CrawlEnv, job: int, progress: bool, as_json: bool) -> int:
    """Follow the daemon's crawl ``job`` to its end, then print its summary as a crawl in this
    process would. Ctrl-C (or SIGTERM, SIGHUP) stops it in the daemon too: the exit status is 130."""

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupted) for sig in (signal.SIGTERM, signal.SIGHUP)}
    code = 0
    try:
        try:
            st = _ask(env, "crawl_job", job=job)
            while st["state"] not in FINAL:
                st = _ask(env, "crawl_job", job=job, wait=1.0)  # answered at once when the crawl ends
                if progress:
                    _progress(st["progress"])
        except KeyboardInterrupt:
            code = 130
            st = _ask(env, "crawl_cancel", job=job)
            while st["state"] not in FINAL:
                st = _ask(env, "crawl_job", job=job, wait=1.0)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if progress:
        sys.stderr.write("\n")
    if st["state"] == "failed":
        print(f"deskdex: the crawl failed in the daemon: {st['message']}", file=sys.stderr)
        return 1
    if code:
        print("deskdex: interrupted: the crawl in the daemon is stopped; what it stored is kept", file=sys.stderr)
    elif st["state"] == "cancelled":
        print(f"deskdex: the crawl in the daemon was stopped ({st['message']}); what it stored is kept",
              file=sys.stderr)
        code = 1
    if st["summary"] is not None:  # none for a job stopped before it began
        print(json.dumps(st["summary"]) if as_json else format_summary(st["summary"]))
        _private_hint(st["summary"])
    return code


def _ask(env: CrawlEnv, op: str, **kw: Any) -> Any:
    from deskdex.errors import DaemonUnavailable

    answer = env.ask_daemon(op, **kw)
    if answer is None:
        raise DaemonUnavailable("the daemon stopped before the crawl ended; what it stored is kept")
    return answer


def format_summary(s: dict[str, Any]) -> str:
    """A crawl's summary (deskdex.webcrawl.runs.summary) as the command prints it."""
    failed: Counter[str] = Counter(s["failed"])
    lines = [f"fetched {s['fetched']}, stored {s['stored']}, unchanged {s['unchanged']}, "
             f"duplicates {s['duplicates']}, robots-excluded {s['robots_excluded']}, off-topic {s['off_topic']}, "
             f"failed {sum(failed.values())}"]
    lines.extend(f"  failed ({reason}): {k}" for reason, k in failed.most_common())
    lines.extend(f"shard {k} of this crawl went silent with work ({n} links wait for it): run it again to finish "
                 "the crawl" for k, n in s.get("shards_left", {}).items())
    return "\n".join(lines)


def _progress(counts: dict[str, int]) -> None:
    sys.stderr.write(f"\rcrawl: fetched {counts['fetched']}, stored {counts['stored']}, failed {counts['failed']}   ")


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
