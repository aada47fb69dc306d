"""deskdex's code uses other libraries through their public names only (issue 29): a library's
private name (one with a leading underscore) may change in any release, and twice one did, in a
patch release, and broke us. Read from the source (ast), not run:

- no ``from M import _name`` and no ``import M._private`` of a module outside the importing
  package (another library's, or another deskdex package's: converters' helpers that cluster/
  needs are public names of converters);
- no ``super()._name(...)`` in a class with a base from another library (overriding a library's
  private method), and no ``getattr(m, "_name")`` or ``m._name`` of a module or class imported
  from another library;
- no assignment to another object's private attribute (``transport._pool = ...``);
- every other library imported is one deskdex declares (pyproject.toml): an undeclared one
  (httpcore, which httpx happens to install) comes and goes with the library that brings it.

KNOWN lists what others are removing now (issue 29), each with where and why it is left; the
test fails on anything new."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from .conftest import ROOT

PACKAGES = ("core", "daemon", "pipeline", "index", "converters", "webcrawl", "cluster", "clients", "sources")
# Public names that start with an underscore: namedtuple's documented methods, os._exit, and lxml's
# element classes (its API reference documents lxml.etree._Element, _ElementTree, _Entity...).
PUBLIC_UNDERSCORED = {"_replace", "_asdict", "_fields", "_make", "_field_defaults", "_exit",
                      "_Element", "_ElementTree", "_Entity", "_Comment", "_ProcessingInstruction"}
# (file, name) left for now, each with why; "*": in any file. The test fails on anything else.
KNOWN = {
    # Nothing public does these; tests/test_private_pins.py fails, naming the Python, when one changes
    # (tested on CPython 3.11.7). multiprocessing's fork server has no public way to ask whether it
    # runs or to end it (an idle daemon would keep its 50 MiB of preloaded converters).
    ("converters/isolation.py", "_forkserver"), ("converters/isolation.py", "_forkserver_pid"),
    ("converters/isolation.py", "_stop"),
    # CPython's C socket module: 0.6 ms to import where `socket` takes ~18 ms, more than a search
    # through the daemon; no other public module connects a Unix socket. Falls back to `socket`.
    ("clients/client.py", "_socket"),
}


def sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORED


def _module_of(node: ast.ImportFrom, path: Path) -> str:
    """The absolute dotted module of a ``from ... import``, deskdex's own as deskdex.PACKAGE...."""
    if node.level == 0:
        return node.module or ""
    parts = ["deskdex", *path.relative_to(ROOT).parent.parts]
    base = parts[:len(parts) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _package_of(path: Path) -> str:
    return "deskdex." + path.relative_to(ROOT).parts[0]


def findings(path: Path) -> list[str]:
    """Each use of another library's (or another deskdex package's) private name in ``path``."""
    rel = str(path.relative_to(ROOT))
    tree = ast.parse(path.read_text(), str(path))
    foreign: set[str] = set()  # names bound to what another library defines
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith("deskdex"):
                    foreign.add((alias.asname or alias.name).split(".")[0])
                    if any(_private(p) for p in alias.name.split(".")):
                        found.append((node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom):
            module = _module_of(node, path)
            own = module.startswith("deskdex")
            if module == "__future__":
                continue
            if any(_private(p) for p in module.split(".")) and not own:
                found.append((node.lineno, module))
            for alias in node.names:
                if not own:
                    foreign.add(alias.asname or alias.name)
                outside = not own or not (module + ".").startswith(_package_of(path) + ".")
                if _private(alias.name) and outside:
                    found.append((node.lineno, alias.name))
    typed: set[str] = set()  # parameters annotated with another library's class: ``d: DocxDocument``
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                ann = arg.annotation
                named = ann.value if isinstance(ann, ast.Constant) and isinstance(ann.value, str) else \
                    ann.id if isinstance(ann, ast.Name) else None
                if named is not None and named.split(".")[0].split("[")[0].strip() in foreign:
                    typed.add(arg.arg)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = {b.id if isinstance(b, ast.Name) else b.value.id for b in node.bases
                     if isinstance(b, ast.Name) or (isinstance(b, ast.Attribute) and isinstance(b.value, ast.Name))}
            if bases & foreign:
                for sub in ast.walk(node):
                    if (isinstance(sub, ast.Attribute) and _private(sub.attr) and isinstance(sub.value, ast.Call)
                            and isinstance(sub.value.func, ast.Name) and sub.value.func.id == "super"):
                        found.append((sub.lineno, sub.attr))
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            if isinstance(node.value, ast.Name) and (node.value.id in foreign or node.value.id in typed):
                found.append((node.lineno, node.attr))
            elif isinstance(node.ctx, ast.Store) and not (isinstance(node.value, ast.Name)
                                                          and node.value.id in ("self", "cls")):
                found.append((node.lineno, node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr", "hasattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _private(node.args[1].value)):
            target = node.args[0]
            if isinstance(target, ast.Call) or (isinstance(target, ast.Name) and target.id in foreign):
                found.append((node.lineno, node.args[1].value))
    return [f"{rel}:{line}: {name}" for line, name in sorted(found)
            if (rel, name.split(".")[-1]) not in KNOWN and ("*", name.split(".")[-1]) not in KNOWN]


def test_no_private_name_of_another_library_or_package() -> None:
    found = [f for p in sources() for f in findings(p)]
    assert not found, "private names of another library or package (use a public one):\n" + "\n".join(found)


def test_the_checker_sees_each_kind_of_private_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What the fixes of issue 29 removed, written again: each must be found.
    cases = {
        "transport._pool = httpcore.AsyncConnectionPool()": "_pool",
        "from deskdex.converters.source import _check_regular": "_check_regular",
        "from json import _default_decoder": "_default_decoder",
        "import kombu\nclass C(kombu.Channel):\n    def f(self):\n        return super()._brpop_read()": "_brpop_read",
        "import multiprocessing.forkserver as fs\nx = getattr(fs, '_forkserver_pid')": "_forkserver_pid",
        "from tantivy import Index\nIndex._schema": "_schema",
        "from docx.document import Document\ndef f(d: Document):\n    return d._body": "_body",
        "import argparse\ndef f(s: argparse._SubParsersAction) -> None:\n    pass": "_SubParsersAction",
        "import olefile\nclass O(olefile.OleFileIO):\n    def f(self):\n        return super()._parse_property()": "_parse_property",
    }
    pkg = tmp_path / "cluster"
    pkg.mkdir()
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    for i, (code, name) in enumerate(cases.items()):
        f = pkg / f"case{i}.py"
        f.write_text(code + "\n")
        assert any(line.endswith(": " + name) for line in findings(f)), (code, findings(f))
    ok = pkg / "fine.py"
    ok.write_text("from .case0 import _x\nclass A:\n    def f(self):\n        self._y = 1\n        return super()._z()\n")
    assert findings(ok) == []


# Imported directly but declared through an extra of a declared library: celery[redis] requires kombu
# (Celery's own messaging library, released with it) and redis (what its [redis] extra is for).
THROUGH_EXTRA = {"kombu", "redis"}


def _declared() -> set[str]:
    """Every distribution pyproject.toml names, main and optional, normalised, and THROUGH_EXTRA."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        reqs += extra
    return THROUGH_EXTRA | {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in reqs}


def test_every_library_imported_is_declared() -> None:
    declared = _declared()
    by_module = packages_distributions()
    undeclared = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in ("deskdex", "__future__"):
                    continue
                dists = {d.lower().replace("_", "-") for d in by_module.get(top, [])}
                if dists and not dists & declared:
                    undeclared.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name} ({', '.join(sorted(dists))})")
    assert not undeclared, "imports of libraries pyproject.toml does not declare:\n" + "\n".join(undeclared)
