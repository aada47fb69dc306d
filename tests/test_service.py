"""Service units rendered from packaging/ and checked by the tools that will read them."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from deskdex.clients import service
from deskdex.daemon.power import on_battery

HOME_WITH_SPACE = "/tmp/my home/deskdex"


def verify(path: str, tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path / "rt"))  # --user verify needs one
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
    return subprocess.run(["systemd-analyze", "--user", "verify", path], capture_output=True, text=True,
                          env=env, timeout=60)


@pytest.fixture
def analyze():
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed (packaging/system-deps.sh installs the systemd package)")


def test_systemd_unit_verifies(tmp_path, analyze):
    unit = service.render("systemd", home=HOME_WITH_SPACE, target_dir=str(tmp_path))
    with open(unit.path, "w") as f:
        f.write(unit.text)
    proc = verify(unit.path, tmp_path)
    assert proc.returncode == 0 and "ignoring" not in proc.stderr, proc.stderr
    for line in ("Nice=19", "IOSchedulingClass=idle", "CPUSchedulingPolicy=idle", "Restart=on-failure"):
        assert line in unit.text.splitlines()
    assert f'daemon --home "{HOME_WITH_SPACE}"' in unit.text
    assert service.command()[-1] == "daemon"


def test_systemd_verify_can_fail(tmp_path, analyze):
    unit = service.render("systemd", argv=["/nonexistent/deskdex", "daemon"], target_dir=str(tmp_path))
    with open(unit.path, "w") as f:
        f.write(unit.text)
    assert verify(unit.path, tmp_path).returncode != 0


def test_launchd_plist(tmp_path):
    unit = service.render("launchd", home=HOME_WITH_SPACE, argv=None, target_dir=str(tmp_path))
    plist = plistlib.loads(unit.text.encode())
    assert plist["Label"] == "org.deskdex.daemon"
    assert plist["ProgramArguments"][-3:] == ["daemon", "--home", HOME_WITH_SPACE]
    assert plist["Nice"] == 19 and plist["LowPriorityIO"] and plist["ProcessType"] == "Background"
    assert plist["KeepAlive"] == {"SuccessfulExit": False}


def test_windows_task(tmp_path):
    unit = service.render("task", home=HOME_WITH_SPACE, argv=[r"C:\Py 3\deskdex.exe", "daemon", "--home", HOME_WITH_SPACE])
    root = ET.fromstring(unit.text.replace('encoding="UTF-16"', ""))
    ns = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}
    assert root.find("t:Actions/t:Exec/t:Command", ns).text == r"C:\Py 3\deskdex.exe"
    assert root.find("t:Actions/t:Exec/t:Arguments", ns).text == f'daemon --home "{HOME_WITH_SPACE}"'
    assert root.find("t:Settings/t:Priority", ns).text == "10"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the systemd code path runs on Linux")
def test_install_writes_a_private_unit_and_says_when_systemd_is_unreachable(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    reachable = shutil.which("systemctl") and subprocess.run(
        ["systemctl", "--user", "is-system-running"], capture_output=True).returncode in (0, 1) and \
        subprocess.run(["systemctl", "--user", "show-environment"], capture_output=True).returncode == 0
    if reachable:
        pytest.skip("a user systemd manager runs here: test_real_systemd covers it")
    with pytest.raises(service.ServiceError, match="systemctl"):
        service.install(home=str(tmp_path / "home"))
    path = tmp_path / "cfg" / "systemd" / "user" / "deskdex.service"
    assert oct(path.stat().st_mode & 0o777) == "0o600" and "ExecStart=" in path.read_text()
    assert service.status()["installed"] is True
    service.uninstall()
    assert not path.exists() and service.status()["installed"] is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="systemd is Linux")
def test_real_systemd_starts_the_daemon(tmp_path):
    probe = subprocess.run(["systemctl", "--user", "show-environment"], capture_output=True, text=True) \
        if shutil.which("systemctl") else None
    if probe is None or probe.returncode:
        reason = probe.stderr.strip() if probe is not None else "systemctl not installed"
        pytest.skip(f"no user systemd manager reachable ({reason})")
    home = tmp_path / "home"
    try:
        service.install(home=str(home))
        deadline = time.monotonic() + 20
        while service.status()["state"] != "active" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert service.status()["state"] == "active"
    finally:
        service.uninstall()


def _supply(root, name: str, **files: str) -> None:
    d = root / name
    d.mkdir(parents=True)
    for k, v in files.items():
        (d / k).write_text(v + "\n")


def test_on_battery_reads_sysfs(tmp_path):
    # A sysfs tree laid out as the kernel does (this machine has no battery to unplug).
    laptop = tmp_path / "laptop"
    _supply(laptop, "AC", type="Mains", online="0")
    _supply(laptop, "BAT0", type="Battery", status="Discharging")
    _supply(laptop, "hidpp_battery_0", type="Battery", scope="Device", status="Discharging")
    assert on_battery(str(laptop)) is True
    (laptop / "AC" / "online").write_text("1\n")
    assert on_battery(str(laptop)) is False
    desk = tmp_path / "desk"
    _supply(desk, "hidpp_battery_0", type="Battery", scope="Device", status="Discharging")
    assert on_battery(str(desk)) is False
    assert on_battery(str(tmp_path / "none")) is False
    assert isinstance(on_battery(), bool)
