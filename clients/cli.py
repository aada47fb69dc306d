"""The ``deskdex`` command line: its parser, and how errors are printed. The commands live in
clients/reading.py (search, show, status, formats, convert, dups) and clients/managing.py (index,
retry, daemon, pause, resume, watch, exclude, service, crawl); heavy modules are imported inside each
command, so ``--help`` and quick commands start fast."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from typing import Any, Callable, Sequence

from deskdex.cluster import CRAWL_QUEUES
from deskdex.errors import DeskdexError, IndexBusy, QueryError
from deskdex.paths import ENV

from . import managing, reading
from .render import terminal_safe
from .searchargs import OPTIONS

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
    argv = sys.argv[1:] if argv is None else list(argv)
    mistyped = _mistyped_command(parser, argv)
    if mistyped is not None:
        print(f"deskdex: {mistyped}", file=sys.stderr)
        return EXIT_USAGE
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        dashed = [a for a in unknown if a.startswith("-") and not a.startswith("--")]
        if args.command == "search" and dashed == unknown:
            # argparse's "unrecognized arguments: -budget" for what is most likely a query's word
            # (NOT in the query language): say how to pass it.
            words = " ".join(shlex.quote(w) for w in [*args.query, *unknown])
            print(f"deskdex: {unknown[0]} is not an option of deskdex search; words beginning with - go "
                  f"after --: deskdex search -- {words}", file=sys.stderr)
            return EXIT_USAGE
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")  # argparse's own words
    daemon = args.command == "daemon"
    level = logging.DEBUG if getattr(args, "verbose", False) else logging.INFO if daemon else logging.ERROR
    log = logging.StreamHandler()
    log.setFormatter(SafeFormatter("%(asctime)s %(levelname)s %(message)s" if daemon else "deskdex: %(message)s"))
    logging.basicConfig(level=level, handlers=[log])
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except QueryError as exc:
        query = " ".join(getattr(args, "query", []))
        caret = f"\n  {query}\n  {' ' * exc.position}^" if exc.position is not None and query else ""
        print(f"deskdex: bad query: {exc}{caret}", file=sys.stderr)
        return EXIT_ERROR
    except DeskdexError as exc:
        print(f"deskdex: {terminal_safe(str(exc))}", file=sys.stderr)
        return EXIT_BUSY if isinstance(exc, IndexBusy) else EXIT_ERROR


def _mistyped_command(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """What to say when the command is not one of deskdex's (``deskdex serach``): the closest
    commands' names, which argparse's "invalid choice" leaves out. None for a known command,
    or when there is none (options only: argparse answers)."""
    import difflib

    commands = parser.commands if isinstance(parser, Parser) else ()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--home":
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        if arg in commands:
            return None
        close = difflib.get_close_matches(arg, list(commands), n=3, cutoff=0.6)
        hint = f"; did you mean: {' or '.join(close)}?" if close else " (deskdex --help lists them)"
        return f"{terminal_safe(arg)} is not a deskdex command{hint}"
    return None


class SafeFormatter(logging.Formatter):
    """Log lines safe on a terminal: a message may name any file (render.terminal_safe). A
    traceback below one keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().formatMessage(record))


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of ``minimum`` or more."""
    def check(v: str) -> int:
        n = int(v)
        if n < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, not {v}")
        return n

    return check


positive = at_least(1)


def queue_list(text: str) -> list[int]:
    if text == "-":
        return []
    try:
        queues = sorted({int(k) for k in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of queue numbers: {text!r}") from None
    if not all(0 <= k < CRAWL_QUEUES for k in queues):
        raise argparse.ArgumentTypeError(f"crawl queues are numbered 0 to {CRAWL_QUEUES - 1}: {text!r}")
    return queues


def add_search_options(s: argparse.ArgumentParser) -> None:
    """The options of ``deskdex search``, from the table the fast path reads too."""
    groups: dict[str, Any] = {}
    for o in OPTIONS:
        target: Any = s
        if o.group:
            if o.group not in groups:
                groups[o.group] = s.add_mutually_exclusive_group()
            target = groups[o.group]
        if o.kind == "flag":
            target.add_argument(*o.names, action="store_true", help=o.help)
        elif o.kind == "choice":
            target.add_argument(*o.names, choices=o.choices, default=o.default, help=o.help)
        elif o.kind == "str":
            target.add_argument(*o.names, default=o.default, help=o.help, metavar=o.metavar)
        else:
            # every integer option of the table has a minimum: a count of results or a result's number
            target.add_argument(*o.names, type=at_least(o.minimum or 0), default=o.default, help=o.help,
                                metavar=o.metavar)


class _Version(argparse.Action):
    """argparse's own version action wants the text when the parser is built: importlib.metadata
    at every command's start, for an option hardly anyone gives."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from deskdex.version import version_line

        print(version_line())
        parser.exit()


