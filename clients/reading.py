"""Commands that read: ``deskdex search``, ``show``, ``status``, ``formats``, ``convert``, ``dups``.
Each asks the home's daemon when one runs, and reads the index directly otherwise."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from deskdex.cluster import recorded_broker
from deskdex.errors import ConfigError, DeskdexError
from deskdex.paths import Home
from deskdex.protocol import REMOTE_SOURCES
from deskdex.sizes import human

from .ask import ask, ask_daemon, home_given, home_of
from .render import print_results, raw_path, shown_location, terminal_safe

if TYPE_CHECKING:
    from deskdex.protocol import SearchHit, SearchResults
    from deskdex.settings import Config

EXIT_ERROR, EXIT_USAGE = 1, 2


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


def readable(text: str) -> str:
    """A document's text as ``show`` and ``convert`` print it: exact to another program, its lines
    made safe on a terminal (a document, like a name, may hold escape sequences)."""
    return terminal_safe(text, lines=True) if sys.stdout.isatty() else text


def say(text: str, file: Any = None) -> None:
    """Print one line for people to read: names in it are anyone's to choose (render.terminal_safe)."""
    print(terminal_safe(text), file=file or sys.stdout)


def cmd_search(args: argparse.Namespace) -> int:
    if args.null and not args.paths:
        print("deskdex: -0/--null goes with --paths: deskdex search WORDS --paths -0", file=sys.stderr)
        return EXIT_USAGE
    if not args.query and args.similar is None:
        print("deskdex: search what? deskdex search WORDS (or --similar URI)", file=sys.stderr)
        return EXIT_USAGE
    limit = max(args.limit, args.open or 0)
    query = " ".join(args.query)
    snippets = not (args.paths or args.open)
    results = found(home_given(args), query, limit=limit, offset=args.offset, sort=args.sort, all=args.all,
                    snippets=snippets, similar=args.similar, words=args.words)
    if args.open:
        hits = results["hits"]
        if args.open > len(hits):
            print(f"deskdex: only {len(hits)} results", file=sys.stderr)
            return EXIT_ERROR
        hit = hits[args.open - 1]
        # a document of a mail account or share: a copy of what its server holds now (a message as an .eml)
        target = _fetched_original(args, hit) if hit.get("source") in REMOTE_SOURCES else _target(hit)
        return open_with_default_app(target)
    print_results(results, as_json=args.json, paths=args.paths, null=args.null, folded=not (args.all or args.similar))
    return 0


def found(chosen: str | None, query: str, *, limit: int = 10, offset: int = 0, sort: str = "relevance",
          all: bool = False, snippets: bool = True, similar: str | None = None, words: bool = False) -> SearchResults:
    """A search as ``deskdex search`` answers it (and the Python API, clients/api.py): the daemon's
    answer when one runs for the home, else the home's index and shards read directly."""
    results: SearchResults | None = ask(chosen, "search", query=query, limit=limit, offset=offset, sort=sort,
                                        all=all, snippets=snippets, similar=similar, words=words)
    if results is not None:
        return results
    from contextlib import ExitStack

    from deskdex import settings
    from deskdex.index import Collection, open_shards, search_shards

    cfg = settings.load(Home.resolve(chosen).check())
    with ExitStack() as stack:
        colls = [stack.enter_context(Collection.open(cfg.home.data_dir)),
                 *open_shards(stack, cfg.settings.shards, cfg.settings.token, cfg.settings.tls_ca)]
        return search_shards(colls, query, limit=limit, offset=offset, sort=sort, snippets=snippets,
                             collapse=not all, similar=similar, words=words)


def _target(hit: SearchHit) -> str:
    """What to open for a hit: a web page, its URL; a file (a member: its container) by its exact
    name, which the path shown may not be (U+FFFD for bytes that are not UTF-8)."""
    return hit["uri"] if hit.get("source") == "web" else os.fsdecode(raw_path(hit))


def _fetched_original(args: argparse.Namespace, hit: SearchHit) -> str:
    """A copy of a source's document in the user's cache folder, fetched through the daemon (which
    holds the source's password): the path to open. DaemonUnavailable when no daemon runs."""
    import base64

    from platformdirs import user_cache_dir

    from deskdex.errors import DaemonUnavailable

    answer = ask(home_given(args), "original", uri=hit["uri"])
    if answer is None:
        raise DaemonUnavailable("opening a message or a file of a share needs the daemon, which reads it from "
                                "its server: start it with `deskdex daemon`")
    folder = os.path.join(user_cache_dir("deskdex"), "opened")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, os.path.basename(answer["name"]) or "document")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # a mail is nobody else's to read
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(answer["data"]))
    return path


