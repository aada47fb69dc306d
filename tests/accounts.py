"""Real Unix accounts for the enterprise-mode tests: made with useradd, removed (with their homes)
at the end, and clients run as each of them with setpriv.

The project's interpreter may sit where other users cannot run it (a pyenv under /root), so the
clients run under the system's /usr/bin/python3 with a copy of the installed packages the command
line imports (deskdex, platformdirs, tomli_w and those the parser's crawl commands load) in a folder
everyone may read (``client_env``)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import uuid
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


def client_env(open_dir: Path) -> tuple[str, Path]:
    """An interpreter any user can run, and a readable copy of every package the CLI imports."""
    # Which packages: those a fresh interpreter has loaded after building the CLI's parser (which
    # imports the crawler's commands, and with them httpx, lxml, tantivy) and its client.
    # platformdirs is imported only where the home is looked up (core/paths.py), so name it.
    probe = ("import sys, deskdex.clients.cli, platformdirs; deskdex.clients.cli.build_parser(); "
             "print('\\n'.join(f'{k}={getattr(m, \"__file__\", None) or \"\"}' for k, m in list(sys.modules.items()) "
             "if '.' not in k and k not in sys.stdlib_module_names))")
    listed = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lib = open_dir / "lib"
    lib.mkdir()
    for name, path in (line.split("=", 1) for line in listed.splitlines()):
        if not path or name.startswith(("__", "_distutils_hack")):
            continue
        src = Path(path).parent if Path(path).name == "__init__.py" else Path(path)
        for item in (src, src.parent / f"{name}.libs"):  # .libs: shared libraries a wheel bundles
            if item.is_dir():
                shutil.copytree(item, lib / item.name, copy_function=link_or_copy,
                                ignore=shutil.ignore_patterns("__pycache__"))
            elif item.exists():
                link_or_copy(str(item), str(lib / item.name))
    for d, _, _ in os.walk(lib):
        os.chmod(d, 0o755)
    return "/usr/bin/python3", lib


def link_or_copy(src: str, dst: str) -> None:
    """A hard link is instant and readable wherever the original is 0644, whatever its folders."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    os.chmod(dst, os.stat(dst).st_mode | 0o444)


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


def client_python() -> tuple[str | None, str]:
    """/usr/bin/python3 when it is this Python's version (the copied compiled packages need that),
    else (None, why not)."""
    py = "/usr/bin/python3"
    version = subprocess.run([py, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                             text=True).stdout.strip() if os.access(py, os.X_OK) else "missing"
    if version != str(sys.version_info[:2]):
        return None, (f"{py} is {version}, not Python {sys.version_info[:2]}: no interpreter other users can run "
                      "the client with (this one's compiled packages need the same version)")
    return py, ""


def clients_or_skip(folder: Path) -> tuple[str, Path]:
    """What a test runs clients as accounts with: an interpreter and a readable copy of the
    packages in ``folder`` (``client_env``); pytest.skip naming what this machine lacks."""
    import pytest

    missing = missing_tools()
    if missing:
        pytest.skip(f"missing {', '.join(missing)} (packages passwd, util-linux, acl)")
    py, why = client_python()
    if py is None:
        pytest.skip(why)
    return py, client_env(folder)[1]

