"""deskdex as users install it, and `make test`'s own guarantees.

- The package list in pyproject.toml names every folder that holds deskdex's modules, and ships every
  data file beside them.
- The wheel, installed alone into a fresh venv, holds only ``deskdex/`` and its dist-info, and its
  console script formats, indexes, searches, runs the daemon and installs the user service.
- The default editable install (``pip install -e .``) and the strict one `make` uses import every
  module and read every package data file from the checkout, and their commands write units.
- `make test` checks the Debian packages first: another user gets the missing ones named and nothing
  run; a run that collects nothing fails; processes the tests leave behind are killed and fail it.

Economy, and why it stays honest: each install goes into a fresh venv made ``--without-pip`` (pip runs
from this venv with ``--python``) and ``--no-deps``; the third-party dependencies (tantivy, lxml, numpy,
Qt: hundreds of MB that test nothing of ours) come from this venv's site-packages through a ``.pth``
line. A ``.pth`` line only appends that folder to sys.path, after the fresh venv's own site-packages and
without running the ``.pth`` files in it, so ``deskdex`` can only come from the fresh install; the
checks assert where every module was loaded from. Builds copy the checkout first, so setuptools' build/
and egg-info never land in (or go stale in) the working tree. pip's cache serves setuptools to the
isolated builds.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from .conftest import VERSION, make_env

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS: dict[str, Any] = PYPROJECT["tool"]["setuptools"]
PACKAGES: list[str] = SETUPTOOLS["packages"]
PACKAGE_DIR: dict[str, str] = SETUPTOOLS["package-dir"]
PACKAGE_DATA: dict[str, list[str]] = SETUPTOOLS.get("package-data", {})
DIST_INFO = f"deskdex-{VERSION}.dist-info"
# Root folders with Python in them that deskdex does not ship: they run from the checkout.
NOT_SHIPPED = {"tests", "benchmarks"}
# Files beside the package data that set up a test or benchmark machine: never installed.
NOT_PACKAGE_DATA = {"packaging/system-deps.sh", "packaging/system-deps-bench.sh"}
# Copying the checkout leaves out what is not source: a venv, build output, caches.
NOT_SOURCE = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".mypy_cache", "test-artifacts"}
OUTER_SITE = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
NOBODY = 65534


# ---------------------------------------------------------------------------------------------------
# What the source tree says should be installed


def folder_of(package: str) -> Path:
    """The repository folder of ``package`` under package-dir (the longest mapped prefix wins)."""
    parts = package.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in PACKAGE_DIR:
            return ROOT / PACKAGE_DIR[prefix] / Path(*parts[n:])
    raise AssertionError(f"{package} is under no package-dir mapping")


def package_folders() -> dict[str, Path]:
    """Every folder below a mapped root that holds Python, by the package name it installs as."""
    found: dict[str, Path] = {}
    for top, rel in PACKAGE_DIR.items():
        for folder, dirs, files in os.walk(ROOT / rel):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if any(f.endswith(".py") for f in files):
                name = ".".join((top, *Path(folder).relative_to(ROOT / rel).parts))
                assert found.setdefault(name, Path(folder)) == Path(folder), f"{name}: two folders"
    return found


def modules() -> dict[str, tuple[str, str]]:
    """Every module: its source path in the repository and its path once installed."""
    out: dict[str, tuple[str, str]] = {}
    for package in PACKAGES:
        folder = folder_of(package)
        for f in sorted(folder.glob("*.py")):
            name = package if f.stem == "__init__" else f"{package}.{f.stem}"
            out[name] = (str(f.relative_to(ROOT)), "/".join([*package.split("."), f.name]))
    return out


def package_data() -> dict[str, str]:
    """Every package data file: its source path and its path once installed."""
    out: dict[str, str] = {}
    for package, patterns in PACKAGE_DATA.items():
        folder = folder_of(package)
        for pattern in patterns:
            for f in sorted(folder.glob(pattern)):
                out[str(f.relative_to(ROOT))] = "/".join([*package.split("."), str(f.relative_to(folder))])
    return out


def test_package_list_names_every_package_folder() -> None:
    folders = package_folders()
    # Every root folder with Python is mapped to deskdex or deliberately not shipped.
    roots_with_python = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")
                         and p.name not in NOT_SOURCE and any(p.glob("*.py"))}
    assert roots_with_python - NOT_SHIPPED == {Path(r).parts[0] for r in PACKAGE_DIR.values()}
    # Every folder of modules is in the list, and the list names nothing else.
    assert sorted(folders) == sorted(PACKAGES)
    assert set(PACKAGE_DIR) <= set(PACKAGES)
    for package in PACKAGES:
        assert folders[package] == folder_of(package)
        # A regular package: setuptools' default editable install cannot import a namespace subpackage
        # mapped from outside its parent's folder (pypa/setuptools#4943).
        assert (folder_of(package) / "__init__.py").is_file(), f"{package} has no __init__.py"


def test_package_data_covers_every_data_file() -> None:
    shipped = package_data()
    for package, patterns in PACKAGE_DATA.items():
        for pattern in patterns:
            assert any(fnmatch.fnmatch(src, f"{folder_of(package).relative_to(ROOT)}/{pattern}") for src in shipped), \
                f"package-data {package}: {pattern} matches nothing"
    for package in PACKAGES:
        folder = folder_of(package)
        for f in folder.iterdir():
            rel = str(f.relative_to(ROOT))
            if f.is_file() and f.suffix not in (".py", ".pyc") and rel not in NOT_PACKAGE_DATA:
                assert rel in shipped, f"{rel} is not package data: installed deskdex would lack it"
        for sub in folder.iterdir():  # data folders (systemd/, launchd/...): folders without Python
            if sub.is_dir() and sub.name != "__pycache__" and not any(sub.rglob("*.py")):
                for f in sub.rglob("*"):
                    if f.is_file():
                        assert str(f.relative_to(ROOT)) in shipped, f"{f.relative_to(ROOT)} is not package data"


# ---------------------------------------------------------------------------------------------------
# Fresh installs


def copy_checkout(dest: Path) -> Path:
    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in NOT_SOURCE or n.endswith(".egg-info")
                or (Path(folder, n) / "pyvenv.cfg").exists()}

    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


def pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"pip {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"


class Venv:
    """A fresh venv with no pip and no packages, whose site-packages is checked before and after."""

    def __init__(self, path: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
        self.path = path
        self.python = path / "bin" / "python"
        self.deskdex = path / "bin" / "deskdex"
        self.site = Path(subprocess.run([str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        capture_output=True, text=True, check=True).stdout.strip())
        self.before = set(os.listdir(self.site))

    def install(self, *args: str) -> set[str]:
        """pip install into this venv; what it added at the top of site-packages."""
        pip("--python", str(self.python), "install", "-q", "--no-deps", *args)
        added = set(os.listdir(self.site)) - self.before
        # After the install, so the listing above sees only what pip put there.
        (self.site / "zz_outer_dependencies.pth").write_text("\n".join(OUTER_SITE) + "\n")
        return added


def user_env(tmp: Path) -> dict[str, str]:
    """A session of a new user: its own HOME, no deskdex or XDG settings, no checkout on the path, and
    no user systemd manager (a runtime folder with no bus in it), as in a container or over ssh."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XDG_", "DESKDEX_", "PYTHON", "DBUS_")) and k != "VIRTUAL_ENV"}
    home, runtime = tmp / "user", tmp / "runtime"
    home.mkdir()
    runtime.mkdir(mode=0o700)
    env.update(HOME=str(home), XDG_RUNTIME_DIR=str(runtime), NO_COLOR="1")
    return env


