"""ruff, with the rules pyproject.toml's [tool.ruff] chooses, finds nothing in the package, the tests or
the benchmarks: `make test` is where a new finding fails (issue 29). The ruff of the venv the suite runs
in, as installed by the test extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

RUFF = Path(sys.executable).parent / "ruff"
CHECKED = ["core", "daemon", "pipeline", "index", "converters", "webcrawl", "cluster", "clients", "sources", "packaging",
           "tests", "benchmarks"]


PROBE = "_lint_probe_"


def test_ruff_finds_nothing() -> None:
    # The probe below is written into tests/ while this may run on another worker: ruff would list it,
    # then find it gone (E902), or report its planted finding.
    p = subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise",
                        "--extend-exclude", f"tests/{PROBE}*", *CHECKED], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_ruff_reads_our_rules(tmp_path: Path) -> None:
    """The check above can fail: a late-bound loop variable (bugbear's B023, one of our rules) is found in
    a file of the tree, and the configuration is pyproject.toml's (not ruff's defaults, which skip B)."""
    probe = ROOT / "tests" / f"{PROBE}{tmp_path.name}.py"
    probe.write_text("fs = []\nfor i in range(3):\n    fs.append(lambda: i)\n")
    try:
        p = subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise", str(probe)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    finally:
        probe.unlink()
    assert p.returncode == 1 and "B023" in p.stdout, p.stdout + p.stderr
