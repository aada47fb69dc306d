"""Lazy public names for a package's ``__init__`` (PEP 562): ``from deskdex.webcrawl import Crawler``
imports the submodule that defines ``Crawler`` on first use, so that importing a package for one of
its names loads neither the rest of it nor its libraries (httpx, Celery, tantivy).

Each package lists its public names in ``__all__``, imports them under ``TYPE_CHECKING`` (what mypy
reads: a module-level ``__getattr__`` made by a call is not one it trusts) and sets
``__getattr__ = lazy.names(__name__, {name: ".submodule"})``. tests/test_layout.py checks that
every name of ``__all__`` resolves, and that other packages import nothing else.

Light on purpose (no typing at run time), like paths.py: the ``deskdex`` command's fast path
imports packages.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def names(package: str, where: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: the public name ``name`` taken from the submodule
    ``where[name]`` (relative, ``".store"``; ``".store:other"`` when it has another name there),
    then kept in the package so that the next look-up costs nothing."""

    def __getattr__(name: str) -> object:
        spec = where.get(name)
        if spec is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        from importlib import import_module

        module, _, attr = spec.partition(":")
        value = getattr(import_module(module, package), attr or name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
