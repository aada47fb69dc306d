"""Whether the Qt binding installed can run the tray for longer than a few searches.

PySide6-Essentials 6.12.0 loses a reference to None each time it hands Python a None (every call that
returns nothing, a data role never set, ``QStyleOptionViewItem.widget`` where it is None) and one to
True at each signal emitted. On Python 3.12 and later None and True are immortal and nothing comes of
it; on 3.11 the interpreter aborts once a count reaches zero (``Fatal Python error: none_dealloc``),
in the tray after 10 to 20 searches. Our code cannot avoid calls that return nothing, so the tray
checks the binding first and, on such a one, refuses to start with what to install instead of
crashing in the user's hands (tests/test_tray_endurance.py types 200 searches to find such a release)."""

from __future__ import annotations

import sys
from typing import Callable

PROBES = 20  # calls of each kind: a binding that loses one reference per call loses them all

# References given back for those the probe lost: True has only a thousand or so, and a count that
# ends short would abort the interpreter as it tears itself down at exit.
_repaid: list[object] = []


def lost_references(call: Callable[[], object], watched: object, times: int = PROBES) -> int:
    """How many references to ``watched`` ``times`` calls of ``call`` lose (negative: gain). Those
    lost are given back (held here for good), so measuring a binding that loses them costs nothing."""
    before = sys.getrefcount(watched)
    for _ in range(times):
        call()
    lost = before - sys.getrefcount(watched)
    _repaid.extend([watched] * max(lost, 0))
    return lost


def binding_problem() -> str | None:
    """None if the installed PySide6 keeps its references to None and True; else why the tray cannot
    run on it and what to install. Costs a few hundred microseconds; run it before any thread starts,
    which could move the counts meanwhile."""
    import PySide6
    from PySide6.QtCore import QObject, Signal

    class Probe(QObject):
        ping = Signal()

    probe = Probe()
    lost = lost_references(lambda: probe.setObjectName("probe"), None)  # returns nothing
    lost += lost_references(probe.ping.emit, True)
    if lost < PROBES:  # one per call of either kind; a good binding loses none
        return None
    version = PySide6.__version__
    return (f"PySide6 {version} loses a reference to None or True at each call on Python "
            f"{sys.version_info.major}.{sys.version_info.minor} ({lost} in {2 * PROBES} calls): the tray "
            f"would abort after a few searches (Fatal Python error: none_dealloc). Install another "
            f"release (6.11.3 works): pip install 'PySide6-Essentials!={version}', or run deskdex on "
            f"Python 3.12 or newer.")
