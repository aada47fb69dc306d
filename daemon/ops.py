"""The daemon's socket ops: one method per op of deskdex.protocol, run on the socket server's
threads. The server has checked the arguments against the protocol and, on an enterprise-mode
daemon, refused other users every op that is not public; what each op shows such a caller is
decided here (their own documents only, counts without paths).

Who asks is the kernel's word (SO_PEERCRED), never an argument of the request.
"""

from __future__ import annotations

import os
import resource
import time
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Callable

from deskdex import protocol
from deskdex.converters import ocr_state
from deskdex.errors import BadArgs, NotFound
from deskdex.index import EVERYONE, RemoteShard, document, may_read, open_shards, reports, search_shards
from deskdex.paths import at_or_under
from deskdex.pipeline import convert_one, near_duplicates

if TYPE_CHECKING:
    from deskdex.protocol import DocumentAnswer, Indexing, SearchResults

    from .loop import Daemon
    from .server import Peer, Request


class Ops:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self._counts: tuple[str | None, dict[str, Any], dict[str, int]] | None = None
        self._counts_for: dict[int, tuple[str | None, dict[str, Any]]] = {}  # another user's, by uid
        # Served shards (the setting shards), kept with their connections between searches.
        self._served: dict[tuple[str, str, str], RemoteShard] = {}

    def handlers(self) -> dict[str, Callable[[Request], Any]]:
        """The server's table: every op of the protocol, each given the checked request."""
        table: dict[str, Callable[[Request], Any]] = {
            "status": self.status, "search": self.search, "document": self.document, "pause": self.pause, "resume": self.resume,
            "watch_list": self.watch_list, "watch_add": self.watch_add, "watch_remove": self.watch_remove,
            "exclude_list": self.exclude_list, "exclude_add": self.exclude_add,
            "exclude_remove": self.exclude_remove, "dups": self.dups, "duplicates": self.duplicates,
            "index": self.index,
            "crawl": self.crawl, "crawl_job": self.crawl_job, "crawl_cancel": self.crawl_cancel,
            "crawl_reload": self.crawl_reload,
            "source_reload": self.source_reload, "original": self.original, "source_sync": self.source_sync,
            "retry": self.retry,
        }
        assert set(table) == set(protocol.OPS), "every op of the protocol has its handler, and no other"
        return table

    def _other_user(self, peer: Peer) -> bool:
        """An enterprise-mode caller who is not root: sees only what they may read."""
        return self.daemon.system and peer.uid != 0

    # -- public ops --------------------------------------------------------------------------------
    def status(self, req: Request) -> dict[str, Any]:
        d = self.daemon
        other = self._other_user(req.peer)
        with d.reading() as reader:
            last = reader.stats.last_commit()
            if other:
                # Counts of what this caller may read; none of the totals or sizes, which would
                # move with others' private files.
                uid = self._reader_uid(req.peer)
                assert uid is not None
                if self._counts_for.get(uid, (None,))[0] != last:
                    self._counts_for[uid] = (last, reader.stats.counts_for(uid))
                counts = dict(self._counts_for[uid][1])
                counts.update(dict.fromkeys(("texts", "text_bytes", "retries", "next_retry")))
                sizes: dict[str, Any] = dict.fromkeys(("index_bytes", "store_bytes"))
            else:
                counts, sizes = self._own_counts(reader, last)
                counts.update(reader.stats.retries())  # changes without a commit to tantivy: not cached
                if req.args["failures"]:
                    counts["failures"] = reports.failures(reader)
        stall = d.stall
        # The message names the store's path: another user of an enterprise-mode daemon gets the
        # condition alone ("disk full").
        reason = None if stall is None else stall.condition if other else str(stall)
        out = {"state": d.state, "state_reason": reason, "queue": d.queue_length(), "current": d.current,
               **counts, **sizes, "cpu_seconds": None if other else round(self._cpu_seconds(), 2),
               "last_commit": float(last) if last else None, "folders": d.folders(),
               "offline": sorted(d.offline), "notes": d.notes, "settings_problems": d.settings_problems,
               "pid": os.getpid(),
               "converted": d.indexer.converted, "paused": d.paused,
               "uptime": round(time.time() - d.started, 1), "system": d.system,
               "ocr": ocr_state(d.indexer.limits.ocr), "sources": d.sources.status()}
        if other:
            out["converted"] = None  # how busy others' files keep it
            for key in ("current", "folders", "offline", "notes", "settings_problems", "pid", "sources"):
                out[key] = [] if isinstance(out[key], list) else None
        return out

    def _own_counts(self, reader: Any, last: str | None) -> tuple[dict[str, Any], dict[str, int]]:
        """The catalog's counts and sizes as of the commit ``last`` (copies, the caller's to change)."""
        if self._counts is None or self._counts[0] != last:
            # Counting a big catalog takes a while: once per commit, not once per question (the
            # tray asks every few seconds, and a search during indexing says how far it is).
            self._counts = (last, reader.stats.counts(), reader.stats.sizes())
        return dict(self._counts[1]), dict(self._counts[2])

    def _cpu_seconds(self) -> float:
        """CPU used since start: this process, converters already ended, and those running."""
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
        for pid in self.daemon.indexer.worker_pids():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except (OSError, IndexError, ValueError):
                pass  # not Linux, or the worker just ended
        return total

    def _reader_uid(self, peer: Peer) -> int | None:
        """Whose view to answer with: None for root's (everything), else the caller's uid."""
        if not self._other_user(peer):
            return None
        return peer.uid if peer.uid is not None else EVERYONE

    def search(self, req: Request) -> SearchResults:
        a = req.args
        reader_uid = self._reader_uid(req.peer)
        with self.daemon.reading() as reader, ExitStack() as stack:
            s = self.daemon.cfg.settings
            shards = open_shards(stack, s.shards, s.token, s.tls_ca, self._served)
            results = search_shards([reader, *shards], a["query"], limit=a["limit"], offset=a["offset"],
                                    sort=a["sort"], collapse=not a["all"], reader=reader_uid,
                                    snippets=a["snippets"], similar=a["similar"], facets=a["facets"],
                                    words=a["words"])
            indexing = self._indexing(reader, req.peer)
        if indexing is not None:
            results["indexing"] = indexing
        return results

    def _indexing(self, reader: Any, peer: Peer) -> Indexing | None:
        """How far the indexing under way is, for a search's answer (so that a client says "the
        index is being built: 120 of 3,000 files done" rather than a bare "no results"), or None
        while the daemon is not indexing. ``done``: the files in the catalog (indexed or failed),
        counted once per commit as status does; another user of an enterprise-mode daemon is told
        none (it would count others' files)."""
        d = self.daemon
        if d.state not in ("starting", "scanning", "indexing"):
            return None
        done = None
        if not self._other_user(peer):
            counts = self._own_counts(reader, reader.stats.last_commit())[0]
            done = int(counts["documents"]) + int(counts["failed"])
        return {"state": d.state, "first": d.first_pass, "done": done,
                "waiting": d.queue_length()}

    def document(self, req: Request) -> DocumentAnswer:
        """One document's metadata and marked text (index/documents.py), with the caller's rights
        as a search's: one it may not read is not_found, as one not indexed."""
        a = req.args
        with self.daemon.reading() as reader:
            return document(reader, a["uri"], a["query"], text=a["text"], max_blocks=a["max_blocks"],
                            reader=self._reader_uid(req.peer))

    def original(self, req: Request) -> dict[str, Any]:
        """A source's document as its server holds it (the web UI's download, ``search --open``),
        after the same check as ``document``: fetched from the server only for a reader who may read it."""
        import base64

        with self.daemon.reading() as reader:
            doc = document(reader, req.args["uri"], text=False, reader=self._reader_uid(req.peer))
        if doc["source"] not in protocol.REMOTE_SOURCES:
            raise NotFound(f"{req.args['uri']}: not a document of a mail account or network share")
        name, data = self.daemon.sources.original(doc["uri"])
        mime = doc["mime"] if "#" not in doc["uri"] else "message/rfc822" if doc["source"] == "imap" else ""
        return {"name": name, "mime": mime or "application/octet-stream", "size": len(data),
                "data": base64.b64encode(data).decode("ascii")}

    # -- root's (or the owner's) ops ------------------------------------------------------------------
    def dups(self, req: Request) -> dict[str, Any]:
        path = req.args["path"]
        if path is None:
            with self.daemon.reading() as reader:
                return reports.clusters(reader)
        if not os.path.isabs(path):
            raise BadArgs(f"dups: path must be absolute, not {path!r}")
        # Converted before any lock is taken (it may take up to the time limit); the duplicate
        # tables are read through the read-only view, so searches and indexing go on meanwhile.
        doc = convert_one(path, self.daemon.limits)
        with self.daemon.reading() as reader:
            return near_duplicates(reader, path, doc)

    def duplicates(self, req: Request) -> dict[str, Any]:
        """The other documents of a search hit's cluster (the tray expands a hit with them). A
        caller other than root gets the others it may read of a document it may read (its
        readable cluster, index/readable.py), else nothing: as for a document not indexed."""
        uid = self._reader_uid(req.peer)
        with self.daemon.reading() as reader:
            row = reader.get(req.args["uri"])
            if row is None or uid is None:
                others = reader.duplicates_of(row) if row is not None else []
            elif not may_read(row.readers, uid):
                others = []  # as for a document not indexed
            else:
                others = reader.copies_readable_by(row, uid)
        return {"paths": [r.uri if "#" in r.uri else r.path for r in others]}

    def index(self, req: Request) -> dict[str, Any]:
        paths = req.args["paths"]
        relative = [p for p in paths if not os.path.isabs(p)]
        if relative or not paths:
            raise BadArgs(f"index: paths must be absolute, not {relative!r}" if relative else "index: no paths")
        return self.daemon.index_paths(paths).to_json()

    def retry(self, req: Request) -> dict[str, Any]:
        path = None if req.args["path"] is None else _absolute(req.args["path"])
        with self.daemon.reading() as reader:
            # What the daemon will convert: failures under its folders (`deskdex index` may have
            # recorded others, elsewhere).
            scheduled = reader.retries.scheduled(self.daemon.folders())
        n = sum(1 for _, p, _ in scheduled if path is None or at_or_under(p, path))
        self.daemon.retry(path)
        return {"retrying": n}

    def pause(self, req: Request) -> dict[str, Any]:
        self.daemon.pause(True)
        return {"state": self.daemon.state, "paused": True}

    def resume(self, req: Request) -> dict[str, Any]:
        self.daemon.pause(False)
        return {"state": self.daemon.state, "paused": False}

    def watch_list(self, req: Request) -> dict[str, Any]:
        out = []
        with self.daemon.reading() as reader:
            for f in self.daemon.folders():
                n = reports.folder_counts(reader, f)
                out.append({"path": f, "documents": n["ok"], "failed": n["failed"],
                            "offline": f in self.daemon.offline})
        return {"folders": out}

    def watch_add(self, req: Request) -> dict[str, Any]:
        self.daemon.add_folder(_absolute(req.args["path"]))
        return self.watch_list(req)

    def watch_remove(self, req: Request) -> dict[str, Any]:
        path = _absolute(req.args["path"])
        if path not in self.daemon.changeable_folders():
            raise BadArgs(f"watch_remove: {path} is not a watched folder")
        self.daemon.remove_folder(path)
        return self.watch_list(req)

    def exclude_list(self, req: Request) -> dict[str, Any]:
        return {"exclude": list(self.daemon.cfg.settings.exclude)}

    def exclude_add(self, req: Request) -> dict[str, Any]:
        pattern = req.args["pattern"]
        if not pattern.strip():
            raise BadArgs("exclude_add: the pattern is empty")
        self.daemon.add_exclude(pattern)
        return self.exclude_list(req)

    def exclude_remove(self, req: Request) -> dict[str, Any]:
        if not self.daemon.remove_exclude(req.args["pattern"]):
            raise BadArgs(f"exclude_remove: {req.args['pattern']!r} is not a configured pattern")
        return self.exclude_list(req)

    # -- crawls: run on the daemon's crawl thread (daemon/crawls.py), never on the socket's -----------
    def crawl(self, req: Request) -> dict[str, Any]:
        from deskdex.webcrawl import CrawlRequest, parse_shard

        try:
            parse_shard(req.args["shard"])
        except ValueError:
            raise BadArgs(f"crawl: shard must be I/N with 0 <= I < N, not {req.args['shard']!r}") from None
        for path in req.args["topic_from"] or []:
            if not os.path.isabs(path):
                raise BadArgs(f"crawl: topic_from paths must be absolute, not {path!r}")
        return {"job": self.daemon.crawls.submit(CrawlRequest(**req.args)).number}

    def crawl_job(self, req: Request) -> dict[str, Any]:
        job = self.daemon.crawls.job(req.args["job"])
        job.ended.wait(req.args["wait"])  # this connection's thread waits; nobody else does
        return job.to_json()

    def crawl_cancel(self, req: Request) -> dict[str, Any]:
        return self.daemon.crawls.cancel(req.args["job"]).to_json()

    def crawl_reload(self, req: Request) -> dict[str, Any]:
        return {"sites": self.daemon.crawls.reload()}

    # -- sources: each synced on its own thread (daemon/sources.py) -----------------------------------
    def source_reload(self, req: Request) -> dict[str, Any]:
        return {"sources": self.daemon.sources.reload()}

    def source_sync(self, req: Request) -> dict[str, Any]:
        return {"sources": self.daemon.sources.sync(req.args["url"], req.args["wait"])}


def _absolute(path: str) -> str:
    if not os.path.isabs(os.path.expanduser(path)):
        raise BadArgs(f"a path sent to the daemon must be absolute, not {path!r}")
    return os.path.abspath(os.path.expanduser(path))
