"""A mail account kept in sync by a real daemon, set up and asked through the installed `deskdex`
command, against a real Dovecot on 127.0.0.1 (tests/imap_server.py): added with its password in
the keyring, new mail found through IDLE, other folders by `deskdex source sync`, a server that goes
away and comes back, a daemon killed in the middle of a sync, a source removed."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from .conftest import CLI, ROOT
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess, Patience
from .imap_server import ImapServer, dovecot_missing, sample_message

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT),
              pytest.mark.skipif(bool(dovecot_missing()), reason=dovecot_missing() or "-")]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ImapServer]:
    with ImapServer(tmp_path / "imap") as srv:
        yield srv


def keyring_env(tmp_path: Path) -> dict[str, str]:
    """The tests' keyring (tests/keyring_backend.py: no Secret Service runs on a test machine)."""
    return {"PYTHON_KEYRING_BACKEND": "keyring_backend.FileKeyring", "PYTHONPATH": str(ROOT / "tests"),
            "DESKDEX_TEST_KEYRING": str(tmp_path / "keyring.json")}


def titles(daemon: DaemonProcess, query: str) -> list[str]:
    return sorted(h["title"] for h in daemon.call("search", query=query, limit=100, words=True)["hits"])


def eventually(daemon: DaemonProcess, query: str, expected: list[str], quiet: float = 60) -> None:
    patience = daemon.patience(quiet)
    got: list[str] = []
    while not patience.over():
        got = titles(daemon, query)
        if got == expected:
            return
        time.sleep(0.2)
    raise AssertionError(f"{query!r}: expected {expected}, got {got} after {patience}\n"
                         f"{daemon.log.read_text()[-3000:]}")


def source_state(daemon: DaemonProcess) -> dict[str, Any]:
    (state,) = daemon.call("status")["sources"]
    return state


def test_a_mail_account_added_from_the_command_line_is_kept_in_sync_by_the_daemon(
        server: ImapServer, tmp_path: Path, home: Path) -> None:
    server.append("INBOX", sample_message("Quarterly figures", "the okapi figures are ready"))
    server.append("INBOX", sample_message("Notes", "see attached", attachment=("notes.txt", b"a platypus list")))
    docs = tmp_path / "docs"
    docs.mkdir()
    env = keyring_env(tmp_path)
    cli = CLI(home)
    daemon = DaemonProcess(home, [docs], env=env).start()
    try:
        add = cli.run("source", "add", server.url, env=env, input_text=server.password + "\n")
        assert "added" in add.stdout
        config = (home / "config" / "config.toml").read_text()
        assert server.url in config and server.password not in config
        assert server.password in (tmp_path / "keyring.json").read_text()

        eventually(daemon, "okapi", ["Quarterly figures"])
        eventually(daemon, "platypus", ["a platypus list"])  # the attachment, a member of its message
        daemon.wait_for(lambda st: st["sources"] and st["sources"][0]["state"] == "ok", what="the first sync")

        # New mail in INBOX: the daemon hears of it through IDLE, nobody asks.
        server.append("INBOX", sample_message("Urgent", "the walrus arrives"))
        eventually(daemon, "walrus", ["Urgent"])

        # Another folder: `deskdex source sync` asks for a sync now.
        server.append("Work", sample_message("Plan", "a narwhal plan"))
        listed = json.loads(cli.run("source", "sync", "--json", env=env).stdout)
        assert [s["state"] for s in listed["sources"]] == ["ok"], listed
        assert titles(daemon, "narwhal") == ["Plan"]

        status = json.loads(cli.run("status", "--json", env=env).stdout)
        (src,) = status["sources"]
        assert src["url"] == server.url and src["state"] == "ok" and src["documents"] == 4 and src["last_sync"]
        assert f"{server.url}: ok, 4 documents" in cli.run("status", env=env).stdout

        # The server goes away: a state, and what was indexed stays searchable.
        server.pause()
        try:
            down = cli.run("source", "sync", "--json", check=False, env=env)
            assert down.returncode == 1, down
            (src,) = json.loads(down.stdout)["sources"]
            assert src["state"] == "unreachable" and "cannot connect" in src["error"], src
            assert titles(daemon, "okapi") == ["Quarterly figures"]
            assert "unreachable" in cli.run("source", "list", env=env).stdout
        finally:
            server.resume()
        server.append("INBOX", sample_message("Back", "the tapir is back"))
        back = json.loads(cli.run("source", "sync", "--json", env=env).stdout)
        assert back["sources"][0]["state"] == "ok", back
        assert titles(daemon, "tapir") == ["Back"]

        removed = cli.run("source", "remove", server.url, env=env)
        assert "removed" in removed.stdout
        eventually(daemon, "okapi", [])
        assert daemon.call("status")["sources"] == []
        assert server.password not in (tmp_path / "keyring.json").read_text()
    finally:
        assert daemon.stop() == 0


