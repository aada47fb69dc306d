"""Conversion in worker processes, each file under a time and a memory limit.

A worker that runs past its deadline is killed; one that dies (out of memory, a crash in a C
library) is replaced; either way the file gets a recorded error and the run goes on. Workers
are started by a fork server, so they never inherit the indexer's threads or open index.

Stopping is not a failure of the file at hand. Workers ignore SIGINT: Ctrl-C reaches the whole
process group, and it is the indexer's to handle (it abandons the conversions under way). A worker
killed by SIGTERM or SIGHUP, which deskdex never sends (it kills with SIGKILL), is taken for the
service or session stopping: the pool waits a moment for its own process to be told the same, and
records a crash only if it is not.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from multiprocessing import forkserver
from multiprocessing.connection import Connection, wait
from typing import Iterable, Iterator

from deskdex.errors import ConverterCrashed, MemoryLimit, TimeLimit

from . import privilege
from .convert import Outcome, convert
from .limits import Limits
from .privilege import RunAs
from .source import Source

logger = logging.getLogger(__name__)

_CTX = mp.get_context("forkserver")
# The fork server imports what every worker needs (preloaded.py, and the pool's ``enrich`` hook:
# see WorkerPool._spawn) before it forks any: a worker forked from it converts at once, and shares
# those pages with the other workers.
PRELOAD = ["__main__", "deskdex.converters.preloaded"]
_POOLS: "weakref.WeakSet[WorkerPool]" = weakref.WeakSet()


def _fork_server() -> object:
    # multiprocessing's own fork server: private, so read with getattr (None on another Python).
    return getattr(forkserver, "_forkserver", None)


def fork_server_idle() -> bool:
    """A fork server runs and no pool has a worker: ``release_fork_server`` would end it."""
    running = getattr(_fork_server(), "_forkserver_pid", None) is not None
    return running and not any(pool._workers for pool in _POOLS)


def release_fork_server() -> bool:
    """End the fork server when no pool has a worker, so an idle daemon holds none of what it
    preloaded (50 MiB); the next worker starts it again. A worker's exit status comes through
    the fork server, so it must outlive every worker. multiprocessing has no public call for
    this: without its private one (another Python), the fork server simply stays. True when it
    was ended."""
    if not fork_server_idle():
        return False
    stop = getattr(_fork_server(), "_stop", None)
    if stop is None:
        return False
    stop()
    return True


def lower_priority() -> None:
    """Idle CPU and I/O priority for this process, where the OS has them."""
    try:
        os.nice(19 - os.nice(0))
    except OSError:
        pass
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass
    _ioprio_idle()


def _ioprio_idle() -> None:
    # ioprio_set(IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE << 13); syscall 251 on x86_64, 30 on arm64.
    import ctypes
    import platform

    nr = {"x86_64": 251, "aarch64": 30}.get(platform.machine())
    if nr is None:
        return
    try:
        ctypes.CDLL(None, use_errno=True).syscall(nr, 1, 0, 3 << 13)
    except (OSError, AttributeError):
        pass


def _worker_main(conn: Connection, limits: Limits, idle: bool, overrides: dict[str, str] | None,
                 enrich: str | None, user: RunAs | None = None) -> None:
    import importlib
    import resource

    from .registry import Registry

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the indexer's to handle, see above
    if idle:
        lower_priority()
    registry = Registry(overrides=overrides)
    hook = None
    if enrich:
        module, _, func = enrich.partition(":")
        hook = getattr(importlib.import_module(module), func)
    heap = _HeapWatch()  # opened with this process's rights: /proc/self may be closed to it after a drop
    if user is not None:
        # Before the memory limit: preloading every converter is this process's largest moment.
        registry.load_all()
        privilege.preload()
        privilege.drop_to(user)
    if limits.memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    heap.start = heap.heap_bytes()
    conn.send(READY)
    while True:
        try:
            source = conn.recv()
        except (EOFError, OSError):
            return
        if source is None:
            return
        try:
            outcomes = convert(source, registry, limits)
            if hook is not None:
                hook(outcomes)  # work done here runs in parallel, not in the one writer
            # A long text leaves the heap grown (freed memory stays with the process): a fresh
            # worker, forked in tens of milliseconds, takes over rather than hold it for good.
            grown = heap.grown()
            conn.send((outcomes, grown))
            if grown:
                return
        except MemoryError:
            # Say this process is done: a fresh one replaces it, with no heap left fragmented.
            conn.send(([Outcome(source.uri, reason=MemoryLimit.reason,
                                message=f"over the memory limit of {limits.memory_bytes // 2**20} MiB")], True))
            return


# Heap growth past which a worker hands over to a fresh one after its file (see _worker_main).
RECYCLE_GROWTH = 32 * 2**20


class _HeapWatch:
    """Whether the heap grew RECYCLE_GROWTH past where it started: resident memory that is not a
    mapped file (/proc/self/statm: resident less shared pages). The file stays open and is read
    with pread, 1 us a read where opening it each time took 15 (a tenth of a small note's
    conversion went to it). Never grown where there is no /proc."""

    def __init__(self) -> None:
        try:
            self._fd: int | None = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = None
        self._page = os.sysconf("SC_PAGE_SIZE")
        self.start = 0  # taken once the worker has loaded what it needs (_worker_main)

    def heap_bytes(self) -> int:
        if self._fd is None:
            return 0
        try:
            fields = os.pread(self._fd, 256, 0).split()
            return (int(fields[1]) - int(fields[2])) * self._page
        except (OSError, ValueError, IndexError):
            return 0

    def grown(self) -> bool:
        return self.heap_bytes() > self.start + RECYCLE_GROWTH


# What a worker sends once it can convert: a file's time limit starts then, not while a new
# worker starts up (imports, preloading), which a busy machine can stretch to seconds.
READY = "ready"
# How long a worker may take to start before the file sent to it is given up as timed out.
STARTUP_LIMIT = 120.0

# Files queued per worker: the next one waits in the pipe while this one converts, so a worker
# never idles while the writer stores the last result.
DEPTH = 2

# Signals that stop a whole service or session (systemctl stop signals every process of the unit;
# a closed terminal, its session), never sent by deskdex to a worker; and how long a pool waits
# for its own process to be told to stop too, after a worker died of one.
STOPPING_SIGNALS = frozenset({signal.SIGTERM, signal.SIGHUP, signal.SIGINT})
STOP_GRACE = 2.0


@dataclass
class _Worker:
    process: mp.process.BaseProcess
    conn: Connection
    tasks: deque[Source] = field(default_factory=deque)  # sent, oldest (converting) first
    deadline: float = 0.0  # for the head task
    started: float = field(default_factory=time.monotonic)
    ready: bool = False  # it has said READY: the head task's deadline runs
    user: RunAs | None = None  # whose rights it converts with (enterprise mode); None: the daemon's own


class WorkerPool:
    def __init__(self, workers: int = 2, limits: Limits = Limits(), idle: bool = True,
                 overrides: dict[str, str] | None = None, enrich: str | None = None) -> None:
        self.size = max(1, workers)
        self.enrich = enrich  # "module:function" called in the worker on each file's outcomes
        self.limits = limits
        self.idle = idle
        self.overrides = overrides  # MIME type -> "module:function", merged over the built-in table
        self._workers: list[_Worker] = []
        _POOLS.add(self)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pids(self) -> list[int]:
        """The worker processes running now (their CPU time is counted in ``deskdex status``)."""
        return [w.process.pid for w in self._workers if w.process.pid is not None]

    def _spawn(self, user: RunAs | None) -> _Worker:
        # Read when a fork server starts (none runs yet, or it was released): it preloads this
        # pool's hook too, a module the caller names, as converters import nothing above them.
        _CTX.set_forkserver_preload(PRELOAD + ([self.enrich.partition(":")[0]] if self.enrich else []))
        parent, child = _CTX.Pipe()
        p = _CTX.Process(target=_worker_main, args=(child, self.limits, self.idle, self.overrides, self.enrich, user),
                         daemon=True, name="deskdex-convert")
        p.start()
        child.close()
        w = _Worker(p, parent, user=user)
        self._workers.append(w)
        return w

    def _retire(self, w: _Worker) -> None:
        if w.process.is_alive():
            w.process.kill()
        w.process.join(5)
        w.conn.close()
        self._workers.remove(w)

    def close(self) -> None:
        """End the workers: idle ones are asked to exit; busy ones are killed at once, since no
        one waits for what they convert (a stop, an error)."""
        for w in list(self._workers):
            if w.tasks:
                self._retire(w)
                continue
            try:
                w.conn.send(None)
            except OSError:
                pass
        for w in list(self._workers):
            w.process.join(2)
            self._retire(w)

    def _free_worker(self, user: RunAs | None) -> _Worker | None:
        """A worker of ``user``'s with room for one more task: an idle one, a new one, or the least
        loaded. A worker never changes accounts: when the pool is full, an idle worker of another
        account ends to make room for one of this account's."""
        mine = [w for w in self._workers if w.user == user]
        idle = [w for w in mine if not w.tasks]
        if idle:
            return idle[0]
        if len(self._workers) >= self.size:
            other = next((w for w in self._workers if w.user != user and not w.tasks), None)
            if other is not None and not mine:
                self._retire(other)
        if len(self._workers) < self.size:
            return self._spawn(user)
        room = [w for w in mine if len(w.tasks) < DEPTH]
        return min(room, key=lambda w: len(w.tasks)) if room else None

    def map(self, sources: Iterable[Source], stop: threading.Event | None = None
            ) -> Iterator[tuple[Source, list[Outcome]]]:
        """Convert every source; yields (source, outcomes) in completion order. When ``stop`` is set
        the conversions under way are abandoned (their workers killed) and the iteration ends."""
        todo = iter(sources)
        backlog: deque[Source] = deque()
        exhausted = False
        limit = self.limits.time_seconds
        while True:
            while True:  # give every worker up to DEPTH tasks
                if not backlog and not exhausted:
                    nxt = next(todo, None)
                    if nxt is None:
                        exhausted = True
                    else:
                        backlog.append(nxt)
                if not backlog:
                    break
                w = self._free_worker(backlog[0].run_as)
                if w is None:
                    break
                task = backlog.popleft()
                try:
                    w.conn.send(task)
                except OSError:
                    backlog.appendleft(task)
                    self._requeue(w, backlog)
                    continue
                if not w.tasks:
                    w.deadline = time.monotonic() + (limit if w.ready else STARTUP_LIMIT + limit)
                w.tasks.append(task)
            busy = [w for w in self._workers if w.tasks]
            if not busy:
                if exhausted and not backlog:
                    return
                continue
            if stop is not None and stop.is_set():
                for w in busy:
                    self._retire(w)
                return
            timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            if stop is not None:
                timeout = min(timeout, 0.25)  # only while converting: look at ``stop`` now and then
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout)
            for w in busy:
                head = w.tasks[0]
                outcomes = None
                if w.conn in ready:
                    try:
                        received = w.conn.recv()
                    except (EOFError, OSError):
                        received = None  # it died: below
                    if received == READY:
                        w.ready = True
                        w.deadline = time.monotonic() + limit
                        continue
                    if received is not None:
                        outcomes, exiting = received
                    if outcomes is not None:
                        w.tasks.popleft()
                        w.deadline = time.monotonic() + limit  # the next queued file starts now
                        if exiting:
                            self._requeue(w, backlog)
                        yield head, outcomes
                        continue
                if w.conn in ready or w.process.sentinel in ready:
                    if self._stopped_with(w, stop):
                        for other in [x for x in self._workers if x.tasks]:
                            self._retire(other)
                        return
                    message = _death(w)
                    w.tasks.popleft()
                    self._requeue(w, backlog)
                    yield head, [Outcome(head.uri, reason=ConverterCrashed.reason, message=message)]
                elif time.monotonic() >= w.deadline:
                    w.tasks.popleft()
                    self._requeue(w, backlog)
                    yield head, [Outcome(head.uri, reason=TimeLimit.reason,
                                         message=f"conversion took over {limit:g} s")]

    def _stopped_with(self, w: _Worker, stop: threading.Event | None) -> bool:
        """Whether worker ``w``, found dead, went down with a stop of this process (see the module's
        docstring): True once ``stop`` is set. Without a ``stop`` event (``deskdex index``), this
        process's own signal handler raises here while it waits."""
        w.process.join(1)
        code = w.process.exitcode
        if code is None or -code not in STOPPING_SIGNALS:
            return stop is not None and stop.is_set()
        if stop is None:
            time.sleep(STOP_GRACE)
            return False
        return stop.wait(STOP_GRACE)

    def _requeue(self, w: _Worker, backlog: deque[Source]) -> None:
        """Retire a worker; the files queued behind the one it failed on go to the others."""
        for task in reversed(w.tasks):
            backlog.appendleft(task)
        w.tasks.clear()
        self._retire(w)


def _death(w: _Worker) -> str:
    w.process.join(1)
    code = w.process.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"converter process died of {name} (memory limit or crash)"
    return f"converter process exited with code {code}"
