"""The layout keeps its promises (docs/architecture.md): no import cycle between deskdex's modules, function-
local imports included, and each package imports only the layers below it; above all the daemon never
imports a client, and the small core imports nothing of the rest."""

from __future__ import annotations

import ast
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
    "deskdex.pipeline": {"deskdex", "deskdex.converters", "deskdex.index", "deskdex.webcrawl", "deskdex.cluster"},
    "deskdex.daemon": {"deskdex", "deskdex.converters", "deskdex.index", "deskdex.webcrawl", "deskdex.pipeline",
                       "deskdex.cluster"},
    "deskdex.clients": {"deskdex", "deskdex.converters", "deskdex.index", "deskdex.webcrawl", "deskdex.pipeline",
                        "deskdex.daemon", "deskdex.packaging", "deskdex.cluster"},
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
            if t and t != name and not name.startswith(t + "."):
                found.add(t)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


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
