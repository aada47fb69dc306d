"""The converter worker's hook for tests/test_privilege_formats.py: what a worker that gave up root
(enterprise mode) still imported or opened of the interpreter's and deskdex's own files.

Such a late import works only where the account may read the checkout, the venv and the Python
(here a Python under a 0700 /root stops the standard library's, but a readable checkout lets the
venv's pass): recorded by an audit hook, it is caught wherever the tree lives. The hook is
installed when this module is imported (the fork server or the worker, before the drop) and
records nothing while the process is still root. ``enrich`` is the daemon's own worker-side
hook, with what was recorded since the last file added to the first outcome's ``extra``."""

from __future__ import annotations

import os
import site
import sys
from typing import Any

from deskdex.converters.convert import Outcome
from deskdex.index.features import enrich as features_enrich

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where the interpreter's, the venv's and deskdex's own files are (a late open of one of them fails
# for an account that may not read them).
_TREES = tuple({os.path.realpath(p) + os.sep for p in (sys.base_prefix, sys.prefix, HERE, *site.getsitepackages())})
_late: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event not in ("import", "open") or os.geteuid() == 0:
        return
    if event == "import":
        name = str(args[0])
        if name not in sys.builtin_module_names:  # built into the interpreter: no file to read
            _late.append(f"import {name}")
    elif isinstance(args[0], (str, bytes)) and not isinstance(args[0], int):
        path = os.fsdecode(args[0])
        if os.path.isabs(path) and os.path.realpath(path).startswith(_TREES):
            _late.append(f"open {path}")


sys.addaudithook(_audit)


def enrich(outcomes: list[Outcome]) -> None:
    """The daemon's hook (duplicate features), then what was loaded late, for the test to see."""
    features_enrich(outcomes)
    if outcomes:
        # An import of a module that does not exist (an optional one tried) fails as root too.
        outcomes[0].extra["late"] = sorted({x for x in _late if not x.startswith("import ") or x[7:] in sys.modules})
    _late.clear()
