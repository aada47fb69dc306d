"""The crawler's HTTP client connects where its DNS cache says, through httpx's public interface
only (webcrawl/fetch.py, CheckedTransport): real HTTP and HTTPS servers on 127.0.0.1, asserted
from what they saw (the Host header, the client's port of each request, the connections open).

Names ending in .test cannot resolve here, so a DNSCache whose ``lookup`` answers from a table
stands in for a DNS server (the only stand-in); everything else is real: sockets, TLS with a
certificate authority made for the test, httpx. A client that resolved names by itself (httpx's
default transport) fails every test below: it cannot find site.test."""

from __future__ import annotations

import asyncio
import datetime
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from deskdex.errors import FetchError
from deskdex.webcrawl.fetch import DNSCache, FetchSettings, fetch, make_client
from deskdex.webcrawl.sink import FetchedPage

SETTINGS = FetchSettings(timeout=5.0, deadline=20.0, allow_private=True)


class TableDNS(DNSCache):
    """The DNS cache, its answers from ``table`` (name -> addresses) instead of the system's."""

    def __init__(self, table: dict[str, list[str]], allow_private: bool = True) -> None:
        super().__init__(300.0, allow_private)
        self.table = table

    async def lookup(self, host: str, port: int) -> list[str]:
        return self.table[host]


class Server:
    """An HTTP/1.1 server with keep-alive on 127.0.0.1 (HTTPS with ``tls``): each request's client
    port and Host header logged, the connections open counted."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.log: list[tuple[int, str]] = []
        self.open = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 10  # a keep-alive connection the client never closes ends, so close() cannot hang

            def setup(self) -> None:
                super().setup()
                with outer.lock:
                    outer.open += 1

            def finish(self) -> None:
                super().finish()
                with outer.lock:
                    outer.open -= 1

            def do_GET(self) -> None:
                with outer.lock:
                    outer.log.append((self.client_address[1], self.headers.get("Host", "")))
                body = b"<html><body>hello</body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # Request threads are joined by server_close: one still reading the client's last EOF when the
        # test returns would otherwise be reported as a leaked thread (it was, once, under load).
        self.server.daemon_threads = False
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="fetch-test-site", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def get_all(dns: DNSCache, urls: list[str], connections: int = 100,
            verify: ssl.SSLContext | None = None) -> list[FetchedPage | FetchError]:
    """Each URL fetched in turn by one client; a failure is returned, not raised."""
    async def go() -> list[FetchedPage | FetchError]:
        got: list[FetchedPage | FetchError] = []
        async with make_client(SETTINGS, dns, connections, verify=verify) as client:
            for url in urls:
                try:
                    got.append(await fetch(client, SETTINGS, url))
                except FetchError as exc:
                    got.append(exc)
        return got
    return asyncio.run(go())


def test_a_name_connects_to_the_address_its_cache_checked(server: Server) -> None:
    dns = TableDNS({"site.test": ["127.0.0.1"]})
    pages = get_all(dns, [f"http://site.test:{server.port}/a", f"http://site.test:{server.port}/b"])
    assert all(isinstance(p, FetchedPage) and p.status == 200 and b"hello" in p.body for p in pages), pages
    assert [host for _, host in server.log] == [f"site.test:{server.port}"] * 2  # the name, not the address
    assert dns.lookups == 1  # the second request from the cache


def test_a_private_address_is_refused_before_any_connection(server: Server) -> None:
    dns = TableDNS({"evil.test": ["127.0.0.1"]}, allow_private=False)
    [failure] = get_all(dns, [f"http://evil.test:{server.port}/"])
    assert isinstance(failure, FetchError) and failure.reason == "private_address", failure
    assert "evil.test resolves to a non-public address 127.0.0.1" in str(failure)
    assert server.log == []


def test_each_address_is_tried_in_turn(server: Server) -> None:
    # Nothing listens on 127.0.0.2 (the server is bound to 127.0.0.1): refused, then the next.
    dns = TableDNS({"site.test": ["127.0.0.2", "127.0.0.1"]})
    [page] = get_all(dns, [f"http://site.test:{server.port}/"])
    assert isinstance(page, FetchedPage) and page.status == 200, page
    [(_, host)] = server.log
    assert host == f"site.test:{server.port}"


def test_a_site_keeps_its_connection_and_two_names_never_share_one(server: Server) -> None:
    dns = TableDNS({"site.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    urls = [f"http://site.test:{server.port}/{i}" for i in range(5)] + [f"http://other.test:{server.port}/"]
    pages = get_all(dns, urls)
    assert all(isinstance(p, FetchedPage) for p in pages), pages
    site_ports = {port for port, host in server.log if host.startswith("site.test")}
    other_ports = {port for port, host in server.log if host.startswith("other.test")}
    assert len(site_ports) == 1, server.log  # keep-alive: five requests, one connection
    assert len(other_ports) == 1 and not other_ports & site_ports, server.log  # each site its own


def test_at_most_connections_sockets_are_open_while_crawling_many_sites(server: Server) -> None:
    # Twelve sites one after the other, with room for three: a site's pool that is never used again
    # must not keep its connection open for the rest of the crawl.
    names = [f"s{i}.test" for i in range(12)]
    dns = TableDNS({n: ["127.0.0.1"] for n in names})
    seen: list[int] = []

    async def go() -> None:
        async with make_client(SETTINGS, dns, 3) as client:
            for n in names:
                page = await fetch(client, SETTINGS, f"http://{n}:{server.port}/")
                assert page.status == 200
                # The server notices a closed connection on its own thread: give it a moment.
                for _ in range(100):
                    if server.open <= 3:
                        break
                    await asyncio.sleep(0.02)
                seen.append(server.open)

    asyncio.run(go())
    assert max(seen) <= 3, seen
    assert len({port for port, _ in server.log}) == 12  # each site its own connection


# -- HTTPS: the certificate is checked against the name, never reused for another name ------------

def _certificates(tmp: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context for site.test, client context trusting the test's authority)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "deskdex test authority")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "site.test")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("site.test")]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    (tmp / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (tmp / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (tmp / "leaf.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp / "leaf.pem", tmp / "leaf.key")
    client = ssl.create_default_context(cafile=str(tmp / "ca.pem"))
    return server, client


def test_tls_checks_the_name_and_never_lends_its_connection_to_another_name(tmp_path: Path) -> None:
    server_tls, client_tls = _certificates(tmp_path)
    server = Server(tls=server_tls)
    try:
        dns = TableDNS({"site.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
        ok, refused, again = get_all(dns, [f"https://site.test:{server.port}/", f"https://other.test:{server.port}/",
                                           f"https://site.test:{server.port}/again"], verify=client_tls)
        assert isinstance(ok, FetchedPage) and ok.status == 200, ok  # verified against site.test, by SNI
        assert isinstance(again, FetchedPage) and again.status == 200, again
        # other.test has the same address and site.test's connection is open, but its certificate
        # does not name other.test: refused, not sent over site.test's connection.
        assert isinstance(refused, FetchError) and refused.reason == "network", refused
        assert "certificate" in str(refused).lower(), refused
        assert [host for _, host in server.log] == [f"site.test:{server.port}"] * 2, server.log
    finally:
        server.close()
