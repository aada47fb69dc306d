"""The package type-checks: mypy in strict mode (the configuration in pyproject.toml) over the
installed package, as a user's type checker sees it, and the package says it is typed (py.typed).

mypy runs on `-p deskdex` from a neutral folder, not on the folders of the checkout: those only
become one import package (core/ is deskdex, clients/ is deskdex.clients, ...) through the
install's package-dir mapping. Its cache is kept in build/ (git ignores it, `make clean` removes
it), so a run after the first checks only what changed: a few seconds instead of about twenty.
"""

from __future__ import annotations

import importlib.resources
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_mypy_strict_passes(tmp_path: Path) -> None:
    cache = ROOT / "build" / "mypy_cache"
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
           "--cache-dir", str(cache), "-p", "deskdex"]
    p = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    if "No module named mypy" in p.stderr:
        pytest.fail("mypy is missing: install the test extra (make install-test)", pytrace=False)
    if p.returncode != 0:
        pytest.fail(f"mypy -p deskdex exited {p.returncode}:\n{p.stdout}{p.stderr}", pytrace=False)


def test_package_ships_py_typed() -> None:
    marker = importlib.resources.files("deskdex").joinpath("py.typed")
    assert marker.is_file(), "deskdex/py.typed is missing from the installed package (package data)"
