"""Conversion in worker processes, each file under a time and a memory limit.

A worker that runs past its deadline is killed; one that dies (out of memory, a crash in a C
library) is replaced; either way the file gets a recorded error and the run goes on. Workers
are started by a fork server, so they never inherit the indexer's threads or open index.

Fair between accounts (enterprise mode), and between the files of a batch and those that came
later: ``map`` takes its sources as they are ready (one may say "nothing now", and more come when
its ``wake`` is set), and a caller asks ``has_room`` before handing over a file of one account, so
that a file whose account can get a worker never waits behind one whose account cannot. No file is
queued behind one converting for SLOW_FILE seconds, and when every worker holds such a file, one
spare worker (SPARE, beyond ``workers``) may start for an account with nothing in flight; it ends
once idle.

Stopping is not a failure of the file at hand. Workers ignore SIGINT: Ctrl-C reaches the whole
process group, and it is the indexer's to handle (it abandons the conversions under way). A worker
killed by SIGTERM or SIGHUP, which deskdex never sends (it kills with SIGKILL), is taken for the
service or session stopping: the pool waits a moment for its own process to be told the same, and
records a crash only if it is not.
"""

from __future__ import annotations

import gc
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
from typing import Callable, Hashable, Iterable, Iterator

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
    # What the fork server preloaded (converters, trafilatura, the language model: most of this
    # process's objects) is put out of the collector's reach: a collection writes to the header of
    # every object it looks at, which copies each page this worker shares with the fork server and
    # the other workers into its own memory.
    gc.freeze()
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

# Bytes a task queued behind another may carry in itself (a member's, a message's): a larger one would
# fill the pipe, blocking its send while the worker blocks sending its last result back, and both wait.
QUEUED_BYTES = 16 << 10

# Seconds after which a file under conversion counts as slow: no other file is queued behind it,
# and once every worker holds one, a spare may start for an account with nothing in flight.
SLOW_FILE = 1.0
# Workers beyond the pool's size, for those accounts (a bound: the pool never runs more).
SPARE = 1


