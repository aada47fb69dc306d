"""Seeded bursts of file operations on a watched folder, and the check that the index then equals
the disk. Shared by tests/test_live_burst.py (small bursts) and benchmarks/live_burst.py (10
bursts of 2,000 operations).

The operations are what people and programs do: create, modify, rename, delete, editors' saves
(a temp file renamed over the real one, then maybe deleted or renamed at once), rename chains,
swaps through a temp name, new folders, folder renames, folders and files moved into and out of
the watched tree, folders deleted. Short random pauses split a burst into batches at random
points, so that changes arrive while earlier ones are still being converted.

The index side is read from the catalog (read-only) and from the daemon's search; the disk side
is hashed here (BLAKE2b-128 of the bytes, as the catalog's ``raw_sum``), not by deskdex."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import sqlite3
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

COMMON = "qburstx"  # in every generated file: a search for it lists every document

# Folder and file names that no built-in exclusion matches (the temp names of saves do match some).
_WORDS = ("amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heath", "inlet", "juniper",
          "kelp", "larch", "maple", "nettle", "oak", "pine", "quartz", "reed", "sage", "thyme")


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class Bag:
    """A set of paths with a random pick in constant time, in an order that depends only on the
    operations (a plain set's order follows string hashes, which change from run to run)."""

    def __init__(self) -> None:
        self._items: list[Path] = []
        self._at: dict[Path, int] = {}

    def add(self, p: Path) -> None:
        if p not in self._at:
            self._at[p] = len(self._items)
            self._items.append(p)

    def discard(self, p: Path) -> None:
        i = self._at.pop(p, None)
        if i is not None:
            last = self._items.pop()
            if i < len(self._items):
                self._items[i] = last
                self._at[last] = i

    def update(self, paths: Iterable[Path]) -> None:
        for p in sorted(paths):
            self.add(p)

    def remove_all(self, paths: Iterable[Path]) -> None:
        for p in sorted(paths):
            self.discard(p)

    def choice(self, rnd: random.Random) -> Path:
        return self._items[rnd.randrange(len(self._items))]

    def __contains__(self, p: object) -> bool:
        return p in self._at

    def __iter__(self) -> Iterator[Path]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class Burst:
    """Random operations on ``root`` (watched) and ``outside`` (not watched), from one seed.
    The model (which files and folders exist) is kept here: this is the only writer."""

    root: Path
    outside: Path
    seed: int
    files: Bag = field(default_factory=Bag)
    dirs: set[Path] = field(default_factory=set)  # below root, root itself included
    out_dirs: set[Path] = field(default_factory=set)  # folders outside, ready to move in
    counts: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.rnd = random.Random(self.seed)
        self.serial = 0
        self.root.mkdir(parents=True, exist_ok=True)
        self.outside.mkdir(parents=True, exist_ok=True)
        self.dirs.add(self.root)

    # -- building blocks

    def _name(self, suffix: str = ".txt") -> str:
        self.serial += 1
        return f"{self.rnd.choice(_WORDS)}-{self.seed}-{self.serial}{suffix}"

    def _content(self) -> bytes:
        self.serial += 1
        words = " ".join(self.rnd.choice(_WORDS) for _ in range(self.rnd.randint(3, 40)))
        return f"{COMMON} item{self.seed}n{self.serial} {words}\n".encode()

    def _write(self, path: Path) -> None:
        path.write_bytes(self._content())

    def _pick_file(self) -> Path | None:
        return self.files.choice(self.rnd) if self.files else None

    def _two_files(self) -> tuple[Path, Path]:
        a = self.files.choice(self.rnd)
        while (b := self.files.choice(self.rnd)) == a:
            pass
        return a, b

    def _pick_dir(self, allow_root: bool = True) -> Path | None:
        choices = sorted(d for d in self.dirs if allow_root or d != self.root)
        return self.rnd.choice(choices) if choices else None

    def _pick_small_dir(self) -> Path | None:
        """A folder below root, the smallest of three drawn: moving out or deleting whole folders
        must not empty the tree."""
        choices = sorted(d for d in self.dirs if d != self.root)
        if not choices:
            return None
        drawn = [self.rnd.choice(choices) for _ in range(3)]
        return min(drawn, key=lambda d: sum(1 for f in self.files if d in f.parents))

    def _forget_tree(self, folder: Path) -> tuple[set[Path], set[Path]]:
        files = {f for f in self.files if folder in f.parents}
        dirs = {d for d in self.dirs if d == folder or folder in d.parents}
        self.files.remove_all(files)
        self.dirs -= dirs
        return files, dirs

    def _rebase(self, paths: set[Path], src: Path, dst: Path) -> set[Path]:
        return {dst / p.relative_to(src) for p in paths}

    # -- the operations

    def create(self) -> Path:
        folder = self._pick_dir()
        assert folder is not None
        p = folder / self._name(self.rnd.choice((".txt", ".txt", ".md")))
        self._write(p)
        self.files.add(p)
        return p

    def modify(self) -> None:
        p = self._pick_file()
        if p is None:
            self.create()
            return
        if self.rnd.random() < 0.5:
            self._write(p)
        else:
            with open(p, "ab") as f:
                f.write(self._content())

    def rename(self) -> None:
        p = self._pick_file()
        folder = self._pick_dir()
        if p is None or folder is None:
            self.create()
            return
        dst = folder / self._name(p.suffix)
        os.rename(p, dst)
        self.files.discard(p)
        self.files.add(dst)

    def rename_over(self) -> None:
        """A rename onto an existing file: the target's old content is replaced."""
        if len(self.files) < 2:
            self.create()
            return
        a, b = self._two_files()
        os.rename(a, b)
        self.files.discard(a)

    def delete(self) -> None:
        p = self._pick_file()
        if p is None:
            self.create()
            return
        p.unlink()
        self.files.discard(p)

    def save(self, then: str = "") -> None:
        """An editor's save: a temp file (an excluded name, or not) renamed over the file; then,
        at once, maybe deleted or renamed."""
        p = self._pick_file()
        if p is None:
            self.create()
            return
        temp = p.with_name(self.rnd.choice((f".{p.name}.swp", f"{p.name}.tmp", f"{p.name}.new", f"{p.name}~x")))
        self._write(temp)
        os.replace(temp, p)
        if then == "delete":
            p.unlink()
            self.files.discard(p)
        elif then == "rename":
            dst = p.with_name(self._name(p.suffix))
            os.rename(p, dst)
            self.files.discard(p)
            self.files.add(dst)

    def chain(self) -> None:
        """a -> b -> c in quick succession (sometimes a new file first)."""
        p = self._pick_file() if self.files and self.rnd.random() < 0.5 else None
        p = p or self.create()
        for _ in range(self.rnd.randint(2, 3)):
            folder = self._pick_dir()
            assert folder is not None
            dst = folder / self._name(p.suffix)
            os.rename(p, dst)
            self.files.discard(p)
            self.files.add(dst)
            p = dst

    def swap(self) -> None:
        if len(self.files) < 2:
            self.create()
            return
        a, b = self._two_files()
        t = a.with_name(a.name + ".swaptmp")
        os.rename(a, t)
        os.rename(b, a)
        os.rename(t, b)

    def mkdir(self) -> None:
        parent = self._pick_dir()
        assert parent is not None
        d = parent / self._name("")
        d.mkdir()
        self.dirs.add(d)
        for _ in range(self.rnd.randint(0, 3)):
            p = d / self._name()
            self._write(p)
            self.files.add(p)

    def rename_dir(self) -> None:
        d = self._pick_dir(allow_root=False)
        if d is None:
            return self.mkdir()
        parent = self.rnd.choice(sorted(x for x in self.dirs if x != d and d not in x.parents))
        dst = parent / self._name("")
        os.rename(d, dst)
        files, dirs = self._forget_tree(d)
        self.files.update(self._rebase(files, d, dst))
        self.dirs |= self._rebase(dirs, d, dst)

    def move_dir_out(self) -> None:
        d = self._pick_small_dir()
        if d is None:
            return self.mkdir()
        dst = self.outside / self._name("")
        os.rename(d, dst)
        self._forget_tree(d)
        self.out_dirs.add(dst)

    def move_dir_in(self) -> None:
        if not self.out_dirs or self.rnd.random() < 0.3:
            src = self.outside / self._name("")
            (src / "sub").mkdir(parents=True)
            for _ in range(self.rnd.randint(1, 5)):
                self._write(src / self.rnd.choice(("", "sub")) / self._name())
        else:
            src = self.rnd.choice(sorted(self.out_dirs))
            self.out_dirs.discard(src)
            if self.rnd.random() < 0.3:  # changed while it was away
                for f in sorted(src.rglob("*.txt"))[:2]:
                    self._write(f)
        parent = self._pick_dir()
        assert parent is not None
        dst = parent / src.name
        os.rename(src, dst)
        for dirpath, _dirnames, filenames in os.walk(dst):
            self.dirs.add(Path(dirpath))
            self.files.update(Path(dirpath) / n for n in filenames)

    def move_file_out(self) -> None:
        p = self._pick_file()
        if p is None:
            self.create()
            return
        os.rename(p, self.outside / p.name)
        self.files.discard(p)

    def move_file_in(self) -> None:
        src = self.outside / self._name()
        self._write(src)
        folder = self._pick_dir()
        assert folder is not None
        os.rename(src, folder / src.name)
        self.files.add(folder / src.name)

    def rmtree(self) -> None:
        d = self._pick_small_dir()
        if d is None:
            return self.mkdir()
        shutil.rmtree(d)
        self._forget_tree(d)

    OPS: tuple[tuple[str, int], ...] = (
        ("create", 20), ("modify", 14), ("rename", 12), ("rename_over", 3), ("delete", 10),
        ("save", 8), ("save_then_delete", 3), ("save_then_rename", 3), ("chain", 4), ("swap", 2),
        ("mkdir", 4), ("rename_dir", 4), ("move_dir_out", 3), ("move_dir_in", 3),
        ("move_file_out", 3), ("move_file_in", 3), ("rmtree", 1),
    )

    def seed_tree(self, files: int, folders: int) -> None:
        for _ in range(folders):
            self.mkdir()
        for _ in range(files):
            self.create()

    def run(self, ops: int, pause_every: int = 40, longest_pause: float = 0.6) -> None:
        """``ops`` operations; after about every ``pause_every`` of them, a pause of up to
        ``longest_pause`` seconds (the daemon's debounce is 0.3 s, its longest delay 1 s)."""
        names, weights = zip(*self.OPS)
        for _ in range(ops):
            op = self.rnd.choices(names, weights)[0]
            self.counts[op] += 1
            if op.startswith("save_then_"):
                self.save(then=op.removeprefix("save_then_"))
            else:
                getattr(self, op)()
            if self.rnd.random() < 1 / pause_every:
                time.sleep(self.rnd.uniform(0, longest_pause))


def disk_state(root: Path, excluded: Callable[[str, bool], bool]) -> dict[str, str]:
    """path -> checksum of every regular file under ``root`` that the index should hold.
    ``excluded(rel, is_dir)``: the daemon's exclusion rules (relative to root)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames if not excluded(os.path.normpath(os.path.join(rel_dir, d)), True)]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not excluded(os.path.normpath(os.path.join(rel_dir, name)), False):
                out[path] = digest(Path(path).read_bytes())
    return out


def catalog_state(data_dir: Path) -> dict[str, str | None]:
    """path -> raw checksum (None for a failed entry) of every file document in the catalog,
    read-only (the daemon keeps writing)."""
    uri = f"file:{data_dir / 'catalog.sqlite'}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, timeout=30)) as db:
        rows = db.execute("SELECT path, raw_sum, status FROM docs WHERE parent IS NULL AND source='files'")
        return {path: raw if status == "ok" else None for path, raw, status in rows}


@dataclass
class Difference:
    ghosts: list[str]  # in the index, not on disk
    lost: list[str]  # on disk, not in the index
    stale: list[str]  # in both, another content (or recorded as failed)
    unsearchable: list[str]  # catalog and search disagree (a ghost or lost document in the full-text index)

    @property
    def ok(self) -> bool:
        return not (self.ghosts or self.lost or self.stale or self.unsearchable)

    def counts(self) -> dict[str, int]:
        return {"ghosts": len(self.ghosts), "lost": len(self.lost), "stale": len(self.stale),
                "unsearchable": len(self.unsearchable)}

    def __str__(self) -> str:
        return "; ".join(f"{k}: {v[:5]}" for k, v in vars(self).items() if v) or "index = disk"


def compare(disk: dict[str, str], catalog: dict[str, str | None], searchable: set[str]) -> Difference:
    both = disk.keys() & catalog.keys()
    return Difference(
        ghosts=sorted(catalog.keys() - disk.keys()),
        lost=sorted(disk.keys() - catalog.keys()),
        stale=sorted(p for p in both if catalog[p] != disk[p]),
        unsearchable=sorted(searchable ^ {p for p, raw in catalog.items() if raw is not None}),
    )


def explain(diff: Difference, data_dir: Path, most: int = 5) -> list[str]:
    """For a report: each differing path's catalog entry (size, mtime, status) beside the disk's."""
    lines = []
    uri = f"file:{data_dir / 'catalog.sqlite'}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, timeout=30)) as db:
        for kind in ("ghosts", "lost", "stale"):
            for path in getattr(diff, kind)[:most]:
                row = db.execute("SELECT size, mtime, status, reason, indexed_at FROM docs WHERE path=? AND parent IS NULL",
                                 (path,)).fetchone()
                try:
                    st = os.stat(path)
                    disk = f"disk size {st.st_size} mtime {st.st_mtime:.6f}"
                except OSError:
                    disk = "not on disk"
                lines.append(f"{kind[:-1] if kind != 'lost' else kind}: {path}: catalog {row}; {disk}")
    return lines


def settle_and_compare(daemon: Any, root: Path, marker: Path, marker_word: str,
                       excluded: Callable[[str, bool], bool]) -> Difference:
    """After a burst: write a marker file and wait until the daemon has indexed it and says idle
    with nothing queued. inotify delivers events in order and the daemon applies its batches in
    order, so everything the burst did has been applied by then. Then compare index and disk."""
    marker.write_text(f"{COMMON} {marker_word}\n")
    daemon.eventually(marker_word, [str(marker)], quiet=120)
    daemon.wait_for(lambda st: st["state"] == "idle" and st["queue"] == 0, quiet=120, what="the daemon idle")
    disk = disk_state(root, excluded)
    catalog = catalog_state(daemon.home / "data")
    # By the words alone: what the full-text index holds, not the documents related by meaning.
    hits = daemon.call("search", query=COMMON, limit=10_000, all=True, snippets=False, words=True)["hits"]
    return compare(disk, catalog, {h["path"] for h in hits})
