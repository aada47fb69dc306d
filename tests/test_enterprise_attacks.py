"""The enterprise-mode daemon against a malicious local user, end to end: real accounts (useradd),
the system daemon as root, the attacker's own processes run as the attacker's account (setpriv).

What the attacker does in their home: swaps of a small text file for a symlink to the victim's
0600 file or to a root-only file, and back with the same size and mtime: eight made while the
daemon is busy with slow files looked at in the same batch (the attack that once worked), 100
more at random moments; then a file whose name is not UTF-8, and a queued file replaced by a FIFO. After
it: neither secret appears in anything the attacker's searches show; the daemon is the same process
and still indexes: another user's new file is searchable within seconds."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from .accounts import IS_ROOT, Users, clients_or_skip, run_as
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not IS_ROOT, reason="needs root: useradd, setpriv, the system daemon"),
              pytest.mark.timeout(BUSY_TIMEOUT)]  # the daemon's waits are measured in daemon_fixture.Patience

SECRET, ROOT_SECRET = "zebrawolf", "yakheron"

# Run as the attacker: swaps note.txt for a symlink and back, seeded, each side held a random
# moment (the daemon's debounce is 0.3 s: some swaps land between its look and its read, some
# whole batches see only the symlink); then a name that is not UTF-8, and a FIFO where a file was.
ATTACK = r"""
import json, os, random, subprocess, sys, time
home, victim_file, root_file, deskdex_home = sys.argv[1:5]
def run(*args):
    return subprocess.run([sys.executable, "-m", "deskdex", *args, "--home", deskdex_home], capture_output=True,
                          text=True).stdout
rnd = random.Random(1515)
note = os.path.join(home, "note.txt")
words = " ".join(f"filler{i}" for i in range(2000)) + "\n"
def put(text, mtime):
    tmp = note + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.utime(tmp, (mtime, mtime))
    os.replace(tmp, note)
def swap():
    link = note + ".lnk"
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(rnd.choice((victim_file, root_file)), link)
    os.replace(link, note)
# The attack that worked: slow files first, so that the note, looked at in the same batch, waits
# for its read behind them; swapped for a symlink meanwhile, put back later with the same size
# and mtime, so that nothing looks changed.
for r in range(8):
    slow = [os.path.join(home, f"aslow{r}-{i}.txt") for i in range(4)]
    for p in slow:
        with open(p, "w") as f:
            f.write(words * 100)
    text, mtime = f"quince harmless note {r}\n", 1700000000 + r
    put(text, mtime)
    time.sleep(rnd.uniform(0.4, 0.9))
    swap()
    # Search as the attacker until the daemon is done with the batch, symlink in place.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        out = run("search", "quince", "--json", "--limit", "100")
        if "zebrawolf" in out or "yakheron" in out:
            print("LEAK", r, out)
            break
        status = json.loads(run("status", "--json"))
        if status.get("state") == "idle" and status.get("queue") == 0:
            if "zebrawolf" in run("search", "quince", "--json", "--limit", "100"):
                print("LEAK", r)
            break
        time.sleep(0.1)
    put(text, mtime)
    for p in slow:
        os.unlink(p)
# Then quick swaps at random moments.
for i in range(100):
    swap()
    time.sleep(rnd.uniform(0, 0.04) if rnd.random() < 0.8 else rnd.uniform(0.2, 0.5))
    put("quince harmless note\n", 1700000000)
    time.sleep(rnd.uniform(0, 0.04))
with open(os.path.join(home.encode(), b"bad\xff name.txt"), "w") as f:
    f.write("quince badname\n")
queued = os.path.join(home, "queued.txt")
with open(queued, "w") as f:
    f.write("quince queued\n")
os.unlink(queued)
os.mkfifo(queued)
print("done")
"""


def test_a_local_user_cannot_read_through_the_daemon_nor_stop_it(open_dir: Path):
    py, lib = clients_or_skip(open_dir)
    users = Users()
    daemon = None
    try:
        pa, pb = users.create()
        ha, hb = Path(pa.pw_dir), Path(pb.pw_dir)
        ha.chmod(0o755)
        hb.chmod(0o711)  # the victim's home may be passed through: only the file's mode protects it
        victim_file = hb / "private.txt"
        victim_file.write_text(f"{SECRET} quince salary review\n")
        os.chown(victim_file, pb.pw_uid, pb.pw_gid)
        victim_file.chmod(0o600)
        root_file = open_dir / "root-only.txt"
        root_file.write_text(f"{ROOT_SECRET} quince root only\n")
        root_file.chmod(0o600)
        script = open_dir / "attack.py"
        script.write_text(ATTACK)
        script.chmod(0o644)

        home = open_dir / "home"
        names = ", ".join(json.dumps(n) for n in (users.a, users.b))
        daemon = DaemonProcess(home, [], extra_config=f"accounts = [{names}]\n", args=("--system",))
        daemon.start()
        pid = daemon.proc.pid if daemon.proc is not None else None

        def search(user: str, query: str) -> list[dict[str, object]]:
            p = run_as(user, [py, "-m", "deskdex", "search", query, "--json", "--limit", "100", "--home", str(home)],
                       lib, ha if user == users.a else hb)
            assert p.returncode == 0, p.stderr
            return list(json.loads(p.stdout)["hits"])

        p = run_as(users.a, [py, str(script), str(ha), str(victim_file), str(root_file), str(home)], lib, ha,
                   timeout=240)
        assert p.returncode == 0 and "done" in p.stdout, p.stderr
        assert "LEAK" not in p.stdout, p.stdout
        # Settled: the daemon looked at everything the attack left (the queued FIFO, the odd name).
        daemon.wait_for(lambda st: st["state"] == "idle" and st["queue"] == 0, what="the daemon idle")
        hits = search(users.a, "quince")
        shown = json.dumps(hits)
        assert SECRET not in shown and ROOT_SECRET not in shown, shown
        assert search(users.a, SECRET) == [] and search(users.a, ROOT_SECRET) == []
        assert any("badname" in str(h["snippet"]) for h in hits), shown  # the odd name is indexed
        # Root sees that the note ended as the harmless file, and that the FIFO was never read.
        by_root = {h["path"]: h for h in daemon.call("search", query="quince", limit=100)["hits"]}
        assert SECRET not in str(by_root.get(str(ha / "note.txt"), {}).get("snippet", "")), by_root
        failed = {f["path"]: f["reason"] for f in daemon.call("status", failures=True).get("failures", [])}
        assert failed.get(str(ha / "queued.txt")) == "not_regular", failed

        # Still the same daemon, and still indexing: the victim's new file is found in seconds.
        assert daemon.proc is not None and daemon.proc.poll() is None and daemon.proc.pid == pid
        fresh = hb / "fresh.txt"
        fresh.write_text("quince freshly written\n")
        os.chown(fresh, pb.pw_uid, pb.pw_gid)
        patience = daemon.patience(10)  # 10 s of a quiet machine: the daemon runs at idle priority
        while not patience.over() and not any(h["path"] == str(fresh) for h in search(users.b, "freshly")):
            time.sleep(0.2)
        assert any(h["path"] == str(fresh) for h in search(users.b, "freshly")), daemon.log.read_text()[-3000:]
        assert "Traceback" not in daemon.log.read_text()
    finally:
        if daemon is not None and daemon.proc is not None:
            daemon.stop()
        users.remove()
