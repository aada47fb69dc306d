"""Commands that change what is indexed or how: ``deskdex index``, ``retry``, ``daemon``, ``pause``, ``resume``,
``watch``, ``exclude``, ``service`` and the environment ``deskdex crawl`` runs in. A running
daemon is told at once; without one, the config file is changed and read on the next start."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from deskdex import settings
from deskdex.errors import BadArgs, ConfigError, DaemonUnavailable, Interrupted
from deskdex.paths import Home

from .ask import ask_daemon, home_of
from .client import call
from .reading import print_json, say

if TYPE_CHECKING:
    from .crawl import CrawlEnv

EXIT_ERROR, EXIT_USAGE = 1, 2


def cmd_index(args: argparse.Namespace) -> int:
    from deskdex.pipeline import index_once, shard_setting

    missing = [p for p in args.paths if not os.path.lexists(p)]
    if missing:
        print(f"deskdex: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return EXIT_USAGE
    paths = [os.path.abspath(p) for p in args.paths]
    home = home_of(args)
    shard = None
    if args.shard is not None:
        from deskdex.webcrawl import parse_shard

        try:
            shard = parse_shard(args.shard)
        except ValueError:
            print(f"deskdex: --shard wants I/N with 0 <= I < N, not {args.shard!r}", file=sys.stderr)
            return EXIT_USAGE
    if (shard or args.broker) and ask_daemon(args, "status") is not None:
        print("deskdex: the daemon of this home indexes with its own settings: stop it to index with "
              "--shard or --broker, or set them for it", file=sys.stderr)
        return EXIT_USAGE
    # The daemon holds the writer: hand it the job. Without one, do it here.
    summary = _index_by_daemon(home.socket, paths, progress=not args.no_progress)
    if summary is None:
        cfg = _with_given(load_leniently(home.ensure()), {} if args.broker is None else {"broker": args.broker})
        workers = args.workers or os.cpu_count() or 2
        with stop_on_signal() as stop:
            summary = index_once(cfg, paths, workers=workers, progress=not args.no_progress, stop=stop,
                                 shard=shard or shard_setting(cfg)).to_json()
    if args.json:
        print_json(summary)
    else:
        for line in format_summary(summary).split("\n"):
            say(line)
    return 0


def load_leniently(home: Home) -> settings.Config:
    """The settings of ``home`` for a run that must not stop on a hand-edited value: what does not
    fit is said on stderr and left at its default (or left out, one pattern of a list)."""
    problems: list[str] = []
    cfg = settings.load(home, problems)
    for problem in problems:
        print(f"deskdex: warning: {problem}", file=sys.stderr)
    return cfg


def _index_by_daemon(socket_path: str, paths: list[str], progress: bool) -> dict[str, Any] | None:
    """The summary of the running daemon indexing ``paths``; None when no daemon runs. While it
    works, a line on a terminal shows the files it has to go (from ``status``, asked on a second
    connection)."""
    import shutil
    import threading

    from deskdex.errors import DaemonUnavailable

    from .client import Client, call
    from .render import terminal_safe

    try:
        client = Client(socket_path, timeout=None)  # as long as the indexing takes
    except DaemonUnavailable:
        return None
    answer: list[dict[str, Any]] = []
    failed: list[BaseException] = []

    def ask() -> None:
        try:
            answer.append(client.call("index", paths=paths))
        except BaseException as exc:  # re-raised below, in the command's thread
            failed.append(exc)

    worker = threading.Thread(target=ask, name="deskdex-index", daemon=True)
    worker.start()
    shown = progress and sys.stderr.isatty()
    try:
        worker.join(0.5)
        while worker.is_alive():
            if shown:
                try:
                    st = call(socket_path, "status")
                    line = terminal_safe(f"the daemon is indexing: {st.get('queue') or 0} files to go  "
                                         f"{st.get('current') or ''}")
                except DaemonUnavailable:
                    line = "waiting for the daemon"
                width = shutil.get_terminal_size().columns - 1
                sys.stderr.write("\r" + line[:width].ljust(width))
                sys.stderr.flush()
            worker.join(0.5)
    except KeyboardInterrupt:
        print("\ndeskdex: the daemon goes on indexing what it was given; `deskdex status` shows it",
              file=sys.stderr)
        raise
    finally:
        if shown:
            sys.stderr.write("\r" + " " * (shutil.get_terminal_size().columns - 1) + "\r")
        if not worker.is_alive():
            client.close()
    if failed:
        raise failed[0]
    return answer[0]


def cmd_retry(args: argparse.Namespace) -> int:
    path = os.path.abspath(os.path.expanduser(args.path)) if args.path else None
    result = ask_daemon(args, "retry", path=path)
    if result is None:
        from deskdex.pipeline import retry_once

        cfg = settings.load(home_of(args).ensure())
        with stop_on_signal() as stop:
            n, summary = retry_once(cfg, path, workers=args.workers or os.cpu_count() or 2,
                                    progress=not args.no_progress, stop=stop)
        result = {"retrying": n, **summary.to_json()}
        text = f"tried {_files(n)} again\n{format_summary(summary.to_json())}"
    else:
        text = f"the daemon tries {_files(result['retrying'])} again now (deskdex status --failures)"
    if args.json:
        print_json(result)
    elif not result["retrying"]:
        print("no failed file to try again here (a corrupt, unsupported or too large file is tried again "
              "when it changes)")
    else:
        print(text)
    return 0


def _files(n: int) -> str:
    return f"{n} failed file{'s' if n != 1 else ''}"


@contextmanager
def stop_on_signal() -> Iterator[threading.Event]:
    """Ctrl-C, and SIGTERM alike, stop a one-shot run: the conversions under way are abandoned
    (their files are neither failed nor done: the next run converts them) and what is done is
    committed. The handler raises KeyboardInterrupt where the main thread is, as Python's own does,
    and also sets the event it yields, which the indexer looks at while it waits for conversions: a
    KeyboardInterrupt raised inside a library's import can be swallowed there (lxml's module
    initialisation, tests/test_retry.py), and the run then went on to the file's time limit. A
    SIGINT this process was started ignoring (``nohup``, a background job) stays ignored."""
    stop = threading.Event()

    def interrupt(signum: int, frame: object) -> None:
        stop.set()
        raise KeyboardInterrupt

    signals = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) != signal.SIG_IGN else [])
    previous = {sig: signal.signal(sig, interrupt) for sig in signals}
    try:
        yield stop
    except Interrupted:
        raise KeyboardInterrupt from None  # the indexer saw the event: the same stop as Ctrl-C's
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def format_summary(s: dict[str, Any]) -> str:
    """A summary of indexing (Summary.to_json(), as the index op answers) for people."""
    lines = [f"indexed {s['indexed']}, unchanged {s['unchanged']}, moved or copied {s['reused']}, "
             f"removed {s['removed']}, members {s['members']}, failed {s['failed']} in {s['seconds']:.1f} s"]
    for reason, n in sorted(s["failed_by_reason"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  failed ({reason}): {n}")
    failures = s["failures"]
    for f in failures[:10]:
        lines.append(f"    {f['path']}: {f['message']}")
    if len(failures) > 10:
        lines.append(f"    ... and {len(failures) - 10} more (deskdex status --failures)")
    return "\n".join(lines)


def cmd_daemon(args: argparse.Namespace) -> int:
    from deskdex.daemon import load_for_daemon, run_daemon

    if args.system and os.geteuid() != 0:
        logging.getLogger(__name__).warning("--system without root: only what this account may read is indexed")
    home = Home.resolve(getattr(args, "home", None), system=args.system).check().ensure(system=args.system)
    # Whatever the config file holds, the daemon starts: what does not fit is reported in status.
    cfg, problems = load_for_daemon(home, args.system)
    given = {k: v for k, v in (("broker", args.broker), ("web", getattr(args, "web", None))) if v is not None}
    return run_daemon(_with_given(cfg, given), once=args.once, system=args.system, problems=problems)


def _with_given(cfg: settings.Config, given: dict[str, str]) -> settings.Config:
    """``cfg`` with the command line's values (``--broker``, ``--web``) in place of the settings, for this run."""
    if not given:
        return cfg
    return dataclasses.replace(cfg, given={**cfg.given, **given}).given_over(cfg.values)


