"""Stopping is not a failure of the file at hand, and failures that may pass another time (a
timeout, a crash, the memory limit) are tried again: after a back-off, on ``deskdex retry``, and
at once when the limits change. The converter that takes as long as a test wants is
tests/misbehaving.py's ``held*`` (a real converter process, held by a file the test removes)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path

import pytest

from deskdex.clients.managing import stop_on_signal
from deskdex.errors import DaemonUnavailable, Interrupted

from .conftest import CLI, DESKDEX, ROOT
from .daemon_fixture import BUSY_TIMEOUT, CLIENT_TIMEOUT, DaemonProcess, Patience
from .misbehaving import settings_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]  # the daemon's waits are measured in daemon_fixture.Patience


def held_folder(tmp_path: Path) -> tuple[Path, Path, str, dict[str, str]]:
    """A folder with one file held in conversion while ``control/hold`` exists, and one plain."""
    docs, control = tmp_path / "docs", tmp_path / "control"
    docs.mkdir()
    (docs / "held.txt").write_text("the held file says qheldx\n")
    (docs / "plain.txt").write_text("the plain file says qplainx\n")
    config, env = settings_for(control)
    (control / "hold").touch()
    return docs, control, config, env


def wait_started(control: Path, pid: int | None) -> None:
    """Until the held file's conversion has started."""
    patience = Patience(pid=pid)
    while not patience.over():
        started = control / "started"
        if started.exists() and "held.txt" in started.read_text().split():
            return
        time.sleep(0.05)
    raise AssertionError(f"the held file's conversion did not start after {patience}")


def catalog_row(home: Path, path: Path) -> tuple[str, str | None] | None:
    """(status, reason) of ``path`` in the catalog, read with no deskdex running."""
    with closing(sqlite3.connect(home / "data" / "catalog.sqlite")) as db:
        return db.execute("SELECT status, reason FROM docs WHERE path=?", (str(path),)).fetchone()


def failure_of(status: dict, path: Path) -> dict | None:
    return next((f for f in status.get("failures", []) if f["path"] == str(path)), None)


