"""The files of a pass waiting for their conversion, taken in turns by lane.

A lane is whose turn a file takes: in enterprise mode the account it is read as, so that one
account's many (or slow) files never hold up another's; on a desktop, the changes taken in
during a pass, each a lane of its own, so that a file saved meanwhile does not wait behind the
rest of a long batch. Within a lane, and between lanes, the cheapest files go first (``cost``:
OCR last); among lanes whose next file costs the same, the one whose turn came longest ago.

A lane is skipped while the converter pool has no room for it (``pop``'s ``room``), and the
next one takes its turn; a lane refused for STARVE seconds is given the next room before any
other, so that lanes which keep a worker busy cannot keep it from one that waits. Meanwhile the
others get only room a starving lane could not take (the pool's spare worker, for a lane with
nothing in flight): an account whose own slow files fill the pool starves, and must not keep
another account's small file waiting for them."""

from __future__ import annotations

import heapq
import itertools
import time
from typing import Callable, Hashable

from .scan import FileInfo

# Seconds a lane may be refused a worker before the others wait for it.
STARVE = 2.0

# Whether the pool would take a file of a lane now; with spare_only (another lane starves), only
# room that lane could not take.
Room = Callable[[Hashable, bool], bool]


class FairQueue:
    def __init__(self, cost: Callable[[FileInfo], int]) -> None:
        self._cost = cost
        self._lanes: dict[Hashable, list[tuple[int, int, FileInfo]]] = {}  # lane -> heap of (cost, order, file)
        self._turns: list[Hashable] = []  # lanes with files, the one whose turn came longest ago first
        self._refused: dict[Hashable, float] = {}  # lane -> since when it waits for room (monotonic)
        self._order = itertools.count()

    def __len__(self) -> int:
        return sum(len(heap) for heap in self._lanes.values())

    @property
    def lanes(self) -> int:
        return len(self._lanes)

    def push(self, info: FileInfo, lane: Hashable) -> None:
        heap = self._lanes.get(lane)
        if heap is None:
            heap = self._lanes[lane] = []
            self._turns.append(lane)
        heapq.heappush(heap, (self._cost(info), next(self._order), info))

    def pop(self, room: Room = lambda lane, spare_only: True) -> tuple[FileInfo, Hashable] | None:
        """The next file, and its lane, of a lane ``room`` says has room now; None when there is
        none (empty, or every lane with files must wait). ``room(lane, spare_only)``: with
        spare_only, only room that no lane with files in flight could take (the spare)."""
        now = time.monotonic()
        starving = {lane for lane, since in self._refused.items() if now - since >= STARVE}
        # Stable: lanes whose next file costs the same keep their turns' order.
        order = sorted(range(len(self._turns)), key=lambda i: self._lanes[self._turns[i]][0][0])
        # The starving lanes first, with any room; then, if they must wait still, the others with
        # the room the starving cannot take.
        for i in [i for i in order if self._turns[i] in starving] + [i for i in order if self._turns[i] not in starving]:
            lane = self._turns[i]
            if not room(lane, bool(starving) and lane not in starving):
                self._refused.setdefault(lane, now)
                continue
            self._refused.pop(lane, None)
            heap = self._lanes[lane]
            info = heapq.heappop(heap)[2]
            del self._turns[i]
            if heap:
                self._turns.append(lane)  # its next file after every other lane's
            else:
                del self._lanes[lane]
            return info, lane
        return None

    def next_turn(self) -> float | None:
        """Seconds until a lane refused room starves (the pool asks again then), or None."""
        now = time.monotonic()
        waits = [since + STARVE - now for since in self._refused.values() if since + STARVE > now]
        return min(waits) if waits else None