class Wakeup:
    """Wakes a pool waiting on its workers (``WorkerPool.map``) from another thread, so that its
    caller takes in new work: a non-blocking pipe. Setting it costs a write, and nothing runs
    while it is not set."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        for fd in (self._read, self._write):
            os.set_blocking(fd, False)

    def fileno(self) -> int:
        return self._read

    def set(self) -> None:
        try:
            os.write(self._write, b"!")
        except OSError:
            pass  # the pipe is full: set already

    def clear(self) -> None:
        try:
            while os.read(self._read, 4096):
                pass
        except OSError:
            pass  # empty (EAGAIN)

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)


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
    since: float = 0.0  # when the head task was sent or began (monotonic): slow after SLOW_FILE
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
        self._lane: Callable[[Source], Hashable] = _account  # see map
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

    def _slow(self, w: _Worker, now: float) -> bool:
        return bool(w.tasks) and now - w.since >= SLOW_FILE

    def _plan(self, user: RunAs | None, lane: Hashable) -> tuple[str, _Worker | None] | None:
        """How a file read as ``user``, of ``lane``, gets a worker now, changing nothing yet:
        ("idle", w); ("spawn", an idle worker of another account to end first, or None);
        ("queue", w) behind a file that is not slow; ("spare", None). None: it waits.

        A worker never changes accounts: when the pool is full, an idle worker of another account
        ends to make room for one of this account's. The spare (SPARE beyond the pool's size) is
        only for a lane with nothing in flight, once every worker holds a slow file: a small
        file does not wait for another account's long conversions, and one account's many slow
        files never hold more than the pool's size."""
        now = time.monotonic()
        mine = [w for w in self._workers if w.user == user]
        idle = next((w for w in mine if not w.tasks), None)
        if idle is not None:
            return "idle", idle
        if len(self._workers) < self.size:
            return "spawn", None
        # Queued only behind a file of the same lane that is not slow (yet): a file never waits
        # in a pipe for another lane's conversion.
        room = [w for w in mine if len(w.tasks) < DEPTH and not self._slow(w, now)
                and all(self._lane(t) == lane for t in w.tasks)]
        other = next((w for w in self._workers if not w.tasks), None)  # idle, so another account's
        if other is not None and not room:
            return "spawn", other
        if room:
            return "queue", min(room, key=lambda w: len(w.tasks))
        if (len(self._workers) < self.size + SPARE and all(self._slow(w, now) for w in self._workers)
                and not any(self._lane(t) == lane for w in self._workers for t in w.tasks)):
            return "spare", None
        return None

    def has_room(self, user: RunAs | None, lane: Hashable, spare_only: bool = False) -> bool:
        """Whether a file read as ``user``, of ``lane`` (see ``map``), would get a worker now;
        with ``spare_only``, the spare worker only: the one room a lane with files in flight
        cannot take, hence the one another may have while such a lane waits its turn."""
        plan = self._plan(user, lane)
        return plan is not None and (not spare_only or plan[0] == "spare")

    def _free_worker(self, source: Source) -> _Worker | None:
        """A worker for ``source`` (``_plan``): started or freed here when the plan says so."""
        plan = self._plan(source.run_as, self._lane(source))
        if plan is None:
            return None
        how, w = plan
        if how == "queue" and source.data is not None and len(source.data) > QUEUED_BYTES:
            return None  # waits for the worker's result, then goes to it idle
        if how in ("idle", "queue"):
            return w
        if w is not None:
            self._retire(w)
        if how == "spare":
            logger.debug("every worker holds a slow file: a spare one for %s", source.name)
        return self._spawn(source.run_as)

    def _trim(self) -> None:
        """End idle workers beyond the pool's size (a spare whose file is done)."""
        for w in [w for w in self._workers if not w.tasks][:max(0, len(self._workers) - self.size)]:
            self._retire(w)

    def map(self, sources: Iterable[Source | None], stop: threading.Event | None = None,
            wake: Wakeup | None = None, lane: Callable[[Source], Hashable] | None = None,
            tick: Callable[[], float | None] | None = None) -> Iterator[tuple[Source, list[Outcome]]]:
        """Convert every source; yields (source, outcomes) in completion order. When ``stop`` is set
        the conversions under way are abandoned (their workers killed) and the iteration ends.

        ``sources`` may yield None: nothing for now (its files wait for a worker, see
        ``has_room``, or for changes yet to come); it is asked again after the next result, when
        ``wake`` is set, or when a file turns slow, and the iteration ends once nothing is in
        flight and it said None or ended. ``lane(source)`` names whose turn a file takes (default:
        the account it is read as): a lane with nothing in flight may get the spare worker.
        ``tick`` is called before each wait on the workers, and returns the seconds until it
        wants to be called again, or None."""
        todo = iter(sources)
        backlog: deque[Source] = deque()
        exhausted = False
        limit = self.limits.time_seconds
        self._lane = lane or _account
        if wake is not None:
            wake.clear()  # what set it before is taken in by the first ask
        while True:
            later = False  # ``sources`` said "nothing now"
            while True:  # give every worker up to DEPTH tasks
                if not backlog and not exhausted:
                    nxt = next(todo, _END)
                    if nxt is _END:
                        exhausted = True
                    elif nxt is None:
                        later = True
                    else:
                        assert isinstance(nxt, Source)
                        backlog.append(nxt)
                if not backlog:
                    break
                w = self._free_worker(backlog[0])
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
                    w.since = time.monotonic()
                w.tasks.append(task)
            self._trim()
            busy = [w for w in self._workers if w.tasks]
            if not busy:
                if (exhausted or later) and not backlog:
                    return
                continue
            if stop is not None and stop.is_set():
                for w in busy:
                    self._retire(w)
                return
            now = time.monotonic()
            timeout = max(0.0, min(w.deadline for w in busy) - now)
            if stop is not None:
                timeout = min(timeout, 0.25)  # only while converting: look at ``stop`` now and then
            if later or backlog:
                # Files wait: a worker turning slow may let them queue elsewhere, or start the spare.
                turning = [w.since + SLOW_FILE - now for w in busy if not self._slow(w, now)]
                if turning:
                    timeout = min(timeout, max(0.01, min(turning)))
            if tick is not None and (wanted := tick()) is not None:
                timeout = min(timeout, max(0.0, wanted))
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy]
                         + ([wake.fileno()] if wake is not None else []), timeout)
            if wake is not None and wake.fileno() in ready:
                wake.clear()
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
                        w.since = time.monotonic()
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


_END = object()  # ``map``: the sources ended


def _account(source: Source) -> Hashable:
    """A file's lane by default: the account it is read as."""
    return source.run_as


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