def wait_attempts(d: DaemonProcess, path: Path, attempts: int, what: str) -> tuple[dict, dict]:
    """The daemon's status with its failures once ``path`` has failed ``attempts`` times, and that failure."""
    patience = d.patience()
    st: dict = {}
    while not patience.over():
        assert d.proc is not None and d.proc.poll() is None, d.log.read_text()
        try:
            st = d.call("status", failures=True)
        except DaemonUnavailable:  # not listening yet
            time.sleep(0.1)
            continue
        f = failure_of(st, path)
        if f is not None and f["attempts"] >= attempts:
            return st, f
        time.sleep(0.1)
    raise AssertionError(f"waited {patience} for {what}; last status {st}\n{d.log.read_text()[-3000:]}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_daemon_stopped_while_converting_converts_that_file_next_time(tmp_path: Path, sig: int):
    docs, control, config, env = held_folder(tmp_path)
    # Signalled as a terminal's Ctrl-C and a service manager do: with its converter processes.
    d = DaemonProcess(tmp_path / "home", [docs], extra_config=config, env=env, own_group=True)
    d.start(wait=False)
    try:
        wait_started(control, d.proc.pid if d.proc else None)
    finally:
        code = d.stop(sig)
    assert code == 0, d.log.read_text()
    assert catalog_row(tmp_path / "home", docs / "held.txt") is None, "a stop recorded the file at hand"
    (control / "hold").unlink()
    d.start()
    try:
        st = d.call("status", failures=True)
        assert st["failed"] == 0 and st["failures"] == [], st
        d.eventually("qheldx", [str(docs / "held.txt")])
        d.eventually("qplainx", [str(docs / "plain.txt")])
    finally:
        d.stop()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_deskdex_index_stopped_while_converting_converts_that_file_next_time(tmp_path: Path, cli: CLI,
                                                                            sig: int):
    docs, control, config, env = held_folder(tmp_path)
    (cli.home / "config").mkdir(parents=True)
    (cli.home / "config" / "config.toml").write_text(config)
    proc = subprocess.Popen([DESKDEX, "index", str(docs), "--no-progress"], cwd=ROOT, text=True,
                            env=dict(os.environ, DESKDEX_HOME=str(cli.home), **env), process_group=0,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_started(control, proc.pid)
        os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=CLIENT_TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # As Ctrl-C does, SIGTERM abandons the file at hand and commits the rest; no converter
    # process prints a traceback of its own.
    assert proc.returncode == 130 and "interrupted" in err, (proc.returncode, out, err)
    assert "Traceback" not in err, err
    assert catalog_row(cli.home, docs / "held.txt") is None, "a stop recorded the file at hand"
    (control / "hold").unlink()
    summary = json.loads(cli.run("index", str(docs), "--json", "--no-progress", env=env).stdout)
    assert summary["failed"] == 0 and summary["indexed"] >= 1, summary
    assert catalog_row(cli.home, docs / "held.txt") == ("ok", None)


def test_a_ctrl_c_a_library_swallows_still_stops_a_one_shot_run():
    """A Ctrl-C landing while a library ran in the main thread (seen: lxml's module initialisation)
    was swallowed there, and `deskdex index` went on to the held file's time limit: one run in
    about twenty of the test above. The signal also sets the event the indexer's pool looks at
    while it waits for conversions; the Interrupted it then raises ends the command as Ctrl-C."""
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with stop_on_signal() as stop:
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                pass  # what the library did with it
            assert stop.is_set()
            raise Interrupted("stopped with files left to index")  # what the indexer raises, seeing it
    assert signal.getsignal(signal.SIGINT) is before


def test_a_timeout_is_tried_again_after_its_back_off_and_status_says_when(tmp_path: Path, cli: CLI):
    docs, control, config, env = held_folder(tmp_path)
    # A held conversion times out after 2 s and is tried again 1 s later, then 2 s, 4 s...
    d = DaemonProcess(tmp_path / "home", [docs], extra_config="retry_first = 1.0\n" + config, env=env,
                      time_limit=2.0)
    d.start(wait=False)
    try:
        first, f = wait_attempts(d, docs / "held.txt", 1, "the held file to time out")
        assert f["reason"] == "timeout" and f["retry_at"] is not None, f
        assert first["retries"] == 1 and first["next_retry"] == f["retry_at"], first
        # Nobody asks: the daemon tries it again by itself, and waits longer after each failure.
        _, g = wait_attempts(d, docs / "held.txt", 3, "two more tries")
        assert g["retry_at"] > f["retry_at"], (f, g)
        # `status` says when.
        shown = cli.run("status", "--failures").stdout
        assert "retrying:  1 of them" in shown, shown
        line = next(x for x in shown.splitlines() if x.startswith(f"  {docs / 'held.txt'}:"))  # not "working on"
        assert "timeout" in line and "tried again" in line, line
    finally:
        d.stop()
    # A longer time limit makes the failure due at once: the next start converts the file.
    (control / "hold").unlink()
    d = DaemonProcess(tmp_path / "home", [docs], extra_config="retry_first = 3600.0\n" + config, env=env)
    d.start()
    try:
        d.eventually("qheldx", [str(docs / "held.txt")])
        st = d.call("status", failures=True)
        assert st["failed"] == 0 and st["retries"] == 0 and st["next_retry"] is None, st
    finally:
        d.stop()


def test_deskdex_retry_with_and_without_a_daemon(tmp_path: Path, cli: CLI):
    docs, control, config, env = held_folder(tmp_path)
    # No retry by itself within the test: only `deskdex retry` tries the file again.
    d = DaemonProcess(tmp_path / "home", [docs], extra_config="retry_first = 3600.0\n" + config, env=env,
                      time_limit=5.0)
    d.start(wait=False)
    try:
        wait_attempts(d, docs / "held.txt", 1, "the held file to time out")
        d.wait_for(lambda st: st["state"] == "idle", what="the first reconcile")
        elsewhere = json.loads(cli.run("retry", str(tmp_path / "elsewhere"), "--json").stdout)
        assert elsewhere == {"retrying": 0}
        out = cli.run("retry", str(docs)).stdout
        assert "tries 1 failed file" in out, out
        _, f = wait_attempts(d, docs / "held.txt", 2, "the second try")
        assert f["attempts"] == 2 and f["retry_at"] > time.time() + 3000, f  # back-off from the setting
    finally:
        d.stop()
    # No daemon: the command converts them itself, with the same limits.
    (control / "hold").unlink()
    unchanged = json.loads(cli.run("index", str(docs), "--json", "--no-progress", env=env).stdout)
    assert unchanged["indexed"] == 0 and unchanged["failed"] == 0, unchanged  # its back-off is not over
    result = json.loads(cli.run("retry", "--json", "--no-progress", env=env).stdout)
    assert result["retrying"] == 1 and result["indexed"] == 1 and result["failed"] == 0, result
    assert catalog_row(cli.home, docs / "held.txt") == ("ok", None)
    assert "no failed file" in cli.run("retry", env=env).stdout


def test_changed_limits_make_transient_failures_due_not_permanent_ones(tmp_path: Path, cli: CLI):
    docs, control, config, env = held_folder(tmp_path)
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4\nnot a pdf at all\n")
    (cli.home / "config").mkdir(parents=True)
    cfg = cli.home / "config" / "config.toml"
    cfg.write_text("time_limit = 5.0\nretry_first = 3600.0\n" + config)
    first = json.loads(cli.run("index", str(docs), "--json", "--no-progress", env=env).stdout)
    assert first["failed_by_reason"] == {"timeout": 1, "corrupt": 1}, first
    (control / "hold").unlink()
    again = json.loads(cli.run("index", str(docs), "--json", "--no-progress", env=env).stdout)
    assert again["indexed"] == 0 and again["unchanged"] == 3, again  # not due yet
    cfg.write_text("time_limit = 600.0\nretry_first = 3600.0\n" + config)
    changed = json.loads(cli.run("index", str(docs), "--json", "--no-progress", env=env).stdout)
    assert changed["indexed"] == 1 and changed["unchanged"] == 2 and changed["failed"] == 0, changed
    assert catalog_row(cli.home, docs / "held.txt") == ("ok", None)
    assert catalog_row(cli.home, docs / "broken.pdf") == ("failed", "corrupt")


def test_a_catalog_of_an_earlier_deskdex_has_its_crashes_tried_again(tmp_path: Path, cli: CLI):
    """An earlier deskdex recorded the file at hand of a Ctrl-C as a crash for good: a catalog it
    made is read as it is, and the first run of this one converts that file again."""
    docs, control, config, env = held_folder(tmp_path)
    (cli.home / "config").mkdir(parents=True)
    (cli.home / "config" / "config.toml").write_text("time_limit = 5.0\n" + config)
    cli.run("index", str(docs), "--no-progress", env=env)
    with closing(sqlite3.connect(cli.home / "data" / "catalog.sqlite")) as db:  # as an earlier deskdex left it
        db.execute("UPDATE docs SET reason='crash', error='converter process exited with code 1' "
                   "WHERE status='failed'")
        db.execute("DROP INDEX docs_retry")
        db.execute("ALTER TABLE docs DROP COLUMN attempts")
        db.execute("ALTER TABLE docs DROP COLUMN retry_at")
        db.execute("DELETE FROM meta WHERE key='converted_by'")
        db.commit()
    (control / "hold").unlink()
    st = json.loads(cli.run("status", "--json", "--failures").stdout)
    assert st["failed_by_reason"] == {"crash": 1} and st["failures"][0]["retry_at"] is None, st
    summary = json.loads(cli.run("index", str(docs), "--json", "--no-progress", env=env).stdout)
    assert summary["indexed"] >= 1 and summary["failed"] == 0, summary
    assert catalog_row(cli.home, docs / "held.txt") == ("ok", None)


def test_a_missing_converter_is_a_failure_tried_again_when_the_converters_change(tmp_path: Path, cli: CLI):
    docs, control, config, env = held_folder(tmp_path)
    (control / "hold").unlink()
    (cli.home / "config").mkdir(parents=True)
    cfg = cli.home / "config" / "config.toml"
    cfg.write_text('retry_first = 3600.0\n[converters]\n"text/plain" = "tests.no_such_module:convert"\n')
    first = json.loads(cli.run("index", str(docs), "--json", "--no-progress", env=env).stdout)
    assert first["failed_by_reason"] == {"no_converter": 2}, first
    st = cli.json("status", "--failures")
    assert {f["reason"] for f in st["failures"]} == {"no_converter"}, st
    assert all(f["retry_at"] is not None for f in st["failures"]), st  # when it is tried again
    assert "held.txt" in {Path(h["path"]).name for h in cli.json("search", "held")["hits"]}  # found by name
    cfg.write_text("retry_first = 3600.0\n" + config)  # a converter that can run: due at once
    second = json.loads(cli.run("index", str(docs), "--json", "--no-progress", env=env).stdout)
    assert second["indexed"] == 2 and second["failed"] == 0, second


def test_deskdex_index_tries_a_failure_again_once_its_back_off_is_over(tmp_path: Path, cli: CLI):
    docs, control, config, env = held_folder(tmp_path)
    (cli.home / "config").mkdir(parents=True)
    (cli.home / "config" / "config.toml").write_text("time_limit = 5.0\nretry_first = 1.0\n" + config)
    first = json.loads(cli.run("index", str(docs), "--json", "--no-progress", env=env).stdout)
    assert first["failed_by_reason"] == {"timeout": 1}, first
    (control / "hold").unlink()
    retry_at = cli.json("status", "--failures")["failures"][0]["retry_at"]
    time.sleep(max(0.0, retry_at - time.time()) + 0.1)
    again = json.loads(cli.run("index", str(docs), "--json", "--no-progress", env=env).stdout)
    assert again["indexed"] == 1 and again["unchanged"] == 1 and again["failed"] == 0, again