def cmd_serve(args: argparse.Namespace) -> int:
    from deskdex.daemon import serve_shard as serve

    home = home_of(args).ensure()
    cfg = settings.load(home)
    listen = args.listen or cfg.settings.listen
    if not listen:
        print("deskdex: nothing to listen on: give --listen HOST:PORT or set `listen`", file=sys.stderr)
        return EXIT_USAGE
    if not getattr(args, "verbose", False):
        # A server's log names what it refused and why (one line each), as the daemon's does.
        logging.getLogger().setLevel(logging.INFO)
    s = cfg.settings
    return serve(home.data_dir, listen, s.token, s.tls_cert, s.tls_key)


def cmd_worker(args: argparse.Namespace) -> int:
    home = home_of(args).ensure()
    cfg = settings.load(home)
    broker = args.broker or cfg.settings.broker
    if not broker:
        print("deskdex: no broker: give --broker redis://HOST:PORT/N or set `broker`", file=sys.stderr)
        return EXIT_USAGE
    from deskdex.cluster import check_setting

    check_setting(broker, system=False)  # ConfigError, saying what to install, without Celery
    from deskdex.cluster import run_worker

    return run_worker(cfg, broker, args.concurrency or os.cpu_count() or 2, name=args.name,
                      verbose=getattr(args, "verbose", False), crawl_queues=args.crawl_queues,
                      allow_private=args.allow_private)


