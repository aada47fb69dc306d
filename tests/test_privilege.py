"""Enterprise mode reads every file with the rights of the account whose home holds it, never
root's (deskdex.converters.privilege): the checksum's open on the daemon's thread, the conversion in
a converter process dropped to that account, and who may read the document taken from the file
actually opened. The symlink swaps of an attacker are made deterministic here by swapping at the
indexer's own steps (its ``before_read`` hook, and right after its checksum).

The uids are made up (no account needed for the kernel to check them); the folders are in a
0755 folder every uid can pass through. Needs root (chown, set*id)."""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from deskdex.converters import Limits, Source
from deskdex.paths import path_to_uri
from deskdex.converters.isolation import WorkerPool
from deskdex.converters.privilege import LAZY_IMPORTS, NOBODY, RunAs, as_user
from deskdex.converters.source import open_regular
from deskdex.errors import UnreadableFile
from deskdex.index import Collection
from deskdex.index.access import AccessChecker, Principal
from deskdex.pipeline.indexer import Indexer

from .accounts import IS_ROOT
from .conftest import ROOT

needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root: chown to other uids, set*id")

ATTACKER, VICTIM = RunAs(50011, 50011, (50011,)), RunAs(50012, 50012, (50012,))
SECRET = "zebrawolf"  # in the victim's private file only


def _put(path: Path, text: str, who: RunAs, mode: int) -> Path:
    path.write_text(text)
    os.chown(path, who.uid, who.gid)
    path.chmod(mode)
    return path


def _home(root: Path, name: str, who: RunAs, mode: int = 0o755) -> Path:
    home = root / name
    home.mkdir()
    os.chown(home, who.uid, who.gid)
    home.chmod(mode)
    return home


@pytest.fixture
def homes(open_dir: Path) -> tuple[Path, Path]:
    attacker = _home(open_dir, "attacker", ATTACKER)
    victim = _home(open_dir, "victim", VICTIM, 0o711)  # others may pass through, not list
    _put(victim / "private.txt", f"{SECRET} salary review\n", VICTIM, 0o600)
    return attacker, victim


