"""A failed write and what it stops: after a StoreError the catalog and tantivy may be out of step,
so every later write of the collection, and of the parts it hands out (``Collection.retries``),
fails with the same error until ``Collection.recover()`` clears it (index/collection.py)."""

from __future__ import annotations

import functools
from typing import Callable, Concatenate, ParamSpec, Protocol, TypeVar

from deskdex.errors import StoreError

P = ParamSpec("P")
R = TypeVar("R")


class WriteGuard:
    def __init__(self) -> None:
        # The class and message only: a kept exception would keep its traceback's frames, and with
        # them tantivy's writer (and its lock).
        self.failure: tuple[type[StoreError], str] | None = None

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def check(self) -> None:
        """Raise the failure not recovered from, if any."""
        if self.failure is not None:
            kind, message = self.failure
            raise kind(message)

    def fail(self, exc: StoreError) -> None:
        self.failure = (type(exc), str(exc))

    def clear(self) -> None:
        self.failure = None


class Guarded(Protocol):
    guard: WriteGuard


G = TypeVar("G", bound=Guarded)


def writes(method: Callable[Concatenate[G, P], R]) -> Callable[Concatenate[G, P], R]:
    """A write: refused while an earlier failure is not recovered, and failing the guard when it
    fails itself."""

    @functools.wraps(method)
    def write(self: G, /, *args: P.args, **kwargs: P.kwargs) -> R:
        self.guard.check()
        try:
            return method(self, *args, **kwargs)
        except StoreError as exc:
            self.guard.fail(exc)
            raise

    return write
