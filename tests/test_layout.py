"""The layout keeps its promises (docs/architecture.md): no import cycle between deskdex's modules, function-
local imports included (a package's ``__init__`` counts as a module: a submodule importing its own package
is an edge like any other); each package imports only the layers below it, above all the daemon never
imports a client, and the small core imports nothing of the rest (but for the Python API's names, taken
lazily: API_FACADE); and a package imports another only
through that one's public names (its ``__init__``'s ``__all__``), never from its submodules."""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What each package may import besides itself: the layers below it.
ALLOWED = {
    "deskdex": set(),
    "deskdex.converters": {"deskdex"},
    "deskdex.index": {"deskdex", "deskdex.converters"},
    "deskdex.webcrawl": {"deskdex", "deskdex.converters", "deskdex.index"},  # checksums of fetched pages
    # Conversions and crawl requests on other machines (Celery): what a worker converts or fetches and
    # what it sends back.
    "deskdex.cluster": {"deskdex", "deskdex.converters", "deskdex.index", "deskdex.webcrawl"},
    # Mail accounts and network shares: they list and fetch bytes, and know nothing of the index.
    "deskdex.sources": {"deskdex"},
    "deskdex.pipeline": {"deskdex", "deskdex.converters", "deskdex.index", "deskdex.webcrawl", "deskdex.cluster",
                         "deskdex.sources"},
    # The web UI answers through the daemon's ops (a Backend the daemon hands it), reading files
    # with an account's rights (converters' privilege); the daemon starts it.
    "deskdex.web": {"deskdex", "deskdex.converters", "deskdex.index"},  # the tray's search as you type
    "deskdex.daemon": {"deskdex", "deskdex.converters", "deskdex.index", "deskdex.webcrawl", "deskdex.pipeline",
                       "deskdex.sources",
                       "deskdex.cluster", "deskdex.web"},
    "deskdex.clients": {"deskdex", "deskdex.converters", "deskdex.index", "deskdex.webcrawl", "deskdex.pipeline",
                        "deskdex.sources",
                        "deskdex.daemon", "deskdex.packaging", "deskdex.cluster", "deskdex.web"},
    "deskdex.packaging": set(),
}


