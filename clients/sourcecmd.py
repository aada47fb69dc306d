"""``deskdex source ...``: mail accounts and network shares to index (docs/sources.md).

    deskdex source add URL [--user NAME] [--password-command CMD] [--interval SECONDS]
    deskdex source list [--json]         each source with its state, last sync and failures
    deskdex source sync [URL] [--json]   sync now (beside a running daemon: the daemon does it)
    deskdex source remove URL            stop syncing it and drop what was indexed from it

``add`` asks for the password (on a terminal, or one line on standard input) and keeps it in the
system keyring, unless ``--password-command`` prints it; the config file never holds it.
"""

from __future__ import annotations

import argparse
import getpass
import sys
import time
from typing import Any

from deskdex import settings
from deskdex.protocol import MAX_WAIT

from .ask import ask_daemon, home_of
from .reading import print_json, say, source_line
from .subcommands import Subcommands

EXIT_ERROR = 1


def add_command(subparsers: Subcommands, common_parent: argparse.ArgumentParser) -> None:
    """Add ``deskdex source`` to the CLI's subcommands."""
    p = subparsers.add_parser("source", parents=[common_parent], help="index mail accounts and network shares",
                              description="Mail accounts (imap://user@host, imaps://user@host) and network shares "
                                          "(smb://server/share/folder) indexed beside your folders, kept in sync by "
                                          "the daemon. Passwords live in the system keyring (or come from "
                                          "--password-command), never in the config file.")
    p.add_argument("action", choices=("add", "list", "sync", "remove"))
    p.add_argument("url", nargs="?", help="the source's URL, without a password")
    p.add_argument("--user", help="SMB: the account to log in as, when the URL names none (DOMAIN\\name)")
    p.add_argument("--password-command", metavar="CMD",
                   help="a command printing the password on its first line (pass, secret-tool, gpg --decrypt), run "
                        "at each login, instead of the keyring")
    p.add_argument("--interval", type=float, metavar="SECONDS",
                   help="seconds between two syncs (default: the setting source_interval)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_source)


def cmd_source(args: argparse.Namespace) -> int:
    from deskdex.sources import SourceEntry, add_source, find_source, load_sources, remove_source

    home = home_of(args).ensure()
    if args.action in ("add", "remove") and not args.url:
        print(f"deskdex: source {args.action} needs a URL", file=sys.stderr)
        return 2
    if args.action == "add":
        entry = SourceEntry(args.url, args.user, args.password_command, args.interval)
        settings.check("sources", [{k: v for k, v in vars(entry).items() if v is not None}])
        if not args.password_command:
            _keep_password(entry)
        new = add_source(home.config_file, entry)
        ask_daemon(args, "source_reload")  # a running daemon syncs it now; else its next start does
        say(f"{'added' if new else 'changed'} {entry.url}")
        return 0
    if args.action == "remove":
        found = find_source(home.config_file, args.url)
        if found is None or not remove_source(home.config_file, args.url):
            print(f"deskdex: not a configured source: {args.url}", file=sys.stderr)
            return EXIT_ERROR
        if ask_daemon(args, "source_reload") is None:
            _drop_here(home, found)
        from deskdex.sources import forget_password

        forget_password(found.url)
        say(f"removed {found.url}")
        return 0
    if args.action == "sync":
        return _sync(args, home)
    status = ask_daemon(args, "status")
    states = {s["url"]: s for s in (status or {}).get("sources") or []}
    rows = [{"url": e.url, **states.get(e.url, {"state": "not synced (no daemon runs)"})}
            for e in load_sources(home.config_file)]
    if args.json:
        print_json({"sources": rows})
    else:
        for r in rows:
            say(source_line(r))
    return 0


def _keep_password(entry: Any) -> None:
    from deskdex.sources import normalise, store_password

    url = normalise(entry.url)
    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {url}: ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        from deskdex.errors import ConfigError

        raise ConfigError(f"no password given for {url} (or give --password-command CMD)")
    store_password(url, password)


def _sync(args: argparse.Namespace, home: Any) -> int:
    """Sync now: through the daemon when one runs (it holds the index), else here."""
    answer = ask_daemon(args, "source_sync", url=args.url, wait=float(MAX_WAIT))
    if answer is not None:
        rows = answer["sources"]
        while any(r["state"] == "syncing" for r in rows):
            time.sleep(0.5)
            rows = [s for s in ask_daemon(args, "status")["sources"] if args.url is None or s["url"] in
                    {r["url"] for r in rows}]
        if args.json:
            print_json({"sources": rows})
        else:
            for r in rows:
                say(source_line(r))
        return 0 if all(r["state"] == "ok" for r in rows) else EXIT_ERROR
    return _sync_here(args, home)


def _sync_here(args: argparse.Namespace, home: Any) -> int:
    from deskdex.converters import Limits
    from deskdex.errors import SourceError, SourceUnreachable
    from deskdex.index import Collection
    from deskdex.pipeline import SourceSync
    from deskdex.sources import load_sources, normalise, open_entry

    from .managing import stop_on_signal

    cfg = settings.load(home)
    entries = [e for e in load_sources(home.config_file) if args.url is None or e.url == normalise(args.url)]
    if not entries:
        print(f"deskdex: no source {args.url or ''} configured (deskdex source add URL)".replace("  ", " "),
              file=sys.stderr)
        return EXIT_ERROR
    failed = False
    reports = []
    with stop_on_signal() as stop, Collection.from_settings(cfg, writable=True) as coll:
        for entry in entries:
            source = open_entry(entry, cfg.settings.sid_map)
            try:
                report = SourceSync(coll, Limits.from_settings(cfg), stop=stop, workers=cfg.settings.workers,
                                    commit_seconds=cfg.settings.commit_seconds,
                                    overrides=dict(cfg.settings.converters)).run(source)
            except SourceError as exc:
                failed = True
                reports.append({"url": entry.url, "state": "unreachable" if isinstance(exc, SourceUnreachable)
                                else "refused", "error": str(exc)})
                print(f"deskdex: {exc}", file=sys.stderr)
                continue
            finally:
                source.close()
            reports.append({"state": "ok", **report.to_json()})
    if args.json:
        print_json({"sources": reports})
    else:
        for r in reports:
            if r["state"] == "ok":
                say(f"{r['url']}: {r['fetched']} fetched, {r['stored']} stored ({r['members']} attachments or "
                    f"members), {r['removed']} removed, {r['failed']} failed in {r['seconds']:.1f} s")
    return EXIT_ERROR if failed else 0


def _drop_here(home: Any, entry: Any) -> None:
    """No daemon runs: drop what was indexed from a removed source now."""
    from deskdex.errors import IndexMissing, NotConfigured
    from deskdex.index import Collection
    from deskdex.pipeline import SourceSync
    from deskdex.sources import open_entry

    try:
        source = open_entry(entry)
    except NotConfigured:
        return
    try:
        with Collection.from_settings(settings.load(home), writable=True) as coll:
            SourceSync(coll).drop(source)
    except IndexMissing:
        pass
