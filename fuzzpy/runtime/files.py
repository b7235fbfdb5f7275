"""Opening data files safely: only regular files, checked before anything reads them.

A FIFO, a terminal or another character device given as `--data` (or a link to one) would make
a read block forever, or never end.  `open_regular` looks at what the name points to before
opening it, opens without blocking, and checks the open descriptor again, so a name swapped in
between cannot slip through.  Used for hashing a dataset (fuzzpy/ledger) and for loading it
(runtime/data.py), which hashes the bytes as it parses them (`HashingReader`), or, for a file
parsed from a snapshot in memory, on another thread while it parses (`BackgroundIdentity`), or,
for a Parquet file parsed from itself while its state vouches for its bytes, on another thread
reading the file by offset (`StreamedIdentity`, runtime/digest_cache.py).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import threading
from pathlib import Path
from typing import BinaryIO

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


class NotARegularFile(OSError):
    """The name exists but is a folder, FIFO, socket or device: never read as data."""


def is_regular(path: Path) -> bool:
    """A regular file, after following links (False when missing or unreadable)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for binary reading, if it is a regular file.

    Raises FileNotFoundError, NotARegularFile, or another OSError (permissions...)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise NotARegularFile(f"{path} is not a regular file")
    fd = os.open(path, _FLAGS)  # O_NONBLOCK: even a FIFO swapped in now cannot block the open
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotARegularFile(f"{path} is not a regular file")
        return os.fdopen(fd, "rb")  # O_NONBLOCK has no effect on a regular file's reads
    except BaseException:
        os.close(fd)
        raise


def identity(digest: "hashlib._Hash") -> str:
    """A dataset's identity: "sha256:<hex>" of the file's bytes."""
    return "sha256:" + digest.hexdigest()


class HashingReader(io.RawIOBase):
    """A file read from its start, hashing every byte on its way to the parser: the identity
    is of exactly the bytes that were parsed, so a file edited during a run cannot be charged
    under one identity and read as another, and the file is read only once."""

    def __init__(self, raw: BinaryIO, watch: bytes = b"") -> None:
        self._raw = raw
        self._digest = hashlib.sha256()
        self._watch = watch
        self.seen = False  # whether `watch` occurred in what was read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        n = self._raw.readinto(buffer) or 0
        view = memoryview(buffer)[:n]
        self._digest.update(view)
        if self._watch and not self.seen:  # searched without copying, until the first sighting
            self.seen = re.search(re.escape(self._watch), view) is not None
        return n

    def identity(self) -> str:
        """The identity of the whole file (whatever the parser left unread is read now)."""
        while chunk := self._raw.read(1 << 20):
            self._digest.update(chunk)
        return identity(self._digest)


def read_whole(raw: BinaryIO) -> bytearray:
    """Every byte of an open file from where it stands, in one buffer sized from the file's
    length (a file that needs random access, such as Parquet, is parsed from this snapshot, so
    the bytes hashed are the bytes parsed even if the file changes meanwhile)."""
    size = max(os.fstat(raw.fileno()).st_size - raw.tell(), 0)
    buffer = bytearray(size)
    with memoryview(buffer) as view:
        filled = 0
        while filled < size and (got := raw.readinto(view[filled:])):
            filled += got
    del buffer[filled:]  # the file shrank while it was read
    buffer += raw.read()  # or grew
    return buffer


class BackgroundIdentity:
    """The identity of a snapshot, hashed on another thread while this one parses the same
    bytes: hashlib lets go of the interpreter lock on large buffers, so on two cores hashing
    costs no time of its own."""

    def __init__(self, data: bytearray) -> None:
        self._digest = hashlib.sha256()
        self._thread = threading.Thread(target=self._digest.update, args=(data,), daemon=True)
        self._thread.start()

    def result(self) -> str:
        self._thread.join()
        return identity(self._digest)


class StreamedIdentity:
    """The identity of an open file's bytes, read with pread (which leaves the file's position to
    the parser reading it meanwhile) and hashed on another thread: no copy of the whole file is
    held.  It is the identity of the bytes parsed only if the file did not change meanwhile,
    which the caller verifies (runtime/digest_cache.py)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._digest = hashlib.sha256()
        self._failed = False
        self._thread = threading.Thread(target=self._hash, daemon=True)
        self._thread.start()

    def _hash(self) -> None:
        offset = 0
        try:
            while chunk := os.pread(self._fd, 1 << 20, offset):
                self._digest.update(chunk)
                offset += len(chunk)
        except OSError:
            self._failed = True

    def result(self) -> str | None:
        """The identity, or None when the file could not be read."""
        self._thread.join()
        return None if self._failed else identity(self._digest)