def open_with_default_app(target: str) -> int:
    import shutil
    import subprocess

    opener = {"darwin": ["open"], "win32": ["cmd", "/c", "start", ""]}.get(sys.platform, ["xdg-open"])
    if not shutil.which(opener[0]):
        print(f"deskdex: no {opener[0]} to open {target}", file=sys.stderr)
        return EXIT_ERROR
    return subprocess.call([*opener, target])


def uri_of(target: str) -> str:
    """The URI of a document named by its path (relative to the working folder) or by its URI."""
    from deskdex.paths import path_to_uri

    return target if "://" in target else path_to_uri(os.path.abspath(target))


def cmd_show(args: argparse.Namespace) -> int:
    from deskdex.index import Collection

    target = args.target
    with Collection.open(home_of(args).data_dir) as coll:
        row = coll.get(uri_of(target))
        if row is None:
            print(f"deskdex: not in the index: {target}", file=sys.stderr)
            return EXIT_ERROR
        if row.status != "ok":
            say(f"deskdex: {target} failed to convert ({row.reason}): {row.error}", file=sys.stderr)
            return EXIT_ERROR
        text = coll.tagged_text(row)
    if text is None:
        print(f"deskdex: {target} is indexed by name only (no text could be extracted)", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(readable(text))
    return 0


def current_status(chosen: str | None, failures: bool = False) -> dict[str, Any]:
    """What ``deskdex status --json`` prints (and the Python API's status reads): the daemon's
    status when one runs for the home, else the counts read from its index; its cluster and shards."""
    home = Home.resolve(chosen).check()
    info: dict[str, Any] = {"home": {"config": home.config_dir, "data": home.data_dir, "runtime": home.runtime_dir}}
    live = ask(chosen, "status", failures=failures)
    if live is not None:
        info.update(live, daemon=True)
    else:
        info.update(_status_from_index(home.data_dir, failures), daemon=False, state="idle", queue=0)
        info["ocr"] = _ocr_state(home)
    cfg = _settings_or_none(home)
    # The broker of the daemon that answered (its --broker, or the setting it started with), else the setting's.
    running = recorded_broker(home.runtime_dir) if live is not None else ""
    cluster = _cluster_state(cfg, running) if cfg is not None else None
    if cluster is not None:
        info["cluster"] = cluster
    if cfg is not None and cfg.settings.shards:
        s = cfg.settings
        info["shards"] = [{"home": p, **_shard_status(p, s.token, s.tls_ca)} for p in s.shards]
    return info


def cmd_status(args: argparse.Namespace) -> int:
    home = home_of(args)
    info = current_status(home_given(args), bool(args.failures))
    cluster = info.get("cluster")
    if args.json:
        print_json(info)
        return 0
    daemon = f"running (pid {info.get('pid')}): {info['state']}, {info['queue']} waiting" if info["daemon"] \
        else "not running"
    if info.get("state_reason"):
        daemon += f" ({info['state_reason']})"
    say(f"daemon:    {daemon}")
    if info.get("current"):
        say(f"working on {info['current']}")
    say(f"documents: {info['documents']}")
    say(f"failed:    {info['failed']}")
    for k, v in info["failed_by_reason"].items():
        say(f"  {k}: {v}")
    if info.get("ocr"):
        say(f"ocr:       {info['ocr']}")
    if info.get("retries"):
        say(f"retrying:  {info['retries']} of them, the next {_when(info['next_retry'])} (deskdex retry: now)")
    if info.get("index_bytes") is not None:  # None for another user of an enterprise-mode daemon
        say(f"index:     {_size(info['index_bytes'])} in {os.path.join(home.data_dir, 'tantivy')}")
        say(f"store:     {_size(info['store_bytes'])} in {os.path.join(home.data_dir, 'catalog.sqlite')}")
    for source in info.get("sources") or []:
        say(f"source:    {source_line(source)}")
    if cluster is not None:
        from deskdex.cluster import describe

        say(f"cluster:   {describe(cluster)}")
    for shard in info.get("shards", []):
        say(f"shard:     {shard['home']}: " + (shard["note"] if "note" in shard else
                                               f"{shard['documents']} documents, served" if shard.get("served") else
                                               f"{shard['documents']} documents, {shard['failed']} failed, "
                                               f"{_size(shard['index_bytes'] + shard['store_bytes'])}"))
    if info.get("cpu_seconds") is not None:
        say(f"cpu:       {info['cpu_seconds']} s used since start")
    if info.get("last_commit"):
        say(f"committed: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(info['last_commit']))}")
    say(f"config:    {home.config_file}")
    for problem in info.get("settings_problems", []):  # also in the daemon's log
        say(f"config error: {problem}")
    for note in ([info["note"]] if info.get("note") else []) + list(info.get("notes", [])):
        say(f"note:      {note}")
    for f in info.get("failures", []):
        say(f"  {f['path'] if '#' not in f['uri'] else f['uri']}: {f['reason']}: {f['message']}{_retried(f)}")
    return 0


def source_line(r: dict[str, Any]) -> str:
    """One source as ``status`` and ``source list`` show it: state, documents, last sync, failures, why."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["last_sync"])) if r.get("last_sync") else "never"
    out = f"{r['url']}: {r['state']}"
    if "documents" in r:
        out += f", {r['documents']} documents, last sync {when}"
    if r.get("failed"):
        out += f", {r['failed']} failed"
    if r.get("error"):
        out += f" ({r['error']})"
    return out


def _shard_status(where: str, token: str, ca: str) -> dict[str, Any]:
    """A shard's size: read from its folder, or asked of the machine that serves it."""
    from contextlib import closing

    from deskdex.errors import StoreError
    from deskdex.index import RemoteShard, data_dir_of

    if where.startswith(("http://", "https://")):
        try:
            with closing(RemoteShard(where, token, ca)) as shard:
                return {"documents": shard.stats([]).num_docs, "served": True}
        except StoreError as exc:
            return {"note": str(exc)}
    return {k: v for k, v in _status_from_index(data_dir_of(where), False).items()
            if k in ("documents", "failed", "index_bytes", "store_bytes", "last_commit", "note")}


def _settings_or_none(home: Home) -> Config | None:
    """The home's settings; None when its config cannot be read (the daemon's status says why)."""
    from deskdex import settings

    try:
        return settings.load(home)
    except DeskdexError:
        return None


def _cluster_state(cfg: Config, running: str = "") -> dict[str, Any] | None:
    """With a broker (the running daemon's, else the setting): the cluster as the broker sees it
    (cluster/status.py); None without."""
    broker = running or cfg.settings.broker
    if not broker:
        return None
    from deskdex.cluster import check_setting

    try:
        check_setting(broker, system=False)
    except ConfigError as exc:  # Celery missing: said in place of the cluster's state
        return {"broker": "(set)", "error": f"cannot be read: {exc}"}
    from deskdex.cluster import cluster_status

    return cluster_status(broker)


def _when(t: float) -> str:
    """When a failed file is tried again, for people."""
    if t <= time.time():
        return "now"
    return time.strftime("at %H:%M:%S" if t - time.time() < 43200 else "on %Y-%m-%d at %H:%M", time.localtime(t))


def _retried(failure: dict[str, Any]) -> str:
    if failure.get("retry_at") is None:
        return ""
    n = failure.get("attempts") or 0
    return f" (failed {n} time{'s' if n != 1 else ''}; tried again {_when(failure['retry_at'])})" if n else \
        f" (tried again {_when(failure['retry_at'])})"


def _ocr_state(home: Home) -> str:
    """Whether OCR runs here, with this home's settings (the daemon says so itself when it runs)."""
    from deskdex import settings
    from deskdex.converters import Limits, ocr_state as state

    try:
        return state(Limits.from_settings(settings.load(home, problems=[])).ocr)
    except DeskdexError as exc:
        return f"unknown: {exc}"


def _status_from_index(data_dir: str, failures: bool) -> dict[str, Any]:
    from deskdex.index import Collection, reports

    info: dict[str, Any] = {}
    try:
        with Collection.open(data_dir) as coll:
            info.update(coll.stats.counts())
            info.update(coll.stats.retries())
            info.update(coll.stats.sizes())
            last = coll.stats.last_commit()
            info["last_commit"] = float(last) if last else None
            if failures:
                info["failures"] = reports.failures(coll)
    except DeskdexError as exc:
        info.update({"documents": 0, "failed": 0, "failed_by_reason": {}, "index_bytes": 0, "store_bytes": 0,
                     "note": str(exc)})
    return info


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def cmd_formats(args: argparse.Namespace) -> int:
    from deskdex.converters import default_registry

    formats: list[dict[str, Any]] = []
    for fmt in default_registry().formats:
        missing = fmt.missing()
        formats.append({"name": fmt.name, "mimes": list(fmt.mimes), "extensions": list(fmt.extensions),
                        "library": fmt.library, "available": not missing,
                        "missing": [{"names": list(n.names), "install": n.install} for n in missing]})
    if args.json:
        print_json({"formats": formats})
        return 0
    for f in formats:
        exts = " ".join("." + e for e in f["extensions"]) or "(by content)"
        print(f"{f['name']:<28} {f['library']:<20} {exts}\n{'':<28} {', '.join(f['mimes'])}")
        for need in f["missing"]:
            print(f"{'':<28} not available here: install {' or '.join(need['names'])}: {need['install']}")
    return 0


def not_one_file(path: str) -> str | None:
    """Why ``path`` is not a file the command can take, or None when it is."""
    if os.path.isdir(path):
        return f"{path} is a folder: give one file (deskdex index indexes folders)"
    if not os.path.lexists(path):
        return f"no such file: {path}"
    if not os.path.isfile(path):
        return f"not a regular file: {path}"
    return None


def cmd_convert(args: argparse.Namespace) -> int:
    from deskdex.converters import Source, convert, tagged

    problem = not_one_file(args.file)
    if problem:
        print(f"deskdex: {problem}", file=sys.stderr)
        return EXIT_USAGE
    status = 0
    for o in convert(Source.from_path(args.file)):
        if o.document is None:
            say(f"deskdex: {o.uri}: {o.message} ({o.reason})", file=sys.stderr)
            status = EXIT_ERROR
        elif args.format == "tagged":
            sys.stdout.write(readable(tagged.dumps(o.document)))
        else:
            if "#" in o.uri:
                say(f"--- {o.uri}")
            sys.stdout.write(readable(o.document.text(main_only=args.format == "main") + "\n"))
    return status


def cmd_dups(args: argparse.Namespace) -> int:
    if args.path is not None:
        return _near_duplicates(args)
    found = ask_daemon(args, "dups", path=None)
    if found is None:
        from deskdex.index import Collection, reports

        with Collection.open(home_of(args).data_dir) as coll:
            found = reports.clusters(coll)
    if args.limit:
        found["clusters"] = found["clusters"][: args.limit]
    if args.json:
        print_json(found)
        return 0
    if not found["clusters"]:
        print("no duplicates found")
        return 0
    for c in found["clusters"]:
        print(_cluster_heading(c))
        for d in c["documents"]:
            say(f"  {shown_location(d)}  {human(d['size'])}  {_relation(d, c['documents'])}")
    n = len(found["clusters"])
    print(f"{n} cluster{'s' if n > 1 else ''}, {human(found['reclaimable'])} reclaimable in all "
          "(identical copies only)")
    return 0


def _cluster_heading(cluster: dict[str, Any]) -> str:
    """How many documents, how many of them are copies with identical bytes (only these are
    "copies"), and the bytes deleting the extra copies would free."""
    docs = cluster["documents"]
    twins = {d["identical_to"] for d in docs if d.get("relation") == "identical"}
    copies = sum(1 for d in docs if d.get("relation") == "identical" or d["uri"] in twins)
    if copies == len(docs):
        return f"{len(docs)} identical copies, {human(cluster['reclaimable'])} reclaimable:"
    if copies:
        return f"{len(docs)} documents, {copies} of them identical copies, {human(cluster['reclaimable'])} reclaimable:"
    return f"{len(docs)} documents, none identical, nothing reclaimable:"


def _relation(d: dict[str, Any], docs: list[dict[str, Any]]) -> str:
    """A document's relation to its cluster's original (the first listed), as index/reports.py names it."""
    relation = d.get("relation")
    if relation == "identical":
        twin = d.get("identical_to")
        if twin is None or twin == docs[0]["uri"]:
            return "identical"
        return "identical to " + next((shown_location(o) for o in docs if o["uri"] == twin), twin)
    if relation == "similar":
        return f"similar ({round(100 * (d.get('similarity') or 0))} %)"
    return {"original": "original", "same_text": "same text", "other_format": "same text, other format"}.get(
        relation or "", "")


def _near_duplicates(args: argparse.Namespace) -> int:
    path = os.path.abspath(args.path)
    problem = not_one_file(path)
    if problem:
        print(f"deskdex: {problem}", file=sys.stderr)
        return EXIT_USAGE
    found = near_duplicates_of(home_given(args), path)
    if args.json:
        print_json(found)
    elif not found["duplicates"]:
        say(f"no near-duplicates of {path}" + (f" ({found['error']})" if found.get("error") else ""))
    else:
        for d in found["duplicates"]:
            say(f"{d['similarity']:4.0%} of words in common  {shown_location(d)}")
    return 0


def near_duplicates_of(chosen: str | None, path: str) -> dict[str, Any]:
    """What ``deskdex dups FILE`` lists (and the Python API's duplicates): the near-duplicates of
    the file at the absolute ``path``, indexed or not, found by the home's daemon or in its index."""
    found: dict[str, Any] | None = ask(chosen, "dups", path=path)
    if found is not None:
        return found
    from deskdex import settings
    from deskdex.converters import Limits
    from deskdex.index import Collection
    from deskdex.pipeline import convert_one, near_duplicates

    cfg = settings.load(Home.resolve(chosen).check())
    doc = convert_one(path, Limits.from_settings(cfg))
    with Collection.open(cfg.home.data_dir) as coll:
        return near_duplicates(coll, path, doc)
