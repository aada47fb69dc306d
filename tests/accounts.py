"""Real Unix accounts for the enterprise-mode tests: made with useradd, removed (with their homes)
at the end, and clients run as each of them with setpriv.

What other accounts run must be readable by them, and the checkout may not be: a clone in a 0700
folder (``mktemp -d``, a home), a project interpreter under /root (pyenv). So the first test that
needs it installs deskdex once for the session (``readable_install``): a venv under a 0755 folder of
/tmp, on an interpreter every account may run, with deskdex built from the checkout as a wheel and
its dependencies linked from this venv. The clients run as accounts and the system daemon (whose
converters drop to the accounts) run from there."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import tomllib
import uuid
from dataclasses import dataclass
from pathlib import Path

from .conftest import ROOT

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
TOOLS = ("useradd", "userdel", "groupadd", "groupdel", "setpriv", "setfacl")


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


class Users:
    """Two real accounts and a group they share, removed again (with their homes) at the end."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:6]
        self.a, self.b, self.c, self.group = f"dxa_{tag}", f"dxb_{tag}", f"dxc_{tag}", f"dxg_{tag}"
        self.made: list[str] = []

    def add(self, name: str) -> None:
        self.made.append(name)  # before: a failed useradd may still leave a half-made account
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True, capture_output=True)

    def create(self) -> tuple[pwd.struct_passwd, pwd.struct_passwd]:
        """Make the group and accounts a (in the group) and b; their passwd entries."""
        subprocess.run(["groupadd", self.group], check=True, capture_output=True)
        for name, extra in ((self.a, ["-G", self.group]), (self.b, [])):
            subprocess.run(["useradd", "-m", "-s", "/bin/sh", *extra, name], check=True, capture_output=True)
            self.made.append(name)
        return pwd.getpwnam(self.a), pwd.getpwnam(self.b)

    def remove(self) -> None:
        for name in self.made:
            p = subprocess.run(["userdel", "-r", name], capture_output=True, text=True)
            if p.returncode not in (0, 12):  # 12: the mail spool was not there
                print(f"userdel {name}: {p.stderr}", file=sys.stderr)
        subprocess.run(["groupdel", self.group], capture_output=True)


def set_password(name: str, password: str) -> None:
    """Give account ``name`` a password (chpasswd), for the system daemon's web login through PAM."""
    subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True, capture_output=True)


@dataclass(frozen=True)
class Installed:
    """deskdex installed where every account may read and run it."""

    root: Path  # the 0755 folder that holds it all, removed at the end of the session
    python: str  # the venv's interpreter
    deskdex: str  # its console script
    site: Path  # its site-packages


_installed: Installed | None = None
_install_failed = ""  # why the install failed, so that later tests fail at once with the same reason


def unreachable(path: Path, leaf: int = stat.S_IROTH) -> Path | None:
    """The first part of ``path`` (symbolic links resolved) that an account outside its owner and
    group cannot pass through (a folder without o+x), or the file itself when it lacks ``leaf`` (o+r,
    o+rx for a program); None when every account can. Checked on the mode bits: os.access says yes to
    root for everything."""
    real = path.resolve()
    for part in [*reversed(real.parents), real]:
        mode = part.stat().st_mode
        need = stat.S_IXOTH if stat.S_ISDIR(mode) else leaf
        if mode & need != need:
            return part
    return None


@functools.cache  # the same answer all session; each look runs two interpreters
def readable_python() -> tuple[str | None, str]:
    """An interpreter every account may run, of this Python's version (the compiled packages linked
    from this venv need it): this venv's own base interpreter where others can reach it and its
    standard library, else the system's /usr/bin/python3. (None, why not) when there is none."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    base = Path(sys.base_prefix)
    why = []
    for py, stdlib in ((base / "bin" / version, base / "lib" / version), (Path("/usr/bin/python3"), None)):
        if not os.access(py, os.X_OK):
            why.append(f"{py} is missing")
            continue
        if stdlib is None:
            stdlib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
                                         capture_output=True, text=True).stdout.strip() or "/nonexistent")
        got = subprocess.run([str(py), "-c", "import sys; print('python%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.strip()
        closed = unreachable(py, stat.S_IROTH | stat.S_IXOTH) or (unreachable(stdlib) if stdlib.exists() else stdlib)
        if got != version:
            why.append(f"{py} is {got or 'not runnable'}, not {version}")
        elif closed is not None:
            why.append(f"other accounts cannot reach {closed} (for {py})")
        else:
            return str(py), ""
    return None, ("no interpreter other accounts can run the installed deskdex with: " + "; ".join(why))


def _requirement_names(dist: importlib.metadata.Distribution) -> list[str]:
    """The names of what ``dist`` requires, without its extras' requirements. Other markers are not
    evaluated: a dependency one leaves out is either not installed here (skipped) or copied for nothing."""
    names = []
    for req in dist.requires or []:
        if re.search(r"""\bextra\s*==""", req):
            continue
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        if m:
            names.append(m.group(1))
    return names


def _dependencies() -> list[importlib.metadata.Distribution]:
    """Every distribution deskdex needs at run time (its extras left out), as installed in this venv."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = _requirement_names(importlib.metadata.distribution("deskdex"))
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        try:
            seen[name] = dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:  # left out by a marker (another platform, Python)
            continue
        todo.extend(_requirement_names(dist))
    return list(seen.values())


