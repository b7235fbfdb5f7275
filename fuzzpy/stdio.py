"""Standard output belongs to fuzzpy's own output (reports, JSON, SARIF, the LSP stream) alone.

Some dependencies print to the process's standard output from C or C++, where `sys.stdout`
cannot intercept it: HiGHS prints a two-line banner the first time it solves, whatever
`msg=False` says.  One such line in `--format json` output, or in the language server's
JSON-RPC stream, breaks the client reading it.  So redirection happens at the file-descriptor
level:

* `stdout_to_stderr()` points descriptor 1 at stderr around a call, then
  restores it.  A lock serialises callers, so concurrent solves restore the right descriptor.
* `stdout_discarded()` does the same but sends descriptor 1 to /dev/null; the LP solve uses it,
  since the banner is noise on stderr too.
* `reserve_stdout()` does it for the rest of the process and returns a private duplicate of
  the original stdout for the one writer that owns it (`fuzzpy lsp`).  Whatever anything else
  prints then reaches stderr, never the protocol stream.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
import threading
from types import TracebackType
from typing import BinaryIO, Optional

STDIN, STDOUT, STDERR = 0, 1, 2
_LOCK = threading.RLock()


def _flush_all() -> None:
    """Flush Python's and C's stdio buffers, so text lands where descriptor 1 points now."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed or broken: nothing buffered can be delivered
            pass
    _c_fflush()


@functools.lru_cache(maxsize=1)
def _libc() -> Optional[ctypes.CDLL]:
    try:
        return ctypes.CDLL(None if os.name == "posix" else ctypes.util.find_library("c"))
    except (OSError, TypeError):
        return None


def _c_fflush() -> None:
    libc = _libc()
    try:
        if libc is not None:
            libc.fflush(None)  # every C stdio stream (C++ iostreams sync with them by default)
    except (OSError, AttributeError):
        pass


def _point_stdout_away(discard: bool = False) -> None:
    """Descriptor 1 -> stderr (or /dev/null when discarding or when there is no stderr)."""
    if not discard:
        try:
            os.dup2(STDERR, STDOUT)
            return
        except OSError:
            pass
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, STDOUT)
    finally:
        os.close(null)


class stdout_to_stderr:
    """Context manager: while it is active, anything written to descriptor 1 goes to stderr."""

    discard = False

    def __init__(self) -> None:
        self._saved: Optional[int] = None

    def __enter__(self) -> "stdout_to_stderr":
        _LOCK.acquire()
        try:
            _flush_all()
            self._saved = os.dup(STDOUT)
            _point_stdout_away(self.discard)
        except OSError:  # no descriptor 1 at all: nothing to protect
            if self._saved is not None:
                os.close(self._saved)
            self._saved = None
        except BaseException:
            _LOCK.release()
            raise
        return self

    def __exit__(self, kind: Optional[type], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        try:
            if self._saved is not None:
                _flush_all()  # what the call printed goes to stderr, not later to stdout
                os.dup2(self._saved, STDOUT)
                os.close(self._saved)
                self._saved = None
        finally:
            _LOCK.release()


class stdout_discarded(stdout_to_stderr):
    """Context manager: while it is active, anything written to descriptor 1 is discarded.

    For the LP solve: HiGHS's copyright banner is noise to a user reading the report in a
    terminal, on either stream; with `msg=False` the solver reports failures by status, not text."""

    discard = True


def reserve_stdout() -> tuple[BinaryIO, BinaryIO]:
    """For the rest of the process, descriptor 1 is stderr and descriptor 0 is /dev/null;
    returns private (stdin, stdout) binary streams on the original descriptors.

    The duplicates are not inherited by child processes, so a solver started as a subprocess
    cannot read from or write to the protocol stream either."""
    with _LOCK:
        _flush_all()
        out_fd = os.dup(STDOUT)
        in_fd = os.dup(STDIN)
        _point_stdout_away()
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, STDIN)
        finally:
            os.close(null)
    return os.fdopen(in_fd, "rb"), os.fdopen(out_fd, "wb")
