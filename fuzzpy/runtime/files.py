"""Opening data files safely: only regular files, checked before anything reads them.

A FIFO, a terminal or another character device given as `--data` (or a link to one) would make
a read block forever, or never end.  `open_regular` looks at what the name points to before
opening it, opens without blocking, and checks the open descriptor again, so a name swapped in
between cannot slip through.  Used for hashing a dataset (runtime/ledger.py) and for loading it
(runtime/data.py).
"""

from __future__ import annotations

import os
import stat
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
