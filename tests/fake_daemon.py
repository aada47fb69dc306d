"""A stand-in for the deskdex daemon: a REAL Unix-socket server speaking docs/protocol.md (one JSON object
per line each way) over canned, in-memory state. It exists only until the real daemon (daemon/server.py,
written in parallel) is wired to the tray tests; then those tests should start the real one instead.

Nothing is faked on the wire: the tray connects to a real socket, sends real JSON lines and parses the
answers. What is canned is the state behind it: a handful of documents, folders and exclusions. Search is a
naive "every word appears" match, enough to drive the search window.

Run it as a process: ``python -m tests.fake_daemon SOCKET [--log FILE]``; it prints ``ready`` once it
listens and appends every request it receives to FILE as a JSON line (the tests read it to check what the
tray sent). ``duplicates`` (uri -> paths of the identical copies) is an op the protocol does not have yet;
the tray asks for it to expand a result's copies.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socketserver
import sys
import threading
from typing import Any

DOCS: list[dict[str, Any]] = [
    {"path": "/home/ada/Documents/reports/quarterly-budget-2026.pdf", "title": "Quarterly budget 2026",
     "text": "The quarterly budget for 2026 plans the spending of each team and the hiring budget.",
     "mime": "application/pdf", "mtime": 1767225600, "size": 48213,
     "copies": ["/home/ada/Backup/quarterly-budget-2026.pdf", "/home/ada/Desktop/budget copy.pdf"]},
    {"path": "/home/ada/Documents/notes/budget-meeting.md", "title": "Budget meeting notes",
     "text": "Notes of the budget meeting: travel is cut, the conference budget stays.",
     "mime": "text/markdown", "mtime": 1764547200, "size": 2210, "copies": []},
    {"path": "/home/ada/Documents/recipes/tarte-tatin.docx", "title": "Tarte tatin",
     "text": "Caramelise the apples, cover with pastry, bake and turn over while warm.",
     "mime": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
     "mtime": 1761955200, "size": 15022, "copies": ["/home/ada/Downloads/tarte-tatin.docx"]},
]


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.paused = False
        self.folders: dict[str, dict[str, Any]] = {
            "/home/ada/Documents": {"documents": 1234, "failed": 7},
            "/home/ada/Projects": {"documents": 310, "failed": 0},
        }
        self.exclude = ["*.tmp", "node_modules/"]

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        fn = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
        if fn is None:
            return _error("unknown_op", f"unknown op {op!r}")
        with self.lock:
            try:
                return {"ok": True, "result": fn(req)}
            except KeyError as exc:
                return _error("bad_request", f"missing argument {exc}")
            except LookupError as exc:
                return _error("not_found", str(exc))
            except ValueError as exc:
                return _error("bad_query", str(exc), position=0)

    def op_status(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"state": "paused" if self.paused else "idle", "queue": 0, "current": None,
                "documents": sum(f["documents"] for f in self.folders.values()),
                "failed": sum(f["failed"] for f in self.folders.values()),
                "failed_by_reason": {"corrupt": 5, "timeout": 2}, "cpu_seconds": 12.5,
                "last_commit": 1767225600.0, "folders": sorted(self.folders), "notes": []}

    def op_pause(self, req: dict[str, Any]) -> dict[str, Any]:
        self.paused = True
        return {"state": "paused"}

    def op_resume(self, req: dict[str, Any]) -> dict[str, Any]:
        self.paused = False
        return {"state": "idle"}

    def op_search(self, req: dict[str, Any]) -> dict[str, Any]:
        query = str(req["query"])
        if query.count('"') % 2:
            raise ValueError(f"unbalanced quote in {query!r}")
        words = [w.lower() for w in re.findall(r"\w+", query)]
        if not words:
            raise ValueError("empty query: give at least one word")
        hits = [_hit(d, words) for d in DOCS if all(w in (d["title"] + " " + d["text"]).lower() for w in words)]
        offset, limit = int(req.get("offset", 0)), int(req.get("limit", 10))
        return {"total": len(hits), "hits": hits[offset:offset + limit]}

    def op_duplicates(self, req: dict[str, Any]) -> dict[str, Any]:
        for d in DOCS:
            if "file://" + d["path"] == req["uri"]:
                return {"paths": list(d["copies"])}
        raise LookupError(f"not in the index: {req['uri']}")

    def _folders(self) -> dict[str, Any]:
        return {"folders": [{"path": p, **v} for p, v in sorted(self.folders.items())]}

    def op_watch_list(self, req: dict[str, Any]) -> dict[str, Any]:
        return self._folders()

    def op_watch_add(self, req: dict[str, Any]) -> dict[str, Any]:
        self.folders.setdefault(str(req["path"]), {"documents": 0, "failed": 0})
        return self._folders()

    def op_watch_remove(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.folders.pop(str(req["path"]), None) is None:
            raise LookupError(f"not a watched folder: {req['path']}")
        return self._folders()

    def op_exclude_list(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"exclude": list(self.exclude)}

    def op_exclude_add(self, req: dict[str, Any]) -> dict[str, Any]:
        if req["pattern"] not in self.exclude:
            self.exclude.append(str(req["pattern"]))
        return {"exclude": list(self.exclude)}

    def op_exclude_remove(self, req: dict[str, Any]) -> dict[str, Any]:
        if req["pattern"] not in self.exclude:
            raise LookupError(f"not an exclusion: {req['pattern']}")
        self.exclude.remove(req["pattern"])
        return {"exclude": list(self.exclude)}


def _error(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message, **extra}}


def _hit(d: dict[str, Any], words: list[str]) -> dict[str, Any]:
    snippet = d["text"]
    spans = sorted((m.start(), m.end()) for w in words for m in re.finditer(re.escape(w), snippet, re.I))
    return {"uri": "file://" + d["path"], "path": d["path"], "title": d["title"], "snippet": snippet,
            "highlights": [list(s) for s in spans], "score": 1.0, "mime": d["mime"], "mtime": d["mtime"],
            "size": d["size"], "duplicates": len(d["copies"])}


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, log: str | None = None) -> None:
        self.state = State()
        self.log = log
        super().__init__(path, Handler)
        os.chmod(path, 0o600)


class Handler(socketserver.StreamRequestHandler):
    server: Server

    def handle(self) -> None:
        for line in self.rfile:
            try:
                req = json.loads(line)
                if not isinstance(req, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                resp = _error("bad_request", f"not a JSON object: {exc}")
            else:
                if self.server.log:
                    with open(self.server.log, "a", encoding="utf-8") as f:
                        f.write(json.dumps(req) + "\n")
                resp = self.server.state.handle(req)
            self.wfile.write(json.dumps(resp).encode() + b"\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("socket")
    p.add_argument("--log", help="append every request received to this file, one JSON line each")
    args = p.parse_args(argv)
    os.makedirs(os.path.dirname(args.socket) or ".", mode=0o700, exist_ok=True)
    server = Server(args.socket, args.log)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print("ready", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        os.unlink(args.socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
