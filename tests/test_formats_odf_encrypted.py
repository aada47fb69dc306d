"""OpenDocument files saved with a password fail as ``encrypted``, not ``corrupt`` (issue 16): one
saved by LibreOffice itself (through UNO, when the system Python has it), one built here as the
ODF spec describes (a manifest whose entries carry ``manifest:encryption-data``, content that is
AES ciphertext), and the same package unencrypted, which converts."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import zipfile
import zlib
from pathlib import Path

import pytest

from deskdex.converters import Source, convert

CONTENT = (b'<?xml version="1.0" encoding="UTF-8"?><office:document-content '
           b'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
           b'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>'
           b"<text:p>Secret okapi plans</text:p></office:text></office:body></office:document-content>")
MIME = b"application/vnd.oasis.opendocument.text"
MANIFEST_NS = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"


def _encrypt(data: bytes, password: str) -> tuple[bytes, str]:
    """ODF 1.2 encryption of one part: deflate, AES-256-CBC with a PBKDF2 key from the SHA-256 of
    the password; returns the ciphertext and the part's manifest:encryption-data element."""
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    salt, iv = os.urandom(16), os.urandom(16)
    key = hashlib.pbkdf2_hmac("sha1", hashlib.sha256(password.encode()).digest(), salt, 1000, 32)
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    packed = deflater.compress(data) + deflater.flush()
    padder = padding.PKCS7(128).padder()
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    cipher = encryptor.update(padder.update(packed) + padder.finalize()) + encryptor.finalize()
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    checksum = b64(hashlib.sha256(packed[:1024]).digest())
    element = (f'<manifest:encryption-data manifest:checksum-type="{MANIFEST_NS}#sha256-1k" '
               f'manifest:checksum="{checksum}"><manifest:algorithm manifest:algorithm-name='
               f'"http://www.w3.org/2001/04/xmlenc#aes256-cbc" manifest:initialisation-vector="{b64(iv)}"/>'
               f'<manifest:start-key-generation manifest:start-key-generation-name='
               f'"http://www.w3.org/2000/09/xmldsig#sha256" manifest:key-size="32"/>'
               f'<manifest:key-derivation manifest:key-derivation-name="PBKDF2" manifest:key-size="32" '
               f'manifest:iteration-count="1000" manifest:salt="{b64(salt)}"/></manifest:encryption-data>')
    return cipher, element


def build_odt(path: Path, password: str | None) -> Path:
    """An ODT package; with a password, content.xml is encrypted and stored as the spec asks."""
    content, encryption = (CONTENT, "") if password is None else _encrypt(CONTENT, password)
    size = f' manifest:size="{len(CONTENT)}"' if password else ""
    manifest = (f'<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="{MANIFEST_NS}" '
                f'manifest:version="1.2"><manifest:file-entry manifest:full-path="/" manifest:version="1.2" '
                f'manifest:media-type="{MIME.decode()}"/><manifest:file-entry manifest:full-path="content.xml" '
                f'manifest:media-type="text/xml"{size}>{encryption}</manifest:file-entry></manifest:manifest>')
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), MIME)  # first and stored, as the spec asks
        # An encrypted part is stored as it is (already deflated before encryption).
        zf.writestr("content.xml", content, zipfile.ZIP_STORED if password else zipfile.ZIP_DEFLATED)
        zf.writestr("META-INF/manifest.xml", manifest, zipfile.ZIP_DEFLATED)
    return path


def test_odt_with_an_encrypted_content_part_is_encrypted(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    plain = convert(Source.from_path(build_odt(tmp_path / "plain.odt", None)))[0]
    assert plain.document is not None and "Secret okapi plans" in plain.document.text(), plain.message
    outcome = convert(Source.from_path(build_odt(tmp_path / "locked.odt", "zebra")))[0]
    assert outcome.document is None and outcome.reason == "encrypted", (outcome.reason, outcome.message)
    assert "password" in outcome.message


SAVE_WITH_PASSWORD = r"""
import os, subprocess, sys, tempfile, time, uno
from com.sun.star.beans import PropertyValue
def prop(name, value):
    p = PropertyValue(); p.Name = name; p.Value = value; return p
out, profile = sys.argv[1], tempfile.mkdtemp()
pipe = "deskdex_test_%d" % os.getpid()
office = subprocess.Popen(["soffice", "--headless", "--invisible", "--norestore", "--nologo",
                           "-env:UserInstallation=file://" + profile, "--accept=pipe,name=%s;urp;" % pipe],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    for _ in range(240):
        try:
            ctx = resolver.resolve("uno:pipe,name=%s;urp;StarOffice.ComponentContext" % pipe)
            break
        except Exception:
            time.sleep(0.25)
    desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
    doc = desktop.loadComponentFromURL("private:factory/swriter", "_blank", 0, (prop("Hidden", True),))
    doc.getText().setString("Secret okapi plans")
    doc.storeToURL(uno.systemPathToFileUrl(out), (prop("FilterName", "writer8"), prop("Password", "zebra")))
    doc.close(True)
    try:
        desktop.terminate()
    except Exception:
        pass  # the bridge goes away with the office
finally:
    try:
        office.wait(timeout=30)
    except subprocess.TimeoutExpired:
        office.kill()
        office.wait()
"""


@pytest.mark.slow
def test_odt_saved_with_a_password_by_libreoffice_is_encrypted(tmp_path: Path) -> None:
    system_python = "/usr/bin/python3"
    if shutil.which("soffice") is None or not os.path.exists(system_python):
        pytest.skip("LibreOffice (soffice) is not installed")
    if subprocess.run([system_python, "-c", "import uno"], capture_output=True).returncode != 0:
        pytest.skip("the system Python has no uno module (Debian: python3-uno)")
    locked = tmp_path / "locked.odt"
    subprocess.run([system_python, "-c", SAVE_WITH_PASSWORD, str(locked)], check=True, timeout=120,
                   capture_output=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    with zipfile.ZipFile(locked) as zf:
        assert b"encryption-data" in zf.read("META-INF/manifest.xml")  # LibreOffice did encrypt it
    outcome = convert(Source.from_path(locked))[0]
    assert outcome.document is None and outcome.reason == "encrypted", (outcome.reason, outcome.message)


def test_flat_odt_is_never_taken_for_encrypted(tmp_path: Path) -> None:
    flat = tmp_path / "flat.fodt"
    flat.write_bytes(CONTENT.replace(b"office:document-content", b"office:document"))
    outcome = convert(Source.from_path(flat))[0]
    assert outcome.document is not None and "Secret okapi plans" in outcome.document.text(), outcome.message

