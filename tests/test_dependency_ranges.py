"""The dependency ranges of pyproject.toml are the ones the tests ran on (docs/development.md,
"Dependency ranges"), and the small surface of the install: ``deskdex --version``, a quiet
``make install``, and the README's extra installs in the Makefile's strict editable mode.

- Every dependency has a lower bound, and an upper bound only with its reason beside it, a comment
  that names the release it keeps out.
- ``make test`` resolves afresh: every installed dependency is within its range. ``make
  test-lowest`` (DESKDEX_DEPENDENCIES=lowest) installs each at exactly its lower bound: a bound that
  no longer installs or works is raised, not left claiming what was never tested.

Versions are compared as their release numbers (``3.1.5.20240630``), with no ``packaging`` import:
the repository's own packaging/ folder stands first on the tests' sys.path.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from .conftest import VERSION, make_env
from .test_installed import copy_checkout

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT_TEXT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
PROJECT = tomllib.loads(PYPROJECT_TEXT)["project"]
# What `make test-lowest` installs (Makefile, install-lowest): the runtime dependencies and these extras.
LOWEST_EXTRAS = ("test", "tray", "cluster")
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*)")


def requirements(text: str, extras: tuple[str, ...] = LOWEST_EXTRAS) -> list[str]:
    project = tomllib.loads(text)["project"]
    return [*project["dependencies"], *(r for e in extras for r in project["optional-dependencies"][e])]


def parse(requirement: str) -> tuple[str, list[tuple[str, str]]]:
    """(normalized name, [(operator, version)]) of a requirement such as ``celery[redis]>=5.5,<6``."""
    m = REQUIREMENT.match(requirement)
    assert m, f"cannot read the requirement {requirement!r}"
    name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
    specs = [re.match(r"\s*(===|==|!=|~=|>=|<=|>|<)\s*(\S+)\s*$", s) for s in m.group(2).split(",") if s.strip()]
    assert all(specs), f"cannot read the versions of {requirement!r}"
    return name, [(s.group(1), s.group(2)) for s in specs if s]


def release(text: str) -> tuple[int, ...]:
    """The release numbers of a version, trailing zeros dropped: 2.0 == 2.0.0; suffixes (rc1, .post1) ignored."""
    parts = []
    for piece in text.split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
        if digits.group() != piece:
            break
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def bound_problems(text: str) -> list[str]:
    """What breaks the rule in a pyproject.toml's text: a dependency with no lower bound, or an upper
    bound (or an excluded or pinned version) without a comment beside it that names that version."""
    problems = []
    lines = text.splitlines()
    for requirement in requirements(text, tuple(tomllib.loads(text)["project"]["optional-dependencies"])):
        _, specs = parse(requirement)
        if not any(op in (">=", "==", "~=", "===") for op, _ in specs):
            problems.append(f"{requirement}: no lower bound")
        limits = [v for op, v in specs if op in ("<", "<=", "!=", "==", "===", "~=")]
        if not limits:
            continue
        for i, line in enumerate(lines):  # each line that declares it, with its comment
            if f'"{requirement}"' not in line:
                continue
            comment = line.split("#", 1)[1] if "#" in line.split(f'"{requirement}"', 1)[1] else ""
            above = i - 1
            while above >= 0 and lines[above].strip().startswith("#"):
                comment = lines[above] + "\n" + comment
                above -= 1
            for limit in limits:
                if not re.search(rf"(?<![\w.]){re.escape(limit)}(?![\w]|\.\d)", comment):
                    problems.append(f"{requirement}: no comment beside it says why {limit} is kept out")
    return problems


def test_every_dependency_has_a_lower_bound_and_an_upper_bound_only_with_its_reason() -> None:
    assert bound_problems(PYPROJECT_TEXT) == []
    # The check itself: a bound without a reason, a reason that names another release, no lower bound.
    bare = PYPROJECT_TEXT.replace('"xxhash>=3.0",', '"xxhash>=3.0,<5",')
    assert bound_problems(bare) == ["xxhash>=3.0,<5: no comment beside it says why 5 is kept out"]
    vague = PYPROJECT_TEXT.replace('"xxhash>=3.0",', '"xxhash>=3.0,<5",  # 4.2 is slower')
    assert bound_problems(vague) == ["xxhash>=3.0,<5: no comment beside it says why 5 is kept out"]
    named = PYPROJECT_TEXT.replace('"xxhash>=3.0",', '"xxhash>=3.0,<5",  # 5 drops xxh3_64')
    assert bound_problems(named) == []
    assert bound_problems(PYPROJECT_TEXT.replace('"xxhash>=3.0",', '"xxhash",')) == ["xxhash: no lower bound"]


def installed(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        pytest.fail(f"{name} is not installed: install the test extra (make install-test)", pytrace=False)


def test_installed_versions_are_in_range_and_at_the_lower_bounds_in_the_lowest_mode() -> None:
    lowest = os.environ.get("DESKDEX_DEPENDENCIES") == "lowest"
    wrong = []
    for requirement in requirements(PYPROJECT_TEXT):
        name, specs = parse(requirement)
        have = release(installed(name))
        for op, v in specs:
            want = release(v)
            ok = {">=": have >= want, ">": have > want, "<": have < want, "<=": have <= want,
                  "==": have == want, "!=": have != want}.get(op, True)
            if lowest and op == ">=":
                ok = have == want
            if not ok:
                wrong.append(f"{requirement}: {installed(name)} installed"
                             + (" (raise the lower bound to what installs and passes)" if lowest else ""))
    assert wrong == []


def test_release_numbers_compare_as_versions() -> None:
    assert release("2.0") == release("2.0.0") == (2,)
    assert release("3.1.5.20240630") > release("3.1.5")
    assert release("0.22.2") > release("0.22") and release("9.10") > release("9.2.0")
    assert release("2026.10.19.post1") == (2026, 10, 19) and release("6.0.0rc1") == (6,)


def test_version_through_the_installed_console_script() -> None:
    script = Path(sys.executable).parent / "deskdex"
    assert script.is_file(), f"{script}: install deskdex (make install-test)"
    # PYTHONPROFILEIMPORTTIME: the interpreter names on stderr every module the command imported.
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.run([str(script), "--version"], check=False, capture_output=True, text=True, env=env, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, f"deskdex {VERSION}\n"), proc.stderr[-2000:]
    loaded = set(re.findall(r"^import time:.*\|\s+(\S+)\s*$", proc.stderr, re.MULTILINE))
    assert "deskdex.clients.launch" in loaded  # the list is real: it holds the entry point
    heavy = {m for m in loaded if m.startswith(("deskdex.daemon", "deskdex.index", "deskdex.converters",
                                                "deskdex.clients.cli", "tantivy", "argparse"))}
    assert heavy == set()
    # Also where the full parser reads it (after --home), and listed by --help.
    proc = subprocess.run([str(script), "--home", "/nonexistent/deskdex", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert (proc.returncode, proc.stdout) == (0, f"deskdex {VERSION}\n"), proc.stderr[-2000:]
    helped = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert "--version" in helped.stdout, helped.stdout


def test_readme_installs_keep_the_strict_editable_mode() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    loose = [line for line in readme.splitlines() if re.search(r"pip install\b.*\s-e\b", line)
             and "editable_mode=strict" not in line]
    assert loose == [], "install these through the Makefile (make install-tray...) or with editable_mode=strict"
    targets = set(re.findall(r"\bmake (install-[\w-]+)", readme))
    assert {"install-tray", "install-cluster"} <= targets
    for target in targets:  # each a rule of the Makefile that installs its extra in the strict mode
        rule = re.search(rf"^(?:[\w-]+ )*{target}(?: [\w-]+)*:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
        assert rule, f"README names make {target}, which the Makefile lacks"
        assert "$(EDITABLE)" in rule.group(1), target


# ---------------------------------------------------------------------------------------------------
# `make install`: quiet


@pytest.fixture
def scratch() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="deskdex-quiet-install-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def make_install(src: Path, venv: Path) -> str:
    """`make install` (what `make run` does first) in ``src``, into ``venv``; its whole output."""
    env = {k: v for k, v in make_env().items() if k not in ("PYTHONWARNINGS", "VIRTUAL_ENV")}
    env["PIP_NO_DEPS"] = "1"  # the dependencies come from this venv (the .pth): only deskdex is built
    proc = subprocess.run(["make", "-C", str(src), "--no-print-directory", "install", f"VENV={venv}"],
                          check=False, capture_output=True, text=True, env=env, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return out


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
def test_make_install_prints_no_setuptools_warnings(scratch: Path) -> None:
    src = copy_checkout(scratch / "src")
    venv = scratch / "venv"
    # A venv as the Makefile makes it, with this venv's pip (the same release `make` upgrades to) and
    # its dependencies reached through a .pth line, so that only deskdex itself is built and installed.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    outer = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    Path(site, "zz_outer.pth").write_text("\n".join(outer) + "\n")

    out = make_install(src, venv)
    # "...Warning:" of a build's warning (BuildBackendWarning, SetuptoolsDeprecationWarning), pip's "WARNING:"
    noise = [line for line in out.splitlines() if "!!" in line or re.search(r"warning:", line, re.IGNORECASE)]
    assert noise == [], out
    assert (src / "build").is_dir() and any(Path(site).glob("__editable__*deskdex*.pth"))  # strict: installed

    # The channel is open: a real problem of the build still shows (the four data folders setuptools
    # warns about when it takes the sdist's files as package data).
    pyproject = src / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("include-package-data = false\n", ""))
    out = make_install(src, venv)
    assert "is absent from the `packages` configuration" in out and "!!" in out, out
