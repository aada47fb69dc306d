"""Where a `deskdex index` spends its CPU: py-spy samples the whole process tree (--subprocesses), and
the samples are summed per kind of process (the main process with its writer, the multiprocessing
fork server, the converter workers) into the functions with the most own time (the sample's innermost
Python frame: time in a C or Rust extension counts to the Python function that called it) and the most
total time (the function is anywhere on the stack, counted once per sample).

    .venv/bin/python benchmarks/index_cases.py --cases slice1000 --profile OUT.txt

py-spy must be able to read the processes' memory: run as root, or with ptrace allowed
(kernel.yama.ptrace_scope = 0). Only samples of running threads count (py-spy leaves idle ones out),
so a writer waiting on a pipe costs nothing here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

TOP = 25
_PROCESS = re.compile(r'^process \d+:"(.*)"$')
_LINE = re.compile(r" \(([^()]*):\d+\)$")  # "func (path:line)": the line number splits one function in many


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("py-spy is missing: .venv/bin/pip install py-spy")
    return found


def record(cmd: list[str], raw: str, env: dict[str, str], rate: int = 100) -> None:
    """Run ``cmd`` under py-spy, its collapsed stacks written to ``raw``."""
    subprocess.run([py_spy(), "record", "--subprocesses", "--format", "raw", "--rate", str(rate),
                    "--nonblocking", "-o", raw, "--", *cmd], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kind(processes: list[str]) -> str:
    """The kind of the innermost process of a stack, from the chain of processes above it."""
    if len(processes) <= 1:
        return "main (walk, queue, writer)"
    if len(processes) == 2:
        return "fork server" if "forkserver" in processes[1] else "helper: " + processes[1][:60]
    return "converter workers"


def short(frame: str) -> str:
    m = _LINE.search(frame)
    if not m:
        return frame
    path = m.group(1)
    # site-packages/foo/bar.py and deskdex/pipeline/x.py read better without the venv's prefix
    for marker in ("site-packages/", "python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{frame[:m.start()]} ({path})"


def split(stack: str) -> list[str]:
    """The frames of a collapsed stack. A process frame's command line may hold ';' (the fork
    server's is ``-c from multiprocessing.forkserver import main; main(...)``): it ends at a quote."""
    out: list[str] = []
    for piece in stack.split(";"):
        if out and out[-1].startswith("process ") and not out[-1].endswith('"'):
            out[-1] += ";" + piece
        else:
            out.append(piece)
    return out


def summarise(raw: str) -> dict[str, dict[str, Counter[str]]]:
    out: dict[str, dict[str, Counter[str]]] = {}
    with open(raw, errors="replace") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = split(stack)
            procs = [m.group(1) for m in map(_PROCESS.match, frames) if m]
            funcs = [short(fr) for fr in frames if not _PROCESS.match(fr)]
            if not funcs:
                continue
            k = out.setdefault(kind(procs), {"own": Counter(), "total": Counter(), "samples": Counter()})
            n = int(count)
            k["samples"]["all"] += n
            k["own"][funcs[-1]] += n
            for fn in set(funcs):
                k["total"][fn] += n
    return out


def report(title: str, summary: dict[str, dict[str, Counter[str]]], rate: int = 100) -> str:
    grand = sum(k["samples"]["all"] for k in summary.values()) or 1
    lines = [f"== {title}", f"samples: {grand} at {rate} Hz (about {grand / rate:.0f} s of CPU over every "
                            "process and thread)"]
    for name, k in sorted(summary.items(), key=lambda kv: -kv[1]["samples"]["all"]):
        n = k["samples"]["all"]
        lines.append(f"\n-- {name}: {n} samples, {100 * n / grand:.1f}% of all")
        for what in ("own", "total"):
            lines.append(f"   top {TOP} by {what} time (% of this kind's samples):")
            for fn, c in k[what].most_common(TOP):
                lines.append(f"   {100 * c / n:5.1f}%  {fn}")
    return "\n".join(lines) + "\n"