def modules() -> dict[str, Path]:
    """Every module of the package by its import name, found through pyproject's package-dir."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    out = {}
    for package in config["packages"]:
        top = max((p for p in config["package-dir"] if package == p or package.startswith(p + ".")), key=len)
        folder = ROOT / config["package-dir"][top] / Path(*package[len(top):].split(".")[1:])
        for f in folder.glob("*.py"):
            out[package if f.name == "__init__.py" else f"{package}.{f.stem}"] = f
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The deskdex modules ``name`` imports anywhere in its file (functions and TYPE_CHECKING too)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            targets = [f"{prefix}.{a.name}" for a in node.names] + ([prefix] if node.module else [])
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


# The one import out of the core: its ``__init__`` names the Python API (``deskdex.search``...,
# docs/python-api.md), the public names of deskdex.clients, for mypy (under TYPE_CHECKING) and
# lazily at run time (core/lazy.py), so that ``import deskdex`` loads none of the clients
# (tests/test_python_api.py checks that it loads nothing). No other edge, and no other module of the core.
API_FACADE = ("deskdex", "deskdex.clients")


def graph() -> dict[str, set[str]]:
    mods = modules()
    g = {name: imports(name, path, set(mods)) for name, path in mods.items()}
    g[API_FACADE[0]].discard(API_FACADE[1])
    return g


# The core (the package ``deskdex`` itself) keeps its ``__init__`` light for the command's fast path:
# its public names are its modules (errors, paths, settings, protocol, lazy), and the Python API's
# names taken lazily from deskdex.clients (API_FACADE).
CORE = "deskdex"


def public_names(package: str, path: Path) -> set[str]:
    """The names of ``__all__`` in a package's ``__init__`` (a literal list: what mypy reads too)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def cross_package_imports(mods: dict[str, Path]) -> list[tuple[str, str, str]]:
    """(module, what it imports, the package it comes from) for every import of another package's
    names by one of ``mods``, function-local and TYPE_CHECKING ones included. ``what`` is the module
    named in the import, then the name taken from it: ``deskdex.index.store:Catalog``."""
    out = []
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                pairs = [(a.name, "") for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")
                if node.level:
                    base = base[: len(base) - node.level + 1]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                pairs = [(prefix, a.name) for a in node.names]
            else:
                continue
            for module, what in pairs:
                if module != CORE and not module.startswith(CORE + "."):
                    continue
                # The package the import reaches: of the module named, or of the name taken
                # from the core (``from deskdex import packaging``).
                target = f"{module}.{what}" if module == CORE and what else module
                while target not in mods and "." in target:
                    target = target.rpartition(".")[0]
                theirs, mine = package_of(target), package_of(name)
                if theirs != mine and theirs != CORE:
                    if target == theirs and not (module == theirs and what):
                        # The package itself: ``import deskdex.index``, ``from deskdex import packaging``.
                        out.append((name, theirs, theirs))
                    else:
                        out.append((name, f"{module}:{what}" if what else module, theirs))
    return out


def package_of(module: str) -> str:
    if module == "deskdex.__main__":  # ``python -m deskdex``: the command line's entry, a client
        return "deskdex.clients"
    return max((p for p in ALLOWED if module == p or module.startswith(p + ".")), key=len)


def test_the_graph_is_read_from_the_package():
    g = graph()
    assert "deskdex.daemon.loop" in g and "deskdex.errors" in g["deskdex.daemon.loop"]
    assert "deskdex.clients.client" in g["deskdex.clients.launch"]  # function-local imports count


def test_no_import_cycles():
    g = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in g:
        if v not in index:
            visit(v)
    assert cycles == []


def test_each_package_imports_only_the_layers_below():
    wrong = sorted((m, t) for m, targets in graph().items() for t in targets
                   if package_of(t) != package_of(m) and package_of(t) not in ALLOWED[package_of(m)])
    assert wrong == []


def private_reaches(mods: dict[str, Path]) -> list[tuple[str, str]]:
    """The imports of another package's names that are not among its public names."""
    surface = {p: public_names(p, mods[p]) for p in ALLOWED if p in mods}
    return sorted((m, what) for m, what, theirs in cross_package_imports(mods) if what != theirs
                  and (what.partition(":")[0] != theirs or what.partition(":")[2] not in surface[theirs]))


def test_other_packages_are_used_through_their_public_names():
    """``from deskdex.index import Collection``, not ``from deskdex.index.store import Catalog``: what a
    package offers the others is the ``__all__`` of its ``__init__``, and its modules may be split or
    renamed behind it."""
    assert private_reaches(modules()) == []


def test_the_rule_sees_each_kind_of_reach(tmp_path: Path):
    """The check finds what it forbids, wherever it is written, and lets the public names through."""
    module = tmp_path / "probe.py"
    module.write_text(
        "from deskdex.index import Collection, search\n"  # public
        "from deskdex.errors import StoreError\n"  # the core's modules are its public names
        "from . import ops\n"  # its own package
        "from deskdex import packaging\n"  # a package itself
        "import deskdex.index\n"
        "from deskdex.index.store import Catalog\n"
        "import deskdex.converters.source\n"
        "from deskdex.index import sqlconn\n"  # a module not declared public
        "from deskdex.pipeline import not_a_public_name\n"
        "def later():\n"
        "    from deskdex.webcrawl.runs import plan\n"
        "if False:\n"
        "    from deskdex.converters.source import Source\n")
    mods = {**modules(), "deskdex.daemon.probe": module}
    found = {what for m, what in private_reaches(mods) if m == "deskdex.daemon.probe"}
    assert found == {"deskdex.index.store:Catalog", "deskdex.converters.source", "deskdex.index:sqlconn",
                     "deskdex.pipeline:not_a_public_name", "deskdex.webcrawl.runs:plan",
                     "deskdex.converters.source:Source"}


def test_every_public_name_is_there():
    """Each name of a package's ``__all__`` resolves (lazily made ones included: core/lazy.py), and
    stays the same object once all its modules are imported: a public name equal to a module's
    name would otherwise be replaced by that module."""
    mods = modules()
    for package in sorted(p for p in ALLOWED if p in mods and p not in (CORE, "deskdex.clients")):
        pkg = importlib.import_module(package)
        names = public_names(package, mods[package])
        assert names == set(getattr(pkg, "__all__", ())), package
        before = {}
        for n in sorted(names):
            try:
                before[n] = getattr(pkg, n)
            except AttributeError:
                assert f"{package}.{n}" in mods, f"{package} has no public name {n}"
                before[n] = importlib.import_module(f"{package}.{n}")  # a public module, imported on use
        for m in sorted(mods):
            if m.startswith(package + ".") and m.count(".") == package.count(".") + 1 and not m.endswith(".__main__"):
                try:
                    importlib.import_module(m)
                except ImportError as exc:  # an optional library (Qt, Celery) missing here
                    if (exc.name or "").startswith("deskdex"):
                        raise
        assert {n: getattr(pkg, n) for n in names} == before, package


def test_no_package_reaches_into_a_collections_catalog():
    """A Collection's ``catalog`` (its SQLite tables) is index/'s own: others ask the Collection
    (``get``, ``descendants``, ``stats``, ``retries``...), so the catalog may change behind it."""
    reaches = sorted((name, node.lineno) for name, path in modules().items() if package_of(name) != "deskdex.index"
                     for node in ast.walk(ast.parse(path.read_text()))
                     if isinstance(node, ast.Attribute) and node.attr == "catalog")
    assert reaches == []
