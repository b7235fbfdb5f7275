"""Capture what fuzzpy's commands print, per thread, so the service can return exactly the
output of `fuzzpy check` / `fuzzpy run` while other requests run at the same time.

`sys.stdout` and `sys.stderr` are replaced once by proxies: a thread inside `captured()` writes
to its own buffers, every other thread to the real streams.  The commands' printing code is
reused as it is, so a served run prints what a local run prints.
"""

from __future__ import annotations

import io
import sys
import threading
from contextlib import contextmanager
from typing import Iterator, TextIO

_local = threading.local()
_install_lock = threading.Lock()


class _ThreadStream:
    """A text stream that writes to the calling thread's buffer when it has one."""

    def __init__(self, real: TextIO, which: str) -> None:
        self._real = real
        self._which = which
        self.encoding = getattr(real, "encoding", None) or "utf-8"
        self.errors = getattr(real, "errors", None) or "strict"

    def _target(self) -> TextIO:
        buffers = getattr(_local, "buffers", None)
        return buffers[self._which] if buffers is not None else self._real

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return False if getattr(_local, "buffers", None) is not None else self._real.isatty()

    def fileno(self) -> int:
        return self._real.fileno()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str):  # buffer, closed, ... of the real stream
        return getattr(self._real, name)


def install() -> None:
    """Put the proxies in place (idempotent)."""
    with _install_lock:
        if not isinstance(sys.stdout, _ThreadStream):
            sys.stdout = _ThreadStream(sys.stdout, "out")  # type: ignore[assignment]
        if not isinstance(sys.stderr, _ThreadStream):
            sys.stderr = _ThreadStream(sys.stderr, "err")  # type: ignore[assignment]


@contextmanager
def captured() -> Iterator[dict[str, io.StringIO]]:
    """Within the block, this thread's prints go to buffers["out"] and buffers["err"]."""
    install()
    buffers = {"out": io.StringIO(), "err": io.StringIO()}
    _local.buffers = buffers
    try:
        yield buffers
    finally:
        _local.buffers = None
