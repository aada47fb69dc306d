"""The ``deskdex`` command. Heavy modules are imported inside each command, so ``--help`` and
quick commands start fast."""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
from typing import Any, Sequence

from converters.errors import DeskdexError

from .launch import color
from .paths import ENV, Home

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_BUSY = 3


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # `deskdex status | head`: the reader stopped reading, which is not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    daemon = args.command == "daemon"
    level = logging.DEBUG if getattr(args, "verbose", False) else logging.INFO if daemon else logging.ERROR
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(message)s" if daemon else "deskdex: %(message)s")
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except DeskdexError as exc:
        from converters.errors import IndexBusy, QueryError

        if isinstance(exc, QueryError):
            query = " ".join(getattr(args, "query", []))
            caret = f"\n  {query}\n  {' ' * exc.position}^" if exc.position is not None and query else ""
            print(f"deskdex: bad query: {exc}{caret}", file=sys.stderr)
            return EXIT_ERROR
        print(f"deskdex: {exc}", file=sys.stderr)
        return EXIT_BUSY if isinstance(exc, IndexBusy) else EXIT_ERROR


def build_parser(kind: type[argparse.ArgumentParser] = argparse.ArgumentParser) -> argparse.ArgumentParser:
    common = kind(add_help=False)
    common.add_argument("--home", metavar="DIR", default=argparse.SUPPRESS,
                        help=f"keep all state (config, data, socket) under DIR (also ${ENV})")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more")
    p = kind(prog="deskdex", parents=[common],
                                description="Desktop search: index folders, then search them.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("index", parents=[common], help="index files and folders once, then exit",
                       description="Index files and folders once: convert what changed, skip what did not, "
                                   "drop what was deleted. Prints a summary (indexed, unchanged, failed by reason).")
    s.add_argument("paths", nargs="+", metavar="PATH")
    s.add_argument("--workers", type=int, default=None, help="converter processes (default: all cores)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    s.set_defaults(func=cmd_index)

    s = sub.add_parser("search", parents=[common], help="search the index",
                       description="Search the index. Words are ANDed; use OR, NOT, -word, \"phrases\", prefix*, "
                                   "fuzzy~ and filters such as title:, in:, ext:, type:, after:, size:>10MB "
                                   "(docs/search.md has them all).")
    s.add_argument("query", nargs="+")
    s.add_argument("--limit", type=_positive, default=10, help="results to show (default 10)")
    s.add_argument("--offset", type=int, default=0, help="skip this many results first")
    s.add_argument("--sort", choices=("relevance", "date", "size"), default="relevance",
                   help="order by relevance (default), date (newest first) or size (largest first)")
    s.add_argument("--all", action="store_true",
                   help="show every near-duplicate too (default: the best of each duplicate cluster)")
    out = s.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print {total, hits: [...]} as JSON")
    out.add_argument("--paths", action="store_true", help="print one path a line (for xargs)")
    out.add_argument("--open", type=_positive, metavar="N", help="open the Nth result with the default application")
    s.set_defaults(func=cmd_search)

    s = sub.add_parser("show", parents=[common], help="print the stored tagged text of a document",
                       description="Print the tagged text stored for a file path or URI (file:///...#member too).")
    s.add_argument("target", metavar="PATH_OR_URI")
    s.set_defaults(func=cmd_show)

    s = sub.add_parser("status", parents=[common], help="documents, failures, sizes and locations",
                       description="How many documents, how many failed and why, index and store sizes, where they live.")
    s.add_argument("--json", action="store_true")
    s.add_argument("--failures", action="store_true", help="list every failed file with its reason")
    s.set_defaults(func=cmd_status)

    s = sub.add_parser("formats", parents=[common], help="list every format deskdex converts",
                       description="Every format with its MIME types, file extensions and the library behind it.")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_formats)

    s = sub.add_parser("convert", parents=[common], help="convert one file and print it, indexing nothing",
                       description="Convert one file without indexing it: see why a file is or is not found.")
    s.add_argument("file", metavar="FILE")
    s.add_argument("--format", choices=("tagged", "text", "main"), default="tagged",
                   help="tagged text (default), plain text, or only the main content (boilerplate left out)")
    s.set_defaults(func=cmd_convert)

    s = sub.add_parser("dups", parents=[common], help="duplicate clusters, or the near-duplicates of one file",
                       description="Without PATH: every cluster of exact and near-duplicates, largest first, with "
                                   "the bytes a user could reclaim. With PATH: the near-duplicates of that file "
                                   "(indexed or not), with the share of words in common.")
    s.add_argument("path", nargs="?", metavar="PATH")
    s.add_argument("--json", action="store_true")
    s.add_argument("--limit", type=_positive, default=None, help="show at most this many clusters")
    s.set_defaults(func=cmd_dups)

    s = sub.add_parser("daemon", parents=[common], help="run the indexer in the foreground (what `make run` starts)",
                       description="Index the configured folders (default: Documents, else home), then stay up. Ctrl-C stops.")
    s.add_argument("--once", action="store_true", help="exit after the first full index")
    s.add_argument("--system", action="store_true",
                   help="enterprise mode, as root: index the homes of the configured accounts (setting `accounts`; "
                        "default every regular account) and serve every local user what they may read")
    s.set_defaults(func=cmd_daemon)

    for name, help_text in (("pause", "pause indexing in the running daemon"),
                            ("resume", "resume indexing in the running daemon")):
        s = sub.add_parser(name, parents=[common], help=help_text, description=help_text.capitalize() + ".")
        s.set_defaults(func=cmd_pause_resume)

    s = sub.add_parser("watch", parents=[common], help="watched folders: add, remove, list",
                       description="Change the watched folders. A running daemon picks the change up at once; "
                                   "otherwise it applies on the next start.")
    s.add_argument("action", choices=("add", "remove", "list"))
    s.add_argument("paths", nargs="*", metavar="PATH")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_watch)

    s = sub.add_parser("exclude", parents=[common], help="excluded patterns (gitignore style): add, remove, list",
                       description="Patterns of files and folders to leave out, gitignore style (also read from "
                                   ".deskdexignore files in watched folders).")
    s.add_argument("action", choices=("add", "remove", "list"))
    s.add_argument("patterns", nargs="*", metavar="PATTERN")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_exclude)

    s = sub.add_parser("service", parents=[common], help="run the daemon as a user service: install, uninstall, status",
                       description="A systemd user unit on Linux, a launchd agent on macOS, a scheduled task on "
                                   "Windows, each running `deskdex daemon` at idle priority.")
    s.add_argument("action", choices=("install", "uninstall", "status"))
    s.add_argument("--no-start", action="store_true", help="install without starting it now")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_service)

    from webcrawl.cli import add_commands as add_crawl

    from .tray import add_command as add_tray

    add_crawl(sub, common, _crawl_env)
    add_tray(sub, common)
    return p