def cmd_pause_resume(args: argparse.Namespace) -> int:
    result = ask_daemon(args, args.command)
    if result is None:
        print("deskdex: no daemon is running for this home (start one with `deskdex daemon`)", file=sys.stderr)
        return EXIT_ERROR
    print(f"indexing {'paused' if result['paused'] else 'resumed'} (state: {result['state']})")
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    home = home_of(args).ensure()
    if args.action != "list" and not args.paths:
        print(f"deskdex: watch {args.action} needs at least one PATH", file=sys.stderr)
        return EXIT_USAGE
    result = None
    for p in args.paths if args.action != "list" else []:
        path = os.path.abspath(os.path.expanduser(p))
        if args.action == "add" and not os.path.isdir(path):
            print(f"deskdex: not a folder: {p}", file=sys.stderr)
            return EXIT_USAGE
        if args.action == "add":
            settings.check("folders", [path])  # ConfigError (exit 1) before anything is saved
        result = ask_daemon(args, f"watch_{args.action}", path=path)
        if result is None and not _change_list(home, "folders", load_leniently(home).folders(), args.action, path,
                                               "not a watched folder"):
            return EXIT_ERROR
    if result is None:
        result = ask_daemon(args, "watch_list")
    folders: list[dict[str, Any]] = result["folders"] if result else \
        [{"path": f} for f in settings.load(home, []).folders()]
    if args.json:
        print_json({"folders": folders})
    else:
        for f in folders:
            extra = f"  {f['documents']} documents, {f['failed']} failed" if "documents" in f else ""
            say(f"{f['path']}{extra}{'  (offline)' if f.get('offline') else ''}")
    return 0


def _change_list(home: Home, key: str, current: list[str], action: str, item: str, absent: str) -> bool:
    """No daemon runs: add ``item`` to, or remove it from, the list setting ``key`` (now ``current``) in
    the config file, read on the next start. False, once said why, when removing what is not there."""
    if action == "remove" and item not in current and _valid(key, item):
        print(f"deskdex: {absent}: {item}", file=sys.stderr)
        return False
    # (An invalid item is not in ``current``, the lenient load left it out: saving ``current`` removes it.)
    if action == "add":  # settings.save checks the value first: a ConfigError leaves the file as it was
        settings.save(home, {key: current if item in current else current + [item]})
    else:
        settings.save(home, {key: [x for x in current if x != item]})
    return True


def _valid(key: str, item: str) -> bool:
    try:
        settings.check(key, [item])
    except ConfigError:
        return False
    return True