class Parser(argparse.ArgumentParser):
    """The top parser, which knows its subcommands' names (argparse keeps them in a private action)."""

    commands: tuple[str, ...] = ()


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", metavar="DIR", default=argparse.SUPPRESS,
                        help=f"keep all state (config, data, socket) under DIR (also ${ENV})")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more")
    p = Parser(prog="deskdex", parents=[common],
                                description="Desktop search: index folders, then search them.")
    # Answered by clients/launch.py before this parser is built (no CLI loaded); listed here for --help,
    # and answered the same way when the parser sees it, reading the version only then.
    p.add_argument("--version", action=_Version, nargs=0, help="print deskdex's version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=argparse.ArgumentParser)

    s = sub.add_parser("index", parents=[common], help="index files and folders once, then exit",
                       description="Index files and folders once: convert what changed, skip what did not, "
                                   "drop what was deleted. Prints a summary (indexed, unchanged, failed by reason).")
    s.add_argument("paths", nargs="+", metavar="PATH")
    s.add_argument("--workers", type=positive, default=None, help="converter processes (default: all cores)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    s.add_argument("--broker", metavar="URL", default=None,
                   help="convert through `deskdex worker` processes of this Redis broker (setting `broker`)")
    s.add_argument("--shard", metavar="I/N", default=None,
                   help="index only the files whose folder hashes to I of N: one shard of a collection split "
                        "over N homes, searched as one through the setting `shards`")
    s.set_defaults(func=managing.cmd_index)

    s = sub.add_parser("retry", parents=[common], help="convert again the files whose failure may pass now",
                       description="Convert again, now, the files at or under PATH (default: all) whose conversion "
                                   "failed in a way that may pass another time: a timeout, a crash, the memory "
                                   "limit, an unreadable file, a missing converter. These are also tried again by themselves, after a "
                                   "back-off (`deskdex status` says when). Other failures (corrupt, unsupported, too "
                                   "large) wait for the file to change. A running daemon does the work; without one, "
                                   "this command does.")
    s.add_argument("path", nargs="?", metavar="PATH")
    s.add_argument("--workers", type=positive, default=None, help="converter processes without a daemon "
                                                                  "(default: all cores)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    s.set_defaults(func=managing.cmd_retry)

    s = sub.add_parser("search", parents=[common], help="search the index",
                       description="Search the index. Words are ANDed; use OR, NOT, -word, \"phrases\", prefix*, "
                                   "fuzzy~ and filters such as title:, in:, ext:, type:, after:, size:>10MB "
                                   "(docs/search.md has them all).")
    s.add_argument("query", nargs="*", help="the words (optional with --similar)")
    add_search_options(s)
    s.set_defaults(func=reading.cmd_search)

    s = sub.add_parser("show", parents=[common], help="print the stored tagged text of a document",
                       description="Print the tagged text stored for a file path or URI (file:///...#member too).")
    s.add_argument("target", metavar="PATH_OR_URI")
    s.set_defaults(func=reading.cmd_show)

    s = sub.add_parser("status", parents=[common], help="documents, failures, sizes and locations",
                       description="How many documents, how many failed and why, index and store sizes, where they live.")
    s.add_argument("--json", action="store_true")
    s.add_argument("--failures", action="store_true", help="list every failed file with its reason")
    s.set_defaults(func=reading.cmd_status)

    s = sub.add_parser("formats", parents=[common], help="list every format deskdex converts",
                       description="Every format with its MIME types, file extensions and the library behind it.")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=reading.cmd_formats)

    s = sub.add_parser("convert", parents=[common], help="convert one file and print it, indexing nothing",
                       description="Convert one file without indexing it: see why a file is or is not found.")
    s.add_argument("file", metavar="FILE")
    s.add_argument("--format", choices=("tagged", "text", "main"), default="tagged",
                   help="tagged text (default), plain text, or only the main content (boilerplate left out)")
    s.set_defaults(func=reading.cmd_convert)

    s = sub.add_parser("dups", parents=[common], help="duplicate clusters, or the near-duplicates of one file",
                       description="Without PATH: every cluster of exact and near-duplicates, largest first, the "
                                   "original first and each other document identical (the same bytes), the same "
                                   "text (in another format) or similar (NN %), with the bytes deleting the "
                                   "identical copies would reclaim. With PATH: the near-duplicates of that file "
                                   "(indexed or not), with the share of words in common.")
    s.add_argument("path", nargs="?", metavar="PATH")
    s.add_argument("--json", action="store_true")
    s.add_argument("--limit", type=positive, default=None, help="show at most this many clusters")
    s.set_defaults(func=reading.cmd_dups)

    s = sub.add_parser("daemon", parents=[common], help="run the indexer in the foreground (what `make run` starts)",
                       description="Index the configured folders (default: Documents, else home), then stay up. Ctrl-C stops.")
    s.add_argument("--once", action="store_true", help="exit after the first full index")
    s.add_argument("--system", action="store_true",
                   help="enterprise mode, as root: index the homes of the configured accounts (setting `accounts`; "
                        "default every regular account) and serve every local user what they may read")
    s.add_argument("--broker", metavar="URL", default=None,
                   help="hand conversions to `deskdex worker` processes of this Redis broker (setting `broker`)")
    s.add_argument("--web", metavar="HOST:PORT", default=None,
                   help="serve the search page and REST API there (setting `web`; docs/web.md)")
    s.set_defaults(func=managing.cmd_daemon)

    s = sub.add_parser("web", parents=[common], help="search from the browser: open the daemon's web page",
                       description="Open the running daemon's search page in the browser, at an address carrying "
                                   "its secret token. With no daemon running, run one in the foreground with the "
                                   "web page on 127.0.0.1 (Ctrl-C stops both). docs/web.md")
    s.add_argument("--address", metavar="HOST:PORT", default="127.0.0.1:0",
                   help="where a daemon started here serves the page (default: any free port of 127.0.0.1)")
    s.add_argument("--no-browser", action="store_true", help="print the address only")
    s.set_defaults(func=managing.cmd_web)

    s = sub.add_parser("serve", parents=[common], help="answer other machines' searches of this index (a shard)",
                       description="Answer the merged searches of other machines, whose setting shards names this "
                                   "one as http://HOST:PORT, on the address of the setting listen (or --listen), to "
                                   "requests bearing the setting token; read-only, beside the daemon or `deskdex "
                                   "index`, until Ctrl-C or SIGTERM (docs/scale-out.md).")
    s.add_argument("--listen", metavar="HOST:PORT", default=None, help="the address (default: the setting listen)")
    s.set_defaults(func=managing.cmd_serve)

    s = sub.add_parser("worker", parents=[common],
                       help="convert files and fetch pages for daemons on other machines (Celery)",
                       description="Convert files and fetch crawl requests handed out through a Redis broker by "
                                   "`deskdex daemon --broker`, `deskdex index --broker` or `deskdex crawl --broker`, "
                                   "on any machine that reads the files at the same paths, until Ctrl-C or SIGTERM "
                                   "(the tasks under way are finished first). Needs "
                                   "`pip install 'deskdex[cluster]'` (docs/scale-out.md).")
    s.add_argument("--broker", metavar="URL", default=None, help="the Redis URL (default: the setting `broker`)")
    s.add_argument("--concurrency", type=positive, default=None,
                   help="files converted at once, each in its own process (default: all cores)")
    s.add_argument("--name", default=None, help="this worker's name in `deskdex status` (default: host and PID)")
    s.add_argument("--crawl-queues", type=queue_list, default=None, metavar="K,K...",
                   help="fetch only the sites of these crawl queues, 0 to 7 (default: all; none: -)")
    s.add_argument("--allow-private", action="store_true",
                   help="fetch private, loopback and link-local addresses when a crawl asks to (default: refused)")
    s.set_defaults(func=managing.cmd_worker)

    for name, help_text in (("pause", "pause indexing in the running daemon"),
                            ("resume", "resume indexing in the running daemon")):
        s = sub.add_parser(name, parents=[common], help=help_text, description=help_text.capitalize() + ".")
        s.set_defaults(func=managing.cmd_pause_resume)

    s = sub.add_parser("watch", parents=[common], help="watched folders: add, remove, list",
                       description="Change the watched folders. A running daemon picks the change up at once; "
                                   "otherwise it applies on the next start.")
    s.add_argument("action", choices=("add", "remove", "list"))
    s.add_argument("paths", nargs="*", metavar="PATH")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=managing.cmd_watch)

    s = sub.add_parser("exclude", parents=[common], help="excluded patterns (gitignore style): add, remove, list",
                       description="Patterns of files and folders to leave out, gitignore style (also read from "
                                   ".deskdexignore files in watched folders).")
    s.add_argument("action", choices=("add", "remove", "list"))
    s.add_argument("patterns", nargs="*", metavar="PATTERN")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=managing.cmd_exclude)

    s = sub.add_parser("service", parents=[common], help="run the daemon as a user service: install, uninstall, status",
                       description="A systemd user unit on Linux, a launchd agent on macOS, a scheduled task on "
                                   "Windows, each running `deskdex daemon` at idle priority.")
    s.add_argument("action", choices=("install", "uninstall", "status"))
    s.add_argument("--no-start", action="store_true", help="install without starting it now")
    s.add_argument("--system", action="store_true",
                   help="as root, on Linux: `deskdex daemon --system` as a system service (every account), and the "
                        "desktop's search box for every user (docs/desktop.md)")
    s.add_argument("--prefix", default="/usr/local", metavar="DIR",
                   help="with --system: the search box's files go under DIR/share (default /usr/local)")
    s.add_argument("--root", default="/", metavar="DIR",
                   help="with --system: write the files under DIR, as a package's staging folder, registering nothing")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=managing.cmd_service)

    from .crawl import add_commands as add_crawl
    from .shellsearch import add_command as add_shell_search
    from .sourcecmd import add_command as add_source
    from .tray import add_command as add_tray

    add_crawl(sub, common, managing.crawl_env)
    add_source(sub, common)
    add_tray(sub, common)
    add_shell_search(sub, common)
    p.commands = tuple(sub.choices or ())
    return p


if __name__ == "__main__":
    sys.exit(main())
