"""The install other accounts run deskdex from (tests/accounts.readable_install) works for an account
that can read nothing of root's: neither the checkout (a clone in a 0700 folder) nor this venv."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .accounts import IS_ROOT, readable_install, unreachable

pytestmark = [pytest.mark.slow,  # builds deskdex's wheel once for the session
              pytest.mark.skipif(not IS_ROOT, reason="needs root: runs the install as nobody with setpriv")]

# What runs as an account: the client, and a converter process's preloads after its drop.
PROBE = ("import deskdex, deskdex.protocol, deskdex.clients.cli, deskdex.converters.privilege as p; "
         "missing = [m for m in p.preload() if not m.startswith('encodings.')]; "
         "print(deskdex.__file__); print(missing)")


def test_nobody_runs_the_client_and_the_converters_preloads_from_it(open_dir: Path) -> None:
    installed = readable_install()
    assert readable_install() is installed  # built once for the session
    for path in (Path(installed.python), Path(installed.deskdex), installed.site / "deskdex" / "protocol.py"):
        assert unreachable(path) is None, path
    env = {"PATH": "/usr/bin:/bin", "HOME": "/", "PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1"}
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    p = subprocess.run([*nobody, installed.python, "-c", PROBE], cwd="/", env=env, capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0, p.stderr
    where, missing = p.stdout.splitlines()
    assert os.path.realpath(where).startswith(str(installed.site) + "/"), where  # not the checkout
    assert missing == "[]", missing
    home = open_dir / "home"
    home.mkdir(mode=0o777)
    home.chmod(0o777)  # whatever the umask: nobody keeps its deskdex state there
    p = subprocess.run([*nobody, installed.deskdex, "--home", str(home), "formats", "--json"], cwd="/", env=env,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    assert {"pdf", "docx"} <= {e for f in json.loads(p.stdout)["formats"] for e in f["extensions"]}
