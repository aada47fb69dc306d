"""A converter that misbehaves on purpose, chosen by file name: what a buggy or hostile
library could do inside a worker process (it cannot be made to happen with a real library
on demand, so this stands in for one)."""

from __future__ import annotations

import os

from deskdex.converters import plaintext


def convert(source, mime):
    if source.name.startswith("loop"):
        while True:
            pass
    if source.name.startswith("crash"):
        os.abort()
    if source.name.startswith("hog"):
        chunks = []
        while True:
            chunks.append(bytearray(64 * 2**20))
    return plaintext.convert(source, mime)
