"""Whether the machine runs on battery, so indexing can pause. False whenever it cannot tell:
a desktop, a VM, a container, or a platform without a known way to ask."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

logger = logging.getLogger(__name__)

SYSFS = "/sys/class/power_supply"


def on_battery(sysfs: str = SYSFS) -> bool:
    try:
        if sys.platform.startswith("linux"):
            return _linux(sysfs)
        if sys.platform == "darwin":
            return _macos()
        if sys.platform == "win32":
            return _windows()
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        logger.debug("cannot tell the power source: %s", exc)
    return False


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _linux(sysfs: str) -> bool:
    """On battery: no mains/USB supply online, and a system battery (not a mouse's) discharging."""
    if not os.path.isdir(sysfs):
        return False
    discharging = False
    for name in os.listdir(sysfs):
        d = os.path.join(sysfs, name)
        kind = _read(os.path.join(d, "type"))
        if kind == "Battery":
            if _read(os.path.join(d, "scope")) == "Device":
                continue  # a wireless peripheral's battery says nothing about ours
            discharging |= _read(os.path.join(d, "status")) == "Discharging"
        elif _read(os.path.join(d, "online")) == "1":
            return False  # Mains, USB, USB_C ...: plugged in
    return discharging


def _macos() -> bool:
    out = subprocess.run(["pmset", "-g", "batt"], capture_output=True, text=True, timeout=5).stdout
    return "'Battery Power'" in out


def _windows() -> bool:
    import ctypes

    class Status(ctypes.Structure):
        _fields_ = [("ACLineStatus", ctypes.c_byte), ("BatteryFlag", ctypes.c_byte),
                    ("BatteryLifePercent", ctypes.c_byte), ("SystemStatusFlag", ctypes.c_byte),
                    ("BatteryLifeTime", ctypes.c_ulong), ("BatteryFullLifeTime", ctypes.c_ulong)]

    status = Status()
    if not ctypes.windll.kernel32.GetSystemPowerStatus(ctypes.byref(status)):  # type: ignore[attr-defined]
        return False
    return int(status.ACLineStatus) == 0  # 0 offline, 1 online, 255 unknown (a field reads as Any)
