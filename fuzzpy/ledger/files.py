"""File operations that let the ledger's files be complete or absent: a new temporary file
beside its target (then linked or renamed into place), and fsync of files and folders."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def exists(path: Path) -> bool:
    """Anything at `path`, a dangling link included."""
    return path.exists() or path.is_symlink()


def new_temp(beside: Path) -> Path:
    """A new empty file next to `beside`, with the permissions SQLite gives a new database
    (0644, less the umask; mkstemp's 0600 would lock other users out of a shared ledger)."""
    while True:
        tmp = beside.parent / f".{beside.name}.{secrets.token_hex(6)}.new"
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return tmp
        except FileExistsError:
            continue


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_folder(folder: Path) -> None:
    """Make a new directory entry durable (best effort: not every system can open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