def run(argv: list[str | Path], env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    shown = " ".join(str(a) for a in argv[:3])  # not the probe's script and arguments
    assert proc.returncode == 0, f"{shown} ... exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


# Run by the fresh venv's Python: where each module was loaded from, every package data file as read
# through deskdex.packaging, and each kind of unit rendered from them.
PROBE = r"""
import importlib, importlib.util, json, sys
from deskdex import packaging
from deskdex.clients import service
from deskdex.clients.tray import autostart

names, data = json.loads(sys.argv[1]), json.loads(sys.argv[2])
files = {}
for name in names:
    if name.rsplit(".", 1)[-1] == "__main__":  # importing it would run the program: find it only
        files[name] = importlib.util.find_spec(name).origin
    else:
        files[name] = importlib.import_module(name).__file__
print(json.dumps({
    "files": files,
    "data": {path: packaging.read_text(*path.split("/")[1:]) for path in data},
    "units": {kind: service.render(kind, home="/srv/deskdex home").text for kind in ("systemd", "launchd", "task")},
    "desktop": autostart.desktop_entry(["/opt/deskdex", "tray"]),
}))
"""


def check_install(venv: Venv, tmp: Path, origin: dict[str, Path]) -> None:
    """Every module loads from where ``origin`` says, package data reads back as in the checkout, and
    the commands that write units and desktop entries work. ``origin[module]`` is the file expected."""
    mods = modules()
    data = {src: inst.removeprefix("deskdex/") for src, inst in package_data().items()
            if inst.startswith("deskdex/packaging/")}
    env = user_env(tmp)
    probe = run([venv.python, "-c", PROBE, json.dumps(sorted(mods)),
                 json.dumps(sorted(d for d in data.values()))], env, tmp)
    got = json.loads(probe.stdout)
    for name in mods:
        assert os.path.realpath(got["files"][name]) == os.path.realpath(origin[name]), name
    for src, inst in data.items():
        assert got["data"][inst] == (ROOT / src).read_text(encoding="utf-8"), src
    for kind, text in got["units"].items():
        live = [line for line in text.splitlines() if not line.startswith("#")]  # a comment names @EXEC@
        assert not [line for line in live for p in ("@EXEC@", "@ARGS@", "@COMMAND@", "@ARGUMENTS@") if p in line], kind
        assert str(venv.deskdex) in text and "/srv/deskdex home" in text, (kind, text)
    assert "Exec=/opt/deskdex tray\n" in got["desktop"] and "Type=Application" in got["desktop"]

    # The commands: the user unit and the tray's autostart entry land in the temporary HOME.
    proc = run([venv.deskdex, "service", "install", "--no-start"], env, tmp)
    unit = Path(env["HOME"]) / ".config" / "systemd" / "user" / "deskdex.service"
    assert proc.stdout.strip() == f"installed systemd service: {unit}"
    assert "systemctl --user enable --now deskdex.service" in proc.stderr  # said how to enable it
    assert f"ExecStart={venv.deskdex} daemon\n" in unit.read_text()
    if shutil.which("systemd-analyze"):
        check = subprocess.run(["systemd-analyze", "--user", "verify", str(unit)], capture_output=True, text=True,
                               env=env, timeout=60)
        assert check.returncode == 0 and "ignoring" not in check.stderr, check.stderr
    run([venv.deskdex, "tray", "--install-autostart"], env, tmp)
    entry = (Path(env["HOME"]) / ".config" / "autostart" / "deskdex-tray.desktop").read_text()
    assert f"Exec={venv.deskdex} tray\n" in entry and "Name=deskdex\n" in entry


# Run by the fresh venv's Python: a script of the Python API (docs/python-api.md), and what
# `import deskdex` alone loaded of deskdex.
API_SCRIPT = r"""
import json, sys
import deskdex
light = sorted(m for m in sys.modules if m.startswith("deskdex"))
hits = deskdex.search(sys.argv[1])
print(json.dumps({"light": light, "paths": [h.path for h in hits], "text": deskdex.document(hits[0].path).text,
                  "daemon": deskdex.status().daemon, "documents": deskdex.status().documents,
                  "api": sys.modules[deskdex.search.__module__].__file__}))
"""


def api_script(venv: Venv, query: str, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    got: dict[str, Any] = json.loads(run([venv.python, "-c", API_SCRIPT, query], env, cwd).stdout)
    assert got["light"] == ["deskdex", "deskdex.lazy"], got["light"]
    assert got["api"] == str(venv.site / "deskdex" / "clients" / "api.py")
    return got


@pytest.fixture
def scratch() -> Iterator[Path]:
    # Not tmp_path: pytest keeps its last three runs, and a venv per test would add up to 100s of MB.
    d = Path(tempfile.mkdtemp(prefix="deskdex-installed-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def environ_holders(entry: str) -> list[int]:
    """Processes whose environment holds ``entry`` (``NAME=value``), from /proc."""
    pids = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and entry.encode() in (p / "environ").read_bytes().split(b"\0"):
                pids.append(int(p.name))
        except OSError:
            continue
    return pids


@pytest.mark.slow
def test_wheel_installs_alone_and_runs(scratch: Path) -> None:
    src = copy_checkout(scratch / "src")
    pip("wheel", "-q", "--no-deps", "-w", str(scratch / "wheels"), str(src))
    (wheel,) = (scratch / "wheels").glob("deskdex-*.whl")

    # The wheel holds the modules and the package data, and nothing else beside its dist-info.
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        record = {line.split(",")[0] for line in z.read(f"{DIST_INFO}/RECORD").decode().splitlines() if line}
    assert {n.split("/")[0] for n in names} == {"deskdex", DIST_INFO}
    assert record == set(names)
    expected = {inst for _, inst in modules().values()} | set(package_data().values())
    assert {n for n in names if not n.startswith(DIST_INFO + "/")} == expected

    venv = Venv(scratch / "venv")
    assert venv.install(str(wheel)) == {"deskdex", DIST_INFO}
    check_install(venv, scratch, {name: venv.site / inst for name, (_, inst) in modules().items()})

    # The console script of the fresh venv, as a new user runs it.
    (scratch / "run").mkdir()
    env = user_env(scratch / "run")
    home, docs = scratch / "run" / "deskdex-home", scratch / "run" / "docs"
    env["DESKDEX_HOME"] = str(home)
    docs.mkdir()
    (docs / "soup.txt").write_text("Tomato soup with basil and a little cream.\n")
    (docs / "garden.md").write_text("# Garden\n\nCucumbers climb the fence in July.\n")
    (docs / "recipe.html").write_text("<html><head><title>Bread</title></head><body><p>Rye sourdough, "
                                      "slowly proofed.</p></body></html>\n")
    cwd = scratch / "run"
    formats = json.loads(run([venv.deskdex, "formats", "--json"], env, cwd).stdout)["formats"]
    assert {"pdf", "docx", "html"} <= {e for f in formats for e in f["extensions"]}
    summary = json.loads(run([venv.deskdex, "index", str(docs), "--json", "--no-progress"], env, cwd).stdout)
    assert summary["indexed"] == 3 and summary["failed"] == 0, summary
    assert run([venv.deskdex, "search", "tomato", "--paths"], env, cwd).stdout.split() == [str(docs / "soup.txt")]
    assert run([venv.deskdex, "search", "sourdough", "--paths"], env, cwd).stdout.split() == [str(docs / "recipe.html")]
    by_script = api_script(venv, "tomato", env, cwd)  # the index read directly
    assert (by_script["paths"], by_script["daemon"], by_script["documents"]) == ([str(docs / "soup.txt")], False, 3)
    assert by_script["text"] == "Tomato soup with basil and a little cream."

    # The daemon: started on the same home, asked through its socket, stopped with SIGTERM.
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "config.toml").write_text(f"folders = [{json.dumps(str(docs))}]\n")
    log = (scratch / "daemon.log").open("w")
    daemon = subprocess.Popen([str(venv.deskdex), "daemon"], env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline, status = time.monotonic() + 60, dict[str, Any]()
        while time.monotonic() < deadline and not (status.get("daemon") and status.get("state") == "idle"):
            assert daemon.poll() is None, (scratch / "daemon.log").read_text()
            status = json.loads(run([venv.deskdex, "status", "--json"], env, cwd).stdout)
            time.sleep(0.2)
        assert status.get("daemon") and status["state"] == "idle" and status["documents"] == 3, status
        assert run([venv.deskdex, "search", "cucumbers", "--paths"], env, cwd).stdout.split() == [str(docs / "garden.md")]
        by_script = api_script(venv, "cucumbers", env, cwd)  # through the daemon
        assert (by_script["paths"], by_script["daemon"], by_script["documents"]) == ([str(docs / "garden.md")], True, 3)
        assert "Cucumbers climb the fence in July." in by_script["text"]
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(30) == 0, (scratch / "daemon.log").read_text()
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        log.close()
    if sys.platform.startswith("linux"):  # nothing it started outlives it (converter workers)
        assert environ_holders(f"DESKDEX_HOME={home}") == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["default", "strict"])
def test_editable_install_reads_the_checkout(scratch: Path, mode: str) -> None:
    src = copy_checkout(scratch / "src")
    venv = Venv(scratch / "venv")
    strict = ["--config-settings", "editable_mode=strict"] if mode == "strict" else []
    added = venv.install("-e", str(src), *strict)
    # Its dist-info and its hooks (.pth, the default mode's finder, and pip's bytecode of that finder).
    pycache = set(os.listdir(venv.site / "__pycache__")) if "__pycache__" in added else set()
    assert DIST_INFO in added and all(n.startswith("__editable__") for n in pycache), pycache
    assert {n for n in added - {"__pycache__"} if not n.startswith(("__editable__", DIST_INFO))} == set(), added
    # Both modes load the checkout's own files: the strict mode through its tree of links in build/.
    check_install(venv, scratch, {name: src / source for name, (source, _) in modules().items()})


# ---------------------------------------------------------------------------------------------------
# `make test` itself


def make_sandbox() -> Path:
    """The Makefile and system-deps.sh in a folder any user can read (pytest's tmp_path is root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="deskdex-make-"))
    (d / "packaging").mkdir()
    shutil.copy2(ROOT / "Makefile", d / "Makefile")
    shutil.copy2(ROOT / "packaging" / "system-deps.sh", d / "packaging" / "system-deps.sh")
    for p in (d, d / "packaging"):
        p.chmod(0o755)
    return d


@pytest.fixture
def sandbox() -> Iterator[Path]:
    d = make_sandbox()
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def as_another_user() -> list[str]:
    """The prefix that runs a command as an unprivileged user: nobody via setpriv when we are root,
    else nothing (we are one already)."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.fail("setpriv (util-linux) is needed to run as another user; `make test` installs it")
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


needs_debian = pytest.mark.skipif(not shutil.which("dpkg-query"), reason="checks Debian packages with dpkg-query")
needs_make = pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")


@needs_debian
def test_system_deps_names_what_another_user_lacks(sandbox: Path) -> None:
    # acl is installed (the suite needs it); the second name cannot exist in Debian.
    proc = subprocess.run([*as_another_user(), "bash", str(sandbox / "packaging" / "system-deps.sh"),
                           "acl", "deskdex-no-such-package"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "missing Debian packages: deskdex-no-such-package\n" in proc.stderr
    assert "sudo apt-get install deskdex-no-such-package\n" in proc.stderr
    assert " acl" not in proc.stderr


@needs_debian
def test_system_deps_is_silent_when_nothing_is_missing(sandbox: Path) -> None:
    # Essential packages, installed on every Debian system: nothing to name, nothing to install.
    proc = subprocess.run([*as_another_user(), "bash", str(sandbox / "packaging" / "system-deps.sh"),
                           "dpkg", "bash", "coreutils"], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (0, "")


@needs_debian
@needs_make
def test_make_test_as_another_user_stops_before_running_anything(sandbox: Path) -> None:
    writable = sandbox / "scratch"
    writable.mkdir()
    writable.chmod(0o777)  # so that only the check, not a permission, can keep the venv from being made
    venv = writable / "venv"
    proc = subprocess.run([*as_another_user(), "make", "-C", str(sandbox), "test", f"VENV={venv}",
                           "SYSTEM_DEPS=acl deskdex-no-such-package"], capture_output=True, text=True, timeout=60,
                          env=make_env())
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "sudo apt-get install deskdex-no-such-package" in proc.stderr
    assert not venv.exists() and "-m venv" not in out and "pip install" not in out and "-m pytest" not in out, out


def make_check(sandbox: Path, tests: Path) -> subprocess.CompletedProcess[str]:
    """`make check` (the test target's last step) on ``tests`` with this venv: nothing installed."""
    venv = Path(sys.executable).parent.parent
    return subprocess.run(["make", "-C", str(sandbox), "check", f"VENV={venv}",
                           f"PYTEST_ARGS=-q -p no:cacheprovider {tests}"], capture_output=True, text=True, timeout=120,
                          env=make_env())


@pytest.mark.slow
@needs_make
def test_make_fails_when_pytest_collects_nothing(sandbox: Path) -> None:
    (sandbox / "none").mkdir()
    (sandbox / "none" / "notes.py").write_text("def helper() -> None: ...\n")
    proc = make_check(sandbox, sandbox / "none")
    assert proc.returncode != 0 and "pytest ran no test: failing" in proc.stderr, proc.stderr
    (sandbox / "none" / "test_one.py").write_text("def test_one() -> None: ...\n")
    assert make_check(sandbox, sandbox / "none").returncode == 0  # the same run with a test passes


@pytest.mark.slow
@needs_make
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="make check finds leftovers through /proc")
def test_make_kills_what_the_tests_leave_behind(sandbox: Path) -> None:
    pidfile = sandbox / "leaked.pid"
    (sandbox / "leaky").mkdir()
    (sandbox / "leaky" / "test_leaky.py").write_text(
        "import subprocess, sys\n"
        "def test_leaves_a_process() -> None:\n"
        "    p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
        f"    open({str(pidfile)!r}, 'w').write(str(p.pid))\n")
    proc = make_check(sandbox, sandbox / "leaky")
    pid = int(pidfile.read_text())
    try:
        assert proc.returncode != 0, proc.stdout
        assert "1 passed" in proc.stdout and "left these processes behind" in proc.stderr
        assert f"{pid} " in proc.stderr and "time.sleep(600)" in proc.stderr
        deadline = time.monotonic() + 5  # killed; gone once reaped (a zombie holds no environ)
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        assert not _alive(pid)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