def test_every_lazy_import_of_a_converter_is_preloaded():
    """A converter process drops to an account that may not read the interpreter's files (a
    Python under /root): what converters import inside functions must be imported before."""
    preloaded = set(LAZY_IMPORTS)
    missing = set()
    for path in sorted((ROOT / "converters").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and inner.module and inner.level == 0:
                        # `from docutils import nodes`: the package, or each name as a module of it
                        if inner.module not in preloaded and not all(f"{inner.module}.{a.name}" in preloaded
                                                                     for a in inner.names):
                            missing.add(inner.module)
                    elif isinstance(inner, ast.Import):
                        missing.update(a.name for a in inner.names if a.name not in preloaded)
    # Run before the drop (the worker's start, the privilege module itself), or part of deskdex.
    early = {"importlib", "resource", "ctypes", "platform", "encodings", "pkgutil"}
    assert sorted(m for m in missing if m not in early and not m.startswith("deskdex")) == []


@needs_root
def test_a_thread_takes_a_users_rights_alone(homes: tuple[Path, Path]):
    _, victim = homes
    private = str(victim / "private.txt")
    seen: list[int] = []
    go, looked = threading.Event(), threading.Event()

    def other() -> None:
        go.wait()
        seen.append(os.geteuid())
        looked.set()

    t = threading.Thread(target=other)
    t.start()
    with as_user(ATTACKER):
        assert os.geteuid() == ATTACKER.uid and os.getgroups() == list(ATTACKER.groups)
        with pytest.raises(UnreadableFile, match="permission denied"):
            open_regular(private)
        go.set()
        looked.wait(10)
    t.join()
    assert seen == [0]  # the other thread stayed root meanwhile
    assert os.geteuid() == 0 and os.getegid() == 0
    with as_user(VICTIM):
        with open_regular(private) as f:
            assert SECRET.encode() in f.read()


@pytest.mark.slow
@needs_root
def test_converter_processes_run_as_the_account(homes: tuple[Path, Path], open_dir: Path):
    attacker, victim = homes
    own = _put(attacker / "own.txt", "kiwi own words\n", ATTACKER, 0o600)
    link = attacker / "link.txt"
    link.symlink_to(victim / "private.txt")
    (attacker / "box").mkdir()
    into = attacker / "box" / "private.txt"  # reached through a folder swapped for a symlink below
    sources = [Source.from_path(own, run_as=ATTACKER), Source.from_path(victim / "private.txt", run_as=ATTACKER),
               Source.from_path(link, run_as=ATTACKER), Source.from_path(victim / "private.txt", run_as=VICTIM),
               Source.from_path(own, run_as=NOBODY)]
    (attacker / "box").rmdir()
    (attacker / "box").symlink_to(victim)
    sources.append(Source.from_path(into, run_as=ATTACKER))
    with WorkerPool(2, Limits()) as pool:
        got = {(s.path, s.run_as): o for s, outs in pool.map(sources) for o in outs[:1]}
    text = {k: (o.document.text() if o.document is not None else o.reason) for k, o in got.items()}
    assert "kiwi" in text[(str(own), ATTACKER)]
    assert text[(str(victim / "private.txt"), ATTACKER)] == "unreadable"
    assert text[(str(link), ATTACKER)] == "not_regular"  # a symlink is never followed
    assert SECRET in text[(str(victim / "private.txt"), VICTIM)]
    assert text[(str(own), NOBODY)] == "unreadable"
    assert text[(str(into), ATTACKER)] == "unreadable"  # the folder symlink: the kernel says no


def _indexer(coll: Collection, homes: tuple[Path, Path]) -> Indexer:
    attacker, victim = homes
    indexer = Indexer(coll, Limits(), workers=1)
    checker = AccessChecker([Principal(ATTACKER.uid, frozenset(ATTACKER.groups)),
                             Principal(VICTIM.uid, frozenset(VICTIM.groups))])
    indexer.access = checker.owner_readers
    indexer.run_as = lambda p: ATTACKER if p.startswith(f"{attacker}/") else VICTIM if p.startswith(f"{victim}/") else NOBODY
    return indexer


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("when", ["before the checksum", "after the checksum"])
@pytest.mark.parametrize("target", ["victim", "root-only"])
def test_a_file_swapped_for_a_symlink_never_yields_what_its_account_cannot_read(
        homes: tuple[Path, Path], open_dir: Path, tmp_path: Path, when: str, target: str):
    attacker, victim = homes
    root_only = _put(open_dir / "root-only.txt", f"{SECRET} root only\n", RunAs(0, 0, (0,)), 0o600)
    aim = victim / "private.txt" if target == "victim" else root_only
    note = _put(attacker / "note.txt", "quince harmless note\n", ATTACKER, 0o644)
    plain = _put(attacker / "plain.txt", "quince plain\n", ATTACKER, 0o644)

    def swap(path: str) -> None:
        if path == str(note):
            os.unlink(path)
            os.symlink(aim, path)

    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        indexer = _indexer(coll, homes)
        if when == "before the checksum":
            indexer.before_read = swap
        else:
            checksum = indexer._checksum

            def checksum_then_swap(*args: Any) -> Any:
                out = checksum(*args)
                swap(args[0].path)
                return out

            indexer._checksum = checksum_then_swap  # type: ignore[method-assign]  # the swap's moment
        files = indexer.scan([str(attacker)])
        summary = indexer.sync([str(attacker)], files)
        texts = [coll.tagged_text(r) or "" for r in map(coll.get, (path_to_uri(str(note)), path_to_uri(str(plain))))
                 if r is not None]
        row = coll.get(path_to_uri(str(note)))
    assert summary.indexed == 1, summary  # plain.txt
    assert row is not None and row.status == "failed" and row.reason in ("not_regular", "unreadable"), row
    assert not any(SECRET in t for t in texts)