def test_a_refused_login_is_a_state_with_its_reason(server: ImapServer, tmp_path: Path, home: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    env = keyring_env(tmp_path)
    daemon = DaemonProcess(home, [docs], env=env)  # writes the config file, which `source add` adds to
    CLI(home).run("source", "add", server.url, env=env, input_text="not-the-password\n")
    daemon.start(wait=False)
    try:
        st = daemon.wait_for(lambda st: bool(st.get("sources")) and st["sources"][0]["state"] == "refused",
                             what="the refused login")
        assert "refused the login of alice" in st["sources"][0]["error"]
    finally:
        assert daemon.stop() == 0


def test_a_daemon_killed_in_the_middle_of_a_sync_catches_up_without_loss_or_doubles(
        server: ImapServer, tmp_path: Path, home: Path) -> None:
    count = 300
    for i in range(count):
        server.append("INBOX", sample_message(f"Note {i}", f"note number n{i}x in the mammoth series"))
    secret = tmp_path / "secret"
    secret.write_text(server.password + "\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    extra = f"commit_seconds = 0.2\n[[sources]]\nurl = {json.dumps(server.url)}\n" \
            f"password_command = {json.dumps(f'cat {secret}')}\n"
    daemon = DaemonProcess(home, [docs], extra_config=extra).start(wait=False)
    patience = Patience(120)
    committed = 0
    while not patience.over():  # some, not all, of the messages committed: kill it there
        try:
            committed = daemon.call("search", query="mammoth", limit=1, snippets=False, words=True)["total"]
        except Exception:  # not answering yet
            committed = 0
        if committed >= 20:
            break
        time.sleep(0.05)
    assert 20 <= committed < count, f"committed {committed} before the kill"
    daemon.stop(signal.SIGKILL)

    again = DaemonProcess(home, [docs], extra_config=extra).start(wait=False)
    try:
        again.wait_for(lambda st: bool(st.get("sources")) and st["sources"][0]["state"] == "ok"
                       and st["sources"][0]["documents"] == count, quiet=120, what="the sync after the kill")
        result = again.call("search", query="mammoth", limit=1, snippets=False, words=True)
        assert result["total"] == count, result["total"]
        fetched = again.call("status")["sources"][0]["fetched"]
        assert fetched <= count - committed, f"fetched {fetched} again of {count}, {committed} were committed"
    finally:
        assert again.stop() == 0


def test_a_hit_opens_as_the_message_the_server_holds_in_the_web_ui_and_from_the_command_line(
        server: ImapServer, tmp_path: Path, home: Path) -> None:
    import base64
    import urllib.parse

    from .web_fixture import start_web

    message = sample_message("Minutes", "the quagga minutes", attachment=("minutes.txt", b"a zebu in the minutes"))
    uid = server.append("INBOX", message)
    secret = tmp_path / "secret"
    secret.write_text(server.password + "\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    web = start_web(home, [docs], extra_config=f"[[sources]]\nurl = {json.dumps(server.url)}\n"
                                               f"password_command = {json.dumps(f'cat {secret}')}\n")
    try:
        eventually(web.daemon, "quagga", ["Minutes"])
        hit = web.daemon.call("search", query="quagga", words=True)["hits"][0]
        assert hit["source"] == "imap" and f";UID={uid}" in hit["uri"]
        # The op: the bytes the server holds; an attachment's hit answers its whole message.
        original = web.daemon.call("original", uri=hit["uri"])
        assert original["name"] == f"message-{uid}.eml" and original["mime"] == "message/rfc822"
        assert base64.b64decode(original["data"]) == message
        zebu = web.daemon.call("search", query="zebu", words=True)["hits"][0]
        assert zebu["uri"] == hit["uri"] + "#minutes.txt"
        assert base64.b64decode(web.daemon.call("original", uri=zebu["uri"])["data"]) == message

        # The web UI: the message's page shows its text, its download is the .eml.
        page = web.client.get("/doc?uri=" + urllib.parse.quote(hit["uri"], safe=""))
        assert page.status_code == 200 and "quagga" in page.text and "download" in page.text, page.text[:2000]
        download = web.client.get("/file?uri=" + urllib.parse.quote(hit["uri"], safe=""))
        assert download.status_code == 200 and download.content == message
        assert f"message-{uid}.eml" in download.headers["content-disposition"]

        # The command line: `search --open 1` hands the desktop a copy of the message as an .eml file.
        bin_dir = tmp_path / "bin"  # no desktop session on a test machine: a stand-in xdg-open records its argument
        bin_dir.mkdir()
        record = tmp_path / "opened.txt"
        (bin_dir / "xdg-open").write_text(f"#!/bin/sh\necho \"$1\" > {record}\n")
        (bin_dir / "xdg-open").chmod(0o755)
        env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "XDG_CACHE_HOME": str(tmp_path / "cache")}
        CLI(home).run("search", "quagga", "--open", "1", env=env)
        opened = Path(record.read_text().strip())
        assert opened.name == f"message-{uid}.eml" and opened.read_bytes() == message
        assert opened.stat().st_mode & 0o077 == 0  # a mail is the user's alone

        # Gone from the server since: not found, and the preview still shows what was indexed.
        server.delete("INBOX", uid)
        gone = web.client.get("/file?uri=" + urllib.parse.quote(hit["uri"], safe=""))
        assert gone.status_code == 404, gone.text
    finally:
        web.close()
