"""The check `deskdex tray` makes of the Qt binding before it starts (clients/tray/binding.py): a
binding that loses references to None or True aborts the interpreter after a few searches, and is
named with what to install instead. Fast: the long proof is tests/test_tray_endurance.py."""

from __future__ import annotations

import ctypes
import sys

from deskdex.clients.tray.binding import PROBES, lost_references

from .test_tray import need_qt


def test_the_installed_binding_keeps_its_references() -> None:
    """Fails on PySide6-Essentials 6.12.0 under Python 3.11, in a second rather than by an abort
    after 20 searches."""
    need_qt()
    from deskdex.clients.tray.binding import binding_problem

    none, true = sys.getrefcount(None), sys.getrefcount(True)
    problem = binding_problem()
    assert problem is None, problem
    # what the check itself lost it gave back: the counts are where they were, give or take
    assert sys.getrefcount(None) >= none - 2 and sys.getrefcount(True) >= true - 2


def test_references_lost_are_counted_and_given_back() -> None:
    """A call that really loses a reference per call (CPython's own Py_DecRef, as a binding with the
    bug does), on an object of its own that holds spare references for it to lose."""
    py_incref, py_decref = ctypes.pythonapi.Py_IncRef, ctypes.pythonapi.Py_DecRef
    py_incref.argtypes = py_decref.argtypes = [ctypes.py_object]
    py_incref.restype = py_decref.restype = None
    thing = object()
    for _ in range(PROBES):
        py_incref(thing)  # spares: without them the calls below would free it
    held = sys.getrefcount(thing)
    assert lost_references(lambda: py_decref(thing), thing) == PROBES
    assert sys.getrefcount(thing) == held  # given back: held by the module from now on
    assert lost_references(lambda: py_incref(thing), thing, 5) == -5  # a gain is no loss, and kept
    assert sys.getrefcount(thing) == held + 5