def _crawl_env(args: argparse.Namespace) -> Any:
    from webcrawl.cli import CrawlEnv

    home = _home(args).ensure()

    def open_sink() -> Any:
        from index import Collection

        from . import config
        from .websink import IndexSink

        cfg = config.load(home)
        return IndexSink(cfg.open_collection(writable=True), cfg.limits)

    return CrawlEnv(config_path=home.config_file, state_path=os.path.join(home.data_dir, "crawl-state.json"),
                    open_sink=open_sink)


def _home(args: argparse.Namespace) -> Home:
    return Home.resolve(getattr(args, "home", None))


def _print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, ensure_ascii=False, indent=None)
    sys.stdout.write("\n")


def cmd_index(args: argparse.Namespace) -> int:
    from . import config
    from .run import run_index

    home = _home(args).ensure()
    cfg = config.load(home)
    missing = [p for p in args.paths if not os.path.lexists(p)]
    if missing:
        print(f"deskdex: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return EXIT_USAGE
    workers = args.workers or os.cpu_count() or 2
    summary = run_index(cfg, [os.path.abspath(p) for p in args.paths], workers=workers, idle=False,
                        progress=not args.no_progress and sys.stderr.isatty())
    if args.json:
        _print_json(summary.to_json())
    else:
        print(format_summary(summary))
    return 0


def format_summary(s: Any) -> str:
    lines = [f"indexed {s.indexed}, unchanged {s.unchanged}, moved or copied {s.reused}, removed {s.removed}, "
             f"members {s.members}, failed {sum(s.failed.values())} in {s.seconds:.1f} s"]
    for reason, n in s.failed.most_common():
        lines.append(f"  failed ({reason}): {n}")
    for path, reason, message in s.failures[:10]:
        lines.append(f"    {path}: {message}")
    if len(s.failures) > 10:
        lines.append(f"    ... and {len(s.failures) - 10} more (deskdex status --failures)")
    return "\n".join(lines)


def _positive(v: str) -> int:
    n = int(v)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {v}")
    return n


def cmd_search(args: argparse.Namespace) -> int:
    from .render import Results, render_results

    home = _home(args)
    limit = max(args.limit, args.open or 0)
    query = " ".join(args.query)
    snippets = not (args.paths or args.open)
    live = _daemon_call(home, "search", query=query, limit=limit, offset=args.offset, sort=args.sort,
                        all=args.all, snippets=snippets)
    if live is not None:
        results = Results.from_json(live)
    else:
        from index import Collection, search

        with Collection.open(home.data_dir) as coll:
            results = search(coll, query, limit=limit, offset=args.offset, sort=args.sort,
                             snippets=snippets, collapse=not args.all)
    if args.open:
        if args.open > len(results.hits):
            print(f"deskdex: only {len(results.hits)} results", file=sys.stderr)
            return EXIT_ERROR
        return open_with_default_app(results.hits[args.open - 1].path)
    sys.stdout.write(render_results(results, as_json=args.json, paths=args.paths, color=color()))
    return 0


class NotForTheDaemon(DeskdexError):
    """A command line the daemon does not run for a client (daemon/launch.py runs it itself)."""

    code = "not_for_daemon"


class _Refusing(argparse.ArgumentParser):
    """The parser inside the daemon: what it cannot take it refuses, printing nothing (a help
    text or a usage error belongs on the client's terminal, which daemon.cli reaches)."""

    def _print_message(self, message: str, file: Any = None) -> None:
        pass

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        raise NotForTheDaemon(message or "the command line asks for output, not a search")

    def error(self, message: str) -> Any:
        raise NotForTheDaemon(message)


@functools.lru_cache(maxsize=1)
def _daemon_parser() -> argparse.ArgumentParser:
    return build_parser(_Refusing)


def parse_search(argv: list[str]) -> argparse.Namespace:
    """A client's ``deskdex search ...`` command line as the daemon runs it (daemon/launch.py);
    anything else, or ``--open`` (which starts a program where the client is), is refused with
    NotForTheDaemon."""
    args = _daemon_parser().parse_args(argv)
    if args.command != "search" or args.open:
        raise NotForTheDaemon(f"not a search the daemon answers: {args.command}")
    return args


def open_with_default_app(target: str) -> int:
    import shutil
    import subprocess

    opener = {"darwin": ["open"], "win32": ["cmd", "/c", "start", ""]}.get(sys.platform, ["xdg-open"])
    if not shutil.which(opener[0]):
        print(f"deskdex: no {opener[0]} to open {target}", file=sys.stderr)
        return EXIT_ERROR
    return subprocess.call([*opener, target])


def cmd_show(args: argparse.Namespace) -> int:
    from converters.source import path_to_uri
    from index import Collection

    home = _home(args)
    target = args.target
    uri = target if "://" in target else path_to_uri(os.path.abspath(target))
    with Collection.open(home.data_dir) as coll:
        row = coll.get(uri)
        if row is None:
            print(f"deskdex: not in the index: {target}", file=sys.stderr)
            return EXIT_ERROR
        if row.status != "ok":
            print(f"deskdex: {target} failed to convert ({row.reason}): {row.error}", file=sys.stderr)
            return EXIT_ERROR
        text = coll.tagged_text(row)
    if text is None:
        print(f"deskdex: {target} is indexed by name only (no text could be extracted)", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(text)
    return 0


def _daemon_call(home: Home, op: str, **kw: Any) -> Any:
    """The daemon's answer, or None when no daemon runs for this home."""
    from .client import DaemonError, NotRunning, call

    for path in [home.socket, *_system_socket(home, op)]:
        try:
            return call(path, op, **kw)
        except NotRunning:
            continue
        except DaemonError as exc:
            from converters.errors import QueryError

            if exc.code == "bad_query":
                raise QueryError(exc.message, _position(exc.message)) from None
            raise DaemonFailed(exc.message) from None
    return None


def _system_socket(home: Home, op: str) -> list[str]:
    """A user with no daemon and no index of their own searches through the system daemon
    (`deskdex daemon --system`), which answers with what that user may read."""
    if op not in ("search", "status") or os.environ.get(ENV) or home != Home.resolve() \
            or os.path.exists(os.path.join(home.data_dir, "catalog.sqlite")):
        return []
    return [Home.resolve(system=True).socket]


class DaemonFailed(DeskdexError):
    """The daemon refused or failed a request."""


def _position(message: str) -> int | None:
    import re

    m = re.search(r"at position (\d+)", message)
    return int(m.group(1)) if m else None


def cmd_status(args: argparse.Namespace) -> int:
    home = _home(args)
    info: dict[str, Any] = {"home": {"config": home.config_dir, "data": home.data_dir, "runtime": home.runtime_dir}}
    live = _daemon_call(home, "status", failures=bool(args.failures))
    if live is not None:
        info.update(live, daemon=True)
    else:
        info.update(_status_from_index(home, args.failures), daemon=False, state="idle", queue=0)
    if args.json:
        _print_json(info)
        return 0
    daemon = f"running (pid {info.get('pid')}): {info['state']}, {info['queue']} waiting" if info["daemon"] \
        else "not running"
    print(f"daemon:    {daemon}")
    if info.get("current"):
        print(f"working on {info['current']}")
    print(f"documents: {info['documents']}")
    print(f"failed:    {info['failed']}" + "".join(f"\n  {k}: {v}" for k, v in info["failed_by_reason"].items()))
    print(f"index:     {_size(info['index_bytes'])} in {os.path.join(home.data_dir, 'tantivy')}")
    print(f"store:     {_size(info['store_bytes'])} in {os.path.join(home.data_dir, 'catalog.sqlite')}")
    if info.get("cpu_seconds") is not None:
        print(f"cpu:       {info['cpu_seconds']} s used since start")
    if info.get("last_commit"):
        import time

        print(f"committed: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(info['last_commit']))}")
    print(f"config:    {home.config_file}")
    for note in ([info["note"]] if info.get("note") else []) + list(info.get("notes", [])):
        print(f"note:      {note}")
    for f in info.get("failures", []):
        print(f"  {f['path'] if '#' not in f['uri'] else f['uri']}: {f['reason']}: {f['message']}")
    return 0


def _status_from_index(home: Home, failures: bool) -> dict[str, Any]:
    from index import Collection

    info: dict[str, Any] = {}
    try:
        with Collection.open(home.data_dir) as coll:
            info.update(coll.catalog.counts())
            info.update(coll.sizes())
            last = coll.catalog.get_meta("last_commit")
            info["last_commit"] = float(last) if last else None
            if failures:
                info["failures"] = failure_list(coll)
    except DeskdexError as exc:
        info.update({"documents": 0, "failed": 0, "failed_by_reason": {}, "index_bytes": 0, "store_bytes": 0,
                     "note": str(exc)})
    return info


def failure_list(coll: Any) -> list[dict[str, Any]]:
    return [{"path": r.path, "uri": r.uri, "reason": r.reason, "message": r.error}
            for r in coll.catalog.rows("status='failed'")]


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def cmd_formats(args: argparse.Namespace) -> int:
    from converters.registry import default_registry

    formats = [{"name": f.name, "mimes": list(f.mimes), "extensions": list(f.extensions), "library": f.library}
               for f in default_registry().formats]
    if args.json:
        _print_json({"formats": formats})
        return 0
    for f in formats:
        exts = " ".join("." + e for e in f["extensions"]) or "(by content)"
        print(f"{f['name']:<28} {f['library']:<20} {exts}\n{'':<28} {', '.join(f['mimes'])}")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from converters import Source, convert, tagged

    if not os.path.isfile(args.file):
        print(f"deskdex: no such file: {args.file}", file=sys.stderr)
        return EXIT_USAGE
    status = 0
    for o in convert(Source.from_path(args.file)):
        if o.document is None:
            print(f"deskdex: {o.uri}: {o.message} ({o.reason})", file=sys.stderr)
            status = EXIT_ERROR
        elif args.format == "tagged":
            sys.stdout.write(tagged.dumps(o.document))
        else:
            if "#" in o.uri:
                print(f"--- {o.uri}")
            print(o.document.text(main_only=args.format == "main"))
    return status


def cmd_dups(args: argparse.Namespace) -> int:
    home = _home(args)
    if args.path is not None:
        path = os.path.abspath(args.path)
        if not os.path.isfile(path):
            print(f"deskdex: no such file: {args.path}", file=sys.stderr)
            return EXIT_USAGE
        found = _daemon_call(home, "dups", path=path)
        if found is None:
            from . import config
            from .duplicates import near_duplicates

            with config.load(home).open_collection(writable=True) as coll:
                found = near_duplicates(coll, path)
        if args.json:
            _print_json(found)
        elif not found["duplicates"]:
            print(f"no near-duplicates of {path}")
        else:
            for d in found["duplicates"]:
                print(f"{d['similarity']:4.0%} of words in common  {d['uri'] if '#' in d['uri'] else d['path']}")
        return 0
    found = _daemon_call(home, "dups")
    if found is None:
        from .duplicates import clusters
        from index import Collection

        with Collection.open(home.data_dir) as coll:
            found = clusters(coll)
    if args.limit:
        found["clusters"] = found["clusters"][: args.limit]
    if args.json:
        _print_json(found)
        return 0
    if not found["clusters"]:
        print("no duplicates found")
        return 0
    from .render import human

    for c in found["clusters"]:
        print(f"{len(c['documents'])} copies, {human(c['reclaimable'])} reclaimable:")
        for d in c["documents"]:
            print(f"  {d['uri'] if '#' in d['uri'] else d['path']}  {human(d['size'])}")
    print(f"{len(found['clusters'])} clusters, {human(found['reclaimable'])} reclaimable in all")
    return 0


def cmd_pause_resume(args: argparse.Namespace) -> int:
    result = _daemon_call(_home(args), args.command)
    if result is None:
        print("deskdex: no daemon is running for this home (start one with `deskdex daemon`)", file=sys.stderr)
        return EXIT_ERROR
    print(f"indexing {'paused' if args.command == 'pause' else 'resumed'} (state: {result['state']})")
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    from . import config

    home = _home(args).ensure()
    if args.action != "list" and not args.paths:
        print(f"deskdex: watch {args.action} needs at least one PATH", file=sys.stderr)
        return EXIT_USAGE
    result = None
    for p in args.paths:
        path = os.path.abspath(os.path.expanduser(p))
        if args.action == "add" and not os.path.isdir(path):
            print(f"deskdex: not a folder: {p}", file=sys.stderr)
            return EXIT_USAGE
        result = _daemon_call(home, f"watch_{args.action}", path=path)
        if result is None:  # no daemon: the config file alone, read on the next start
            folders = config.load(home).folders()
            folders = folders + [path] if args.action == "add" and path not in folders else \
                [f for f in folders if f != path] if args.action == "remove" else folders
            config.save(home, {"folders": folders})
    if result is None:
        result = _daemon_call(home, "watch_list")
    folders = result["folders"] if result else [{"path": f} for f in config.load(home).folders()]
    if args.json:
        _print_json({"folders": folders})
    else:
        for f in folders:
            extra = f"  {f['documents']} documents, {f['failed']} failed" if "documents" in f else ""
            print(f"{f['path']}{extra}{'  (offline)' if f.get('offline') else ''}")
    return 0


def cmd_exclude(args: argparse.Namespace) -> int:
    from . import config

    home = _home(args).ensure()
    if args.action != "list" and not args.patterns:
        print(f"deskdex: exclude {args.action} needs at least one PATTERN", file=sys.stderr)
        return EXIT_USAGE
    for pattern in args.patterns:
        if _daemon_call(home, f"exclude_{args.action}", pattern=pattern) is None:
            current = list(config.load(home)["exclude"])
            new = current + [pattern] if args.action == "add" and pattern not in current else \
                [p for p in current if p != pattern]
            config.save(home, {"exclude": new})
    patterns = list(config.load(home)["exclude"])
    if args.json:
        _print_json({"exclude": patterns})
    else:
        print("\n".join(patterns) if patterns else "(no exclusions beyond the built-in ones)")
    return 0


def cmd_service(args: argparse.Namespace) -> int:
    from . import service

    home = getattr(args, "home", None)
    if args.action == "install":
        unit = service.install(home, start=not args.no_start)
        print(f"installed {unit.kind} service: {unit.path}")
    elif args.action == "uninstall":
        unit = service.uninstall()
        print(f"removed {unit.path}")
    else:
        st = service.status()
        if args.json:
            _print_json(st)
        else:
            print(f"{st['kind']}: {'installed' if st['installed'] else 'not installed'} ({st['path']}), {st['state']}")
    return 0


def cmd_daemon(args: argparse.Namespace) -> int:
    from . import config
    from .run import run_daemon

    if args.system and os.geteuid() != 0:
        logging.getLogger(__name__).warning("--system without root: only what this account may read is indexed")
    home = Home.resolve(getattr(args, "home", None), system=args.system).ensure(system=args.system)
    return run_daemon(config.load(home), once=args.once, system=args.system)


if __name__ == "__main__":
    sys.exit(main())
