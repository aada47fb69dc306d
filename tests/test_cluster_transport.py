"""The worker's Redis transport (cluster/transport.py) against a real redis-server, through kombu's
own consuming paths: BRPOP (a consumer draining events, as a worker does) and RPOP (``Queue.get``).
Messages that are not kombu's are pushed into the queue's Redis list by hand, as an intruder on the
broker would; each must be set aside (dead-lettered, with why) and the good ones after it still
delivered. kombu runs in a child process: the test interpreter does not load kombu (the
repository's packaging/ folder hides the library of that name on pytest's path)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from .conftest import ROOT
from .test_cluster import RedisServer, redis_server  # noqa: F401  (fixture)
from .test_cluster_trust import Resp

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="redis-server is not installed (packaging/system-deps.sh installs it)")

# Each is taken off the queue, then refused; the last three are JSON that kombu's own decoder
# fails on (its "__type__" hook), which kombu raised from the worker's event loop.
BAD = [
    b"garbage", b"\xff\xfe not UTF-8", b"null", b"[]", b'{"properties": null}',
    b'{"properties": {"delivery_tag": "t1", "body_encoding": "base64"}, "body": "%%% not base64 %%%"}',
    b'{"__type__": "nope", "__value__": 1}', b'{"__type__": "uuid", "__value__": "zz"}',
    b'{"properties": {"delivery_tag": "t2", "x": {"__type__": "datetime", "__value__": 5}}}',
]

CONSUMER = r"""
import json, sys, socket
from kombu import Connection, Consumer, Exchange, Queue
from deskdex.cluster.transport import Transport

url, mode, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
got = []
with Connection(url, transport=Transport) as conn:
    queue = Queue("t.q", Exchange("t.q", type="direct"), routing_key="t.q")
    channel = conn.channel()
    queue = queue(channel)
    queue.declare()
    if mode == "publish":
        with conn.Producer() as producer:
            for i in range(want):
                producer.publish({"n": i}, exchange=queue.exchange, routing_key="t.q", serializer="json")
        sys.exit(0)
    if mode == "get":  # RPOP, one message at a time
        for _ in range(50):
            message = queue.get(no_ack=False)
            if message is not None:
                got.append(message.payload["n"])
                message.ack()
            if len(got) == want:
                break
    else:  # BRPOP, as a worker consumes
        def take(body, message):
            got.append(body["n"])
            message.ack()
        with Consumer(channel, [queue], callbacks=[take], accept=["json"]):
            while len(got) < want:
                try:
                    conn.drain_events(timeout=10)
                except socket.timeout:
                    break
print(json.dumps(got))
"""


def _kombu(url: str, mode: str, want: int) -> list[int]:
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-c", CONSUMER, url, mode, str(want)], capture_output=True, text=True,
                          timeout=120, env=env, cwd="/")
    assert done.returncode == 0, f"kombu ({mode}) ended with {done.returncode}:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1]) if mode != "publish" else []


@pytest.mark.parametrize("mode", ["consume", "get"])
def test_messages_kombu_cannot_read_are_set_aside_and_the_good_ones_still_come(redis_server: RedisServer,
                                                                               mode: str) -> None:
    r = Resp(redis_server.url)
    try:
        _kombu(redis_server.url, "publish", 0)  # declares the queue and its binding
        for item in BAD:
            r("LPUSH", "t.q", item)
        _kombu(redis_server.url, "publish", 3)  # three good ones behind the bad ones
        assert _kombu(redis_server.url, mode, 3) == [0, 1, 2]
        kept = [json.loads(e) for e in reversed(r("LRANGE", "deskdex:dead-letters", 0, -1))]
        assert len(kept) == len(BAD), kept
        assert kept[0]["message"] == "garbage" and "not JSON" in kept[0]["why"]
        assert kept[2]["why"] == "a JSON NoneType, not a message envelope"
        assert "not base64" in kept[5]["why"]
        assert all("not JSON kombu reads" in k["why"] for k in kept[6:8]), kept[6:8]
        assert r("LLEN", "t.q") == 0 and r("HLEN", "unacked") == 0
    finally:
        r.close()


def test_the_transport_uses_no_private_method_of_kombu() -> None:
    # What it overrides or calls on kombu's classes: public names only (see tests/test_private_names.py
    # for the whole code base); here the transport's own module, its class body read.
    import ast

    tree = ast.parse((ROOT / "cluster" / "transport.py").read_text())
    [channel] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Channel"]
    own = {n.name for n in channel.body if isinstance(n, ast.FunctionDef)}
    overridden = sorted(name for name in own if name.startswith("_") and not name.startswith("__"))
    assert overridden == [], overridden
    private_reads = sorted({n.attr for n in ast.walk(channel) if isinstance(n, ast.Attribute)
                            and n.attr.startswith("_") and not n.attr.startswith("__")})
    assert private_reads == [], private_reads
