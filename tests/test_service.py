"""Service units rendered from packaging/ and checked by the tools that will read them."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from deskdex.clients import service
from deskdex.daemon.power import on_battery

from .conftest import DESKDEX

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


def no_user_manager(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment where ``systemctl --user`` reaches no manager, as in a container or over ssh:
    no session bus address and an empty runtime folder. A real systemctl then fails to connect; on
    a desktop this keeps the test away from the real manager and the real ~/.config."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    return dict(os.environ)


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the systemd code path runs on Linux")


@linux_only
def test_install_and_start_fails_clearly_without_a_user_manager(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    no_user_manager(tmp_path, monkeypatch)
    with pytest.raises(service.ServiceError, match=r"cannot start it: .*systemctl --user enable --now deskdex\.service"):
        service.install(home=str(tmp_path / "home"))
    path = tmp_path / "cfg" / "systemd" / "user" / "deskdex.service"
    assert oct(path.stat().st_mode & 0o777) == "0o600" and "ExecStart=" in path.read_text()
    assert service.status()["installed"] is True
    service.uninstall()
    assert not path.exists() and service.status()["installed"] is False


@linux_only
def test_service_install_no_start_succeeds_without_a_user_manager(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The command as users run it: the console script, in a session without a user manager.
    env = dict(no_user_manager(tmp_path, monkeypatch), NO_COLOR="1")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([DESKDEX, "service", *args], capture_output=True, text=True, env=env, timeout=60)

    path = tmp_path / "cfg" / "systemd" / "user" / "deskdex.service"
    proc = run("install", "--no-start", "--home", str(tmp_path / "home"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"installed systemd service: {path}"
    # It says why it is not enabled and how to enable it, and does not call that an error.
    assert "not enabled yet" in proc.stderr, proc.stderr
    assert "systemctl is not installed" in proc.stderr or "no user systemd manager is reachable" in proc.stderr
    assert "systemctl --user daemon-reload && systemctl --user enable --now deskdex.service" in proc.stderr
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert f"daemon --home {tmp_path / 'home'}" in path.read_text().replace('"', "")
    if shutil.which("systemd-analyze"):
        check = verify(str(path), tmp_path)
        assert check.returncode == 0 and "ignoring" not in check.stderr, check.stderr
    status = json.loads(run("status", "--json").stdout)
    assert status["installed"] is True and status["state"].startswith("unknown"), status
    proc = run("uninstall")
    assert proc.returncode == 0 and not path.exists(), proc.stderr


@linux_only
def test_real_systemd_no_start_enables_without_starting(tmp_path: Path) -> None:
    # Needs a user manager, which containers and CI machines lack: skipped there, saying why.
    if (why := service.systemd_unreachable()) is not None:
        pytest.skip(why)
    try:
        service.install(home=str(tmp_path / "home"), start=False)
        enabled = subprocess.run(["systemctl", "--user", "is-enabled", "deskdex.service"], capture_output=True, text=True)
        assert enabled.stdout.strip() == "enabled", enabled
        assert service.status()["state"] != "active"
    finally:
        service.uninstall()


@linux_only
def test_real_systemd_starts_the_daemon(tmp_path):
    if (why := service.systemd_unreachable()) is not None:
        pytest.skip(why)
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


def test_system_scope_stages_every_file_readable_by_all(tmp_path):
    """`service install --system --root DIR` (a package's staging folder): the system daemon's unit,
    which systemd-analyze verifies where installed, and the search box for every user under
    PREFIX/share, files 0644 in folders 0755 (read by every session bus and shell); `status` lists
    them and `uninstall` removes them all. Staged, nothing is registered (no systemctl runs)."""
    root = tmp_path / "stage"
    args = ["--system", "--root", str(root), "--prefix", "/usr"]
    p = subprocess.run([DESKDEX, "service", "install", *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    unit = root / "etc" / "systemd" / "system" / "deskdex.service"
    share = root / "usr" / "share"
    files = {unit, share / "dbus-1" / "services" / "org.deskdex.SearchProvider.service",
             share / "gnome-shell" / "search-providers" / "deskdex-search-provider.ini",
             share / "applications" / "deskdex-tray.desktop", share / "krunner" / "dbusplugins" / "deskdex-krunner.desktop"}
    assert {p for p in root.rglob("*") if p.is_file()} == files
    assert all(f.stat().st_mode & 0o777 == 0o644 for f in files)
    assert all(d.stat().st_mode & 0o777 == 0o755 for d in root.rglob("*") if d.is_dir())
    text = unit.read_text()
    assert f"ExecStart={DESKDEX} daemon --system" in text.splitlines() and "WantedBy=multi-user.target" in text
    assert "--home" not in (share / "dbus-1" / "services" / "org.deskdex.SearchProvider.service").read_text()
    if shutil.which("systemd-analyze"):
        verified = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
        assert verified.returncode == 0 and "ignoring" not in verified.stderr, verified.stderr
    if shutil.which("desktop-file-validate"):
        desktop = [str(f) for f in files if f.suffix == ".desktop"]
        checked = subprocess.run(["desktop-file-validate", *desktop], capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0 and not checked.stdout.strip(), checked.stdout
    listed = json.loads(subprocess.run([DESKDEX, "service", "status", "--json", *args], capture_output=True,
                                       text=True, check=True, timeout=60).stdout)
    assert listed == {str(f): True for f in files}
    subprocess.run([DESKDEX, "service", "uninstall", *args], check=True, capture_output=True, timeout=60)
    assert not [p for p in root.rglob("*") if p.is_file()]
    # --system alone decides where: a --home or a --root without it is refused in one line
    for wrong in (["--system", "--home", str(tmp_path)], ["--root", str(root)]):
        p = subprocess.run([DESKDEX, "service", "install", "--no-start", *wrong], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
