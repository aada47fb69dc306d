"""The two indexers behind one small interface: configure, index, search, list what is indexed,
start the live daemon. deskdex runs through its command line (the installed console script);
Recoll through recollindex/recollq with a recoll.conf in a temporary config dir."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from recoll_proc import Run, du, measure

ROOT = Path(__file__).resolve().parent.parent
DESKDEX = str(Path(sys.executable).with_name("deskdex"))
# Formats deskdex converts nothing from (GIMP's XCF, icons, Gnumeric, FictionBook, AbiWord): Recoll
# leaves them out too in compare_recoll.py, so both pay for the same formats there (deskdex still
# records their names; Recoll, with indexallfilenames, too). Images (their EXIF/XMP metadata) and old
# binary Excel are converted since issue 16, so Recoll indexes them again. Drop a type from here when a
# converter for it lands. benchmarks/formats_vs_recoll.py excludes nothing: it compares every format.
RECOLL_EXCLUDED_MIMES = "image/x-xcf image/x-icon application/x-gnumeric text/x-fictionbook application/x-abiword"


def fmt_of(path: str, manifest: dict[str, str], root: str) -> str:
    rel = os.path.relpath(path, root)
    if rel in manifest:
        return manifest[rel]
    suffix = Path(path).suffix.lower().lstrip(".")
    return suffix or "(none)"


class Deskdex:
    name = "deskdex"

    def __init__(self, home: str, corpus: str, ocr: bool = False) -> None:
        self.home, self.corpus = home, corpus
        # As on a user's machine, Python caches compiled modules (a development shell may say not
        # to, which would add a compile of every module to each command's start).
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        Path(home, "config").mkdir(parents=True, exist_ok=True)
        # The same formats as Recoll's defaults unless told: no OCR (its pdfocr = 0; deskdex's [ocr]
        # is on by default, and reading the corpus's scans and pictures is work Recoll does not do).
        Path(home, "config", "config.toml").write_text(f"folders = [{json.dumps(corpus)}]\n\n"
                                                       f"[ocr]\nenabled = {'true' if ocr else 'false'}\n")

    def index_cmd(self) -> list[str]:
        return [DESKDEX, "--home", self.home, "index", self.corpus, "--json", "--no-progress"]

    def index(self) -> Run:
        run = measure(self.index_cmd(), env=self.env)
        if run.rc:
            raise RuntimeError(f"deskdex index failed: {run.stderr[-2000:]}")
        return run

    def summary(self, run: Run) -> dict[str, Any]:
        import sqlite3

        s = json.loads(run.stdout)
        # Recoll's fileerrors counts files: one whose filter failed, or one with a member (a mail's
        # attachment) that did. The same count here: files whose own or a member's conversion failed.
        db = sqlite3.connect(f"file:{os.path.join(self.home, 'data', 'catalog.sqlite')}?mode=ro", uri=True)
        files = db.execute("SELECT COUNT(DISTINCT path) FROM docs WHERE source='files' AND status != 'ok'").fetchone()[0]
        db.close()
        return {"documents": s["indexed"] + s["members"] + s["reused"], "failed": files,
                "failed_documents": s["failed"], "unchanged": s["unchanged"],
                "failed_by_reason": s["failed_by_reason"]}

    def size(self) -> int:
        return du(os.path.join(self.home, "data"))

    def search_cmd(self, query: str, limit: int = 10, mode: str = "paths") -> list[str]:
        """``mode`` "paths": one path a line; "snippets": the listing with a snippet per hit."""
        return [DESKDEX, "--home", self.home, "search", query, "--limit", str(limit),
                *(["--paths"] if mode == "paths" else [])]

    @staticmethod
    def paths_shown(stdout: str) -> list[str]:
        return [line for line in stdout.splitlines() if line]

    def status_cmd(self) -> list[str]:
        return [DESKDEX, "--home", self.home, "status", "--json"]

    def search(self, query: str, limit: int = 10, every: bool = False) -> list[str]:
        """Result paths; ``every`` shows near-duplicates too (as Recoll does), which judging
        quality against a list of relevant paths needs: a collapsed list would show one copy of a
        relevant manual where the judgements name each format of it."""
        out = subprocess.run(self.search_cmd(query, limit) + (["--all"] if every else []), capture_output=True,
                             text=True, env=self.env)
        return self.paths_shown(out.stdout)

    def per_format(self, manifest: dict[str, str]) -> dict[str, Counter[str]]:
        import sqlite3

        db = sqlite3.connect(f"file:{os.path.join(self.home, 'data', 'catalog.sqlite')}?mode=ro", uri=True)
        out: dict[str, Counter[str]] = {}
        for path, status, parent in db.execute("SELECT path, status, parent FROM docs WHERE source='files'"):
            if parent or not path:
                continue  # members are counted with their container
            out.setdefault(fmt_of(path, manifest, self.corpus), Counter())["ok" if status == "ok" else "failed"] += 1
        db.close()
        return out

    def daemon_cmd(self) -> tuple[list[str], str]:
        """`deskdex daemon` once it watches; until then the Daemon class it will run, started directly."""
        run_py = (ROOT / "daemon" / "run.py").read_text()
        if "Daemon(" in run_py:
            return [DESKDEX, "--home", self.home, "daemon"], "deskdex daemon"
        return ([sys.executable, str(ROOT / "benchmarks" / "recoll_live.py"), self.home],
                "deskdex.daemon.loop.Daemon run directly (deskdex daemon does not watch yet)")


class Recoll:
    name = "recoll"

    def __init__(self, confdir: str, corpus: str, excluded: str = RECOLL_EXCLUDED_MIMES, extra: str = "") -> None:
        """``excluded``: MIME types Recoll skips (``excludedmimetypes``); ``extra``: more recoll.conf lines."""
        self.confdir, self.corpus = confdir, corpus
        # Debian's filters start with `#!/usr/bin/env python3` and need the system Python (python3-lxml,
        # python3-recoll): put /usr/bin first in case a virtualenv or pyenv Python comes first on PATH
        self.env = {**os.environ, "PATH": "/usr/bin:/bin:" + os.environ.get("PATH", "")}
        os.makedirs(confdir, exist_ok=True)
        self.log = os.path.join(confdir, "recoll.log")
        Path(confdir, "recoll.conf").write_text(
            f"topdirs = {corpus}\nexcludedmimetypes = {excluded}\n"
            f"loglevel = 2\nlogfilename = {self.log}\nnoaspell = 1\n"
            "monixinterval = 30\n"  # the default, written down: the monitor commits at most this often
            + extra)

    def index_cmd(self) -> list[str]:
        return ["recollindex", "-c", self.confdir]

    def index(self) -> Run:
        if os.path.exists(self.log):
            os.truncate(self.log, 0)
        run = measure(self.index_cmd(), env=self.env)
        if run.rc:
            raise RuntimeError(f"recollindex failed: {run.stderr[-2000:]}")
        return run

    def status(self) -> dict[str, str]:
        text = Path(self.confdir, "idxstatus.txt").read_text()
        return dict(line.split(" = ", 1) for line in text.splitlines() if " = " in line)

    def failed_paths(self) -> set[str]:
        out = set()
        if os.path.exists(self.log):
            with open(self.log, errors="replace") as f:
                for line in f:
                    if line.startswith(":2:") or line.startswith(":1:"):
                        m = re.search(r"\[(/[^\]]+)\]", line)
                        if m and m.group(1).startswith(self.corpus):
                            out.add(m.group(1))
        return out

    def summary(self, run: Run) -> dict[str, Any]:
        st = self.status()
        docs = self._listing()
        return {"documents": sum(1 for _, mime, _ in docs if mime != "inode/directory"),
                "failed": int(st.get("fileerrors", 0)), "failed_paths_in_log": len(self.failed_paths()),
                "files_seen": int(st.get("totfiles", 0))}

    def size(self) -> int:
        return du(os.path.join(self.confdir, "xapiandb"))

    def search_cmd(self, query: str, limit: int = 10, mode: str = "paths") -> list[str]:
        """``mode`` "paths": the URL of each hit; "snippets": the listing with abstracts (-A)."""
        fields = ["-F", "url"] if mode == "paths" else ["-A"]
        return ["recollq", "-c", self.confdir, "-n", f"0-{limit}", *fields, query]

    @staticmethod
    def paths_shown(stdout: str) -> list[str]:
        paths = []
        for line in stdout.splitlines()[2:]:  # the query as Recoll read it, then the count
            url = base64.b64decode(line.strip() or "").decode("utf-8", "replace")
            if url.startswith("file://"):
                paths.append(url[7:])
        return paths

    def search(self, query: str, limit: int = 10) -> list[str]:
        out = subprocess.run(self.search_cmd(query, limit), capture_output=True, text=True, env=self.env)
        return self.paths_shown(out.stdout)[:limit]

    def _listing(self) -> list[tuple[str, str, str]]:
        out = subprocess.run(["recollq", "-c", self.confdir, "-n", "0-10000000", "-F", "url mtype ipath",
                              f"dir:{self.corpus}"], capture_output=True, text=True, env=self.env)
        rows = []
        for line in out.stdout.splitlines()[2:]:
            parts = [base64.b64decode(p).decode("utf-8", "replace") for p in line.split(" ")] + ["", "", ""]
            if parts[0].startswith("file://"):
                rows.append((parts[0][7:], parts[1], parts[2]))
        return rows

    def per_format(self, manifest: dict[str, str]) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {}
        failed = self.failed_paths()
        for path, mime, ipath in self._listing():
            if mime == "inode/directory" or ipath or path in failed:
                continue
            out.setdefault(fmt_of(path, manifest, self.corpus), Counter())["ok"] += 1
        for path in failed:
            out.setdefault(fmt_of(path, manifest, self.corpus), Counter())["failed"] += 1
        return out

    def daemon_cmd(self) -> tuple[list[str], str]:
        # -m monitor, -D stay in the foreground, -x do not stop with the X session (there is none)
        return ["recollindex", "-c", self.confdir, "-m", "-D", "-x"], "recollindex -m"