def cmd_exclude(args: argparse.Namespace) -> int:
    home = home_of(args).ensure()
    if args.action != "list" and not args.patterns:
        print(f"deskdex: exclude {args.action} needs at least one PATTERN", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "add" and any(not p.strip() for p in args.patterns):
        print("deskdex: an empty pattern excludes nothing: give a gitignore-style pattern", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "add":
        # Every pattern is checked, with the scanner's matcher, before one is saved or sent: a pattern
        # that does not compile would stop every scan (settings.check raises ConfigError: exit 1).
        settings.check("exclude", list(args.patterns))
    for pattern in args.patterns if args.action != "list" else []:
        # A pattern that does not compile was left out when the file was read: the daemon never used
        # it, and knows nothing to remove. It goes from the file, which a running daemon follows.
        asked = ask_daemon(args, f"exclude_{args.action}", pattern=pattern) \
            if args.action == "add" or _valid("exclude", pattern) else None
        if asked is None and not _change_list(home, "exclude", list(load_leniently(home).settings.exclude), args.action,
                                              pattern, "not an excluded pattern"):
            return EXIT_ERROR
    # What the daemon uses: the valid ones (a list says why any other is left out).
    patterns = list((load_leniently(home) if args.action == "list" else settings.load(home, [])).settings.exclude)
    if args.json:
        print_json({"exclude": patterns})
    else:
        for line in patterns or ["(no exclusions beyond the built-in ones)"]:
            say(line)
    return 0


def cmd_service(args: argparse.Namespace) -> int:
    from . import service

    home = getattr(args, "home", None)
    if args.system:
        if home is not None:
            raise BadArgs("--system serves every account from the system's folders: it takes no --home")
        if args.action == "install":
            written = service.install_system(args.root, args.prefix, start=not args.no_start)
            print("installed the system service and the search box for every user:\n"
                  + "".join(f"  {f.path}\n" for f in written), end="")
        elif args.action == "uninstall":
            removed = service.uninstall_system(args.root, args.prefix)
            print(f"removed {removed[0].path} and the search box's files under {args.prefix}/share")
        else:
            files = service.system_files(args.root, args.prefix)
            present = {f.path: os.path.exists(f.path) for f in files}
            if args.json:
                print_json(present)
            else:
                print("".join(f"{'installed' if there else 'missing'}: {path}\n" for path, there in present.items()),
                      end="")
        return 0
    if args.root != "/" or args.prefix != service.SYSTEM_PREFIX:
        raise BadArgs("--root and --prefix go with --system")
    if args.action == "install":
        unit = service.install(home, start=not args.no_start)
        print(f"installed {unit.kind} service: {unit.path}")
    elif args.action == "uninstall":
        unit = service.uninstall()
        print(f"removed {unit.path}")
    else:
        st = service.status()
        if args.json:
            print_json(st)
        else:
            print(f"{st['kind']}: {'installed' if st['installed'] else 'not installed'} ({st['path']}), {st['state']}")
    return 0


def crawl_env(args: argparse.Namespace) -> CrawlEnv:
    from deskdex.webcrawl import STATE_FILE

    from .crawl import CrawlEnv

    home = home_of(args).ensure()

    def open_sink() -> Any:
        from deskdex.converters import Limits
        from deskdex.index import Collection
        from deskdex.pipeline import IndexSink

        cfg = settings.load(home)
        return IndexSink(Collection.from_settings(cfg, writable=True), Limits.from_settings(cfg),
                         commit_seconds=cfg.settings.commit_seconds)

    def known_pages() -> Any:
        from deskdex.pipeline import read_known_pages

        return read_known_pages(home.data_dir)

    def open_remote(broker: str | None) -> Any:
        from deskdex.cluster import remote_crawl

        return remote_crawl(_with_given(settings.load(home), {} if broker is None else {"broker": broker}))

    return CrawlEnv(config_path=home.config_file, state_path=os.path.join(home.data_dir, STATE_FILE),
                    open_sink=open_sink, known_pages=known_pages,
                    ask_daemon=lambda op, **kw: ask_daemon(args, op, **kw), open_remote=open_remote)


def cmd_web(args: argparse.Namespace) -> int:
    """The running daemon's web page, or a daemon run here with one (as `jupyter notebook` runs its
    server): the address with its token is printed and opened in the browser."""
    from deskdex.web import read_url

    home = home_of(args)
    try:
        call(home.socket, "status")
        running = True
    except DaemonUnavailable:
        running = False
    if running:
        served = read_url(home.runtime_dir)
        if served is None:
            print("deskdex: the running daemon serves no web page: set `web = \"127.0.0.1:0\"` in "
                  f"{home.config_file} and restart it, or stop it and run `deskdex web`", file=sys.stderr)
            return EXIT_ERROR
        _show_url(served["url"], args.no_browser)
        return 0
    threading.Thread(target=_open_when_served, args=(home.runtime_dir, args.no_browser), daemon=True).start()
    args.once, args.system, args.broker, args.web = False, False, None, args.address
    return cmd_daemon(args)


def _open_when_served(runtime_dir: str, no_browser: bool) -> None:
    from deskdex.web import read_url

    for _ in range(600):  # the daemon may first take a while to open a big index
        served = read_url(runtime_dir)
        if served is not None and served.get("pid") == os.getpid():
            _show_url(served["url"], no_browser)
            return
        time.sleep(0.1)


def _show_url(url: str, no_browser: bool) -> None:
    print(f"deskdex web: {url}", flush=True)
    if not no_browser:
        import webbrowser

        webbrowser.open(url)
