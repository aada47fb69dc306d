"""Measure a process tree: wall time, CPU (user+sys of the whole tree, orphans included) and peak memory
(sum over every process seen of its own peak RSS, sampled from /proc), and the CPU a running
daemon's tree has used so far. Linux only: the figures come from /proc and wait4."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    cmd: list[str]
    wall: float = 0.0
    cpu: float = 0.0
    peak_rss_sum: int = 0  # bytes: each process's own peak, summed over the tree
    peak_rss_live: int = 0  # bytes: the largest sum of current RSS seen at one sample
    processes: int = 0
    rc: int = 0
    stdout: str = ""
    stderr: str = ""
    peaks: dict[int, int] = field(default_factory=dict, repr=False)


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def tree(pid: int) -> list[int]:
    """``pid`` and every descendant alive now."""
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def _status_kb(pid: int, keys: tuple[str, ...]) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k = line.split(":", 1)[0]
                if k in keys:
                    out[k] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return out


def sample(pids: list[int], peaks: dict[int, int]) -> int:
    live = 0
    for p in pids:
        s = _status_kb(p, ("VmHWM", "VmRSS"))
        if s:
            peaks[p] = max(peaks.get(p, 0), s.get("VmHWM", 0))
            live += s.get("VmRSS", 0)
    return live


def _become_subreaper() -> None:
    """Orphans of the measured tree come to this process, which reaps them and so counts their CPU.
    Without it a descendant its parent never waits for is lost from the figure: Python's
    multiprocessing fork server, with every converter process under it, outlives deskdex's main
    process and was not counted at all (PR_SET_CHILD_SUBREAPER, Linux 3.4)."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _reap_orphans(timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no child left
        if not pid:
            time.sleep(0.05)


def exited(pid: int, interval: float) -> tuple[int, Any] | None:
    """Wait up to ``interval`` seconds for child ``pid`` to end: (wait status, rusage) as soon as it
    has, so that a run's wall time is exact to 10 ms, not to the sampling interval (a second run
    of 0.4 s read 0.6); None while it runs."""
    deadline = time.perf_counter() + interval
    while True:
        pid_, status, usage = os.wait4(pid, os.WNOHANG)
        if pid_:
            return status, usage
        left = deadline - time.perf_counter()
        if left <= 0:
            return None
        time.sleep(min(0.01, left))


def measure(cmd: list[str], env: dict[str, str] | None = None, interval: float = 0.2,
            cwd: str | None = None) -> Run:
    """Run ``cmd`` to its end, sampling its process tree every ``interval`` seconds. Call it with
    no other child process running: the CPU figure is what every child reaped meanwhile used."""
    import resource

    run = Run(cmd)
    _become_subreaper()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        while True:
            run.peak_rss_live = max(run.peak_rss_live, sample(tree(proc.pid), run.peaks))
            if (ended := exited(proc.pid, interval)) is not None:
                status, usage = ended
                break
        run.wall = time.perf_counter() - t0
        proc.returncode = run.rc = os.waitstatus_to_exitcode(status)
        _reap_orphans()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # The child, every descendant it waited for, and the orphans reaped here.
        run.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        run.peaks[proc.pid] = max(run.peaks.get(proc.pid, 0), usage.ru_maxrss * 1024)
        out.seek(0)
        err.seek(0)
        run.stdout, run.stderr = out.read(), err.read()
    run.peak_rss_sum = sum(run.peaks.values())
    run.processes = len(run.peaks)
    return run


def cpu(pid: int, reaped: bool = True) -> float:
    """CPU seconds (user and system) used so far by process ``pid``, with ``reaped`` those of the
    children it has waited for too; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15 if reaped else 13]) / TICK


def tree_cpu(pid: int) -> float:
    """CPU seconds used so far by ``pid`` and its descendants: each live process's own, plus what
    the children it has reaped used (a fork server's ended converters count through it)."""
    return sum(cpu(p) for p in tree(pid))


def pss_kib(pid: int) -> int:
    """The proportional set size of ``pid`` (pages shared with other processes counted in part)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def du(path: str) -> int:
    total = 0
    for base, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_blocks * 512
            except OSError:
                pass
    return total