def _link_or_copy(src: Path, dst: Path) -> None:
    """A hard link is instant and shares the file's 0644; a copy where it cannot (another file system,
    or a file others may not read: a link's chmod would change this venv's own file)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.stat().st_mode & stat.S_IROTH:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)
    dst.chmod(dst.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if dst.stat().st_mode & stat.S_IXUSR else 0))


def _pip(*args: str) -> None:
    p = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")


def _build(root: Path, python: str) -> Installed:
    venv, src = root / "venv", root / "src"
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True, timeout=120)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # deskdex from a copy of what its build reads (pyproject's package folders): a build in the
    # checkout would write its build/ (the strict editable tree) and egg-info.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    src.mkdir()
    for name in ("pyproject.toml", project["project"]["readme"]):
        shutil.copy2(ROOT / name, src / name)
    for folder in sorted(set(project["tool"]["setuptools"]["package-dir"].values())):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    _pip("--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps", str(src))
    shutil.rmtree(src)
    for dist in _dependencies():
        for f in dist.files or []:  # its RECORD, bytecode included (the same for every 3.11.x)
            path = Path(str(dist.locate_file(f)))
            if f.parts[0] != ".." and path.is_file():  # not its scripts in bin/
                _link_or_copy(path, site / f)
    # Whatever the umask: every folder open to all, every file pip wrote readable by all (a linked
    # file is readable already, and keeps its mode).
    for d, _, files in os.walk(root):
        os.chmod(d, 0o755)
        for name in files:
            f = Path(d, name)
            if not f.is_symlink() and not f.stat().st_mode & stat.S_IROTH:
                f.chmod(f.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if f.stat().st_mode & stat.S_IXUSR else 0))
    return Installed(root, str(venv / "bin" / "python"), str(venv / "bin" / "deskdex"), site)


def readable_install() -> Installed:
    """deskdex installed, once per session, where every account may read and run it (the module's
    docstring); AssertionError naming why it could not be (the same for every later caller)."""
    global _installed, _install_failed
    if _installed is not None:
        return _installed
    if _install_failed:
        raise AssertionError(_install_failed)
    python, why = readable_python()
    root = Path(tempfile.mkdtemp(prefix="deskdex-readable-", dir="/tmp"))
    try:
        root.chmod(0o755)
        closed = unreachable(root)
        if python is None or closed is not None:
            raise RuntimeError(why or f"other accounts cannot reach {closed}, above the folder made for them")
        _installed = _build(root, python)
    except Exception as exc:
        shutil.rmtree(root, ignore_errors=True)
        _install_failed = f"could not install deskdex where other accounts may read it: {exc}"
        raise AssertionError(_install_failed) from exc
    return _installed


def remove_readable_install() -> None:
    """Remove the session's readable install, if a test made it."""
    global _installed
    if _installed is not None:
        shutil.rmtree(_installed.root, ignore_errors=True)
        _installed = None


def run_as(user: str | None, argv: list[str], lib: Path, home: Path | None,
           timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run argv as ``user`` (its uid, gid and groups) or, with None, as an account outside the accounts."""
    if user is None:
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    else:
        prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(lib), "HOME": str(home or "/"), "NO_COLOR": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([*prefix, *argv], cwd=lib, env=env, capture_output=True, text=True, timeout=timeout)


def clients_or_skip(folder: Path | None = None) -> tuple[str, Path]:
    """What a test runs clients as accounts with: the readable install's interpreter and its
    site-packages (``readable_install``, shared by the session: ``folder`` is no longer used);
    pytest.skip naming what this machine lacks."""
    import pytest

    missing = missing_tools()
    if missing:
        pytest.skip(f"missing {', '.join(missing)} (packages passwd, util-linux, acl)")
    py, why = readable_python()
    if py is None:
        pytest.skip(why)
    installed = readable_install()
    return installed.python, installed.site

