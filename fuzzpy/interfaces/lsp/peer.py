"""The peer: one more process that checks half of a file while the server's worker thread
checks the other half.

A new value of a `param` is part of every unit's key (incremental.py), so such an edit checks
every function again: one full check, on one core.  On a machine with two cores or more the
server splits such a check (and the first check of an opened file) into two groups of units of
about equal cost, sends one group to the peer, checks the other in its worker thread meanwhile,
and merges the two results as it merges units' results.

The peer is started with the server and warmed in the background (its imports, one small
check), so that no edit pays for its start.  Only plain data crosses: a `RunJob` (source text,
params, entry point, overlays) one way, a `UnitResult` or an error's text back.  The server
never counts on it: when it is not ready yet, still busy with an older version's group, dead,
answering with an error or slower than `wait_limit`, the server checks that group itself (the
diagnostics are the same) and starts a new peer.  There is never more than one; it ends with
the server, and by itself when the server's end of its pipe closes (the server was killed).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable, Optional

from .analysis import UnitResult
from .incremental import WARM_UP_PROGRAM, RunJob, make_executor, run_check

log = logging.getLogger("fuzzpy.lsp")

# How long a new group waits for the peer to finish the group of a version that was superseded
# meanwhile (the two halves of a check end at about the same time), before the peer is replaced.
BUSY_WAIT = 0.05
# How long the server waits for the peer's group once its own is done: at least PEER_MIN_WAIT
# seconds (the peer parses its half of a newly opened file, which the server had parsed before),
# and at least PEER_WAIT_FACTOR times as long as its own group took.
PEER_MIN_WAIT = 1.0
PEER_WAIT_FACTOR = 3.0
NICENESS = 5  # added to the peer's niceness (lower priority than the server's own thread)
POLL = 0.005  # seconds between two looks at whether a newer version superseded the wait
CLOSE_WAIT = 1.0  # seconds a closing peer gets to end by itself before it is killed
MAX_FAILURES = 5  # peers replaced in a row without one getting ready: then the server stops trying


def core_to_spare() -> bool:
    """Whether the machine has a core the peer can use: the 1-minute load average is below the
    number of cores.  On a busy machine the two halves only take turns with each other (and the
    peer's parse of an opened file is extra work): measured at load 4-6 on 2 cores, a half
    checked beside the peer took as long as a whole check alone."""
    try:
        return os.getloadavg()[0] < (os.cpu_count() or 1)
    except (AttributeError, OSError):  # no load average here: assume the cores are free
        return True


class Peer:
    """The server's side of the peer process: start, hand over a group, take its result back,
    replace the process when it fails.  Used by one thread at a time (the server's worker)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: Optional[subprocess.Popen] = None
        self.conn: Optional[Any] = None
        self.ready = False                  # warmed up: it said "ready"
        self.pending: Optional[int] = None  # the ticket of the group it is checking
        self.tickets = 0
        self.closed = False
        self.starts = 0
        self.failures = 0  # replaced in a row since a peer last got ready

    def core_to_spare(self) -> bool:
        """Whether handing it work can help now (`core_to_spare`)."""
        return core_to_spare()

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        """Start the process (its imports and warm-up go on in the background)."""
        with self.lock:
            self._start()

    def _start(self) -> None:
        if self.closed:
            return
        # A fresh interpreter (never a fork of a process running threads) with this one's import
        # path, talking over a socket pair; its stdout is this process's stderr, never the
        # editor's protocol stream.
        try:
            ours, theirs = socket.socketpair()
            try:
                process = subprocess.Popen(
                    [sys.executable, "-c", _BOOT, json.dumps(sys.path), str(theirs.fileno())],
                    pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=2)
            finally:
                theirs.close()
        except Exception:  # noqa: BLE001 - no peer on this system (no fds to pass): one core, as before
            log.exception("could not start the peer process: checking on one core")
            self.closed = True
            return
        self.process, self.conn, self.ready, self.pending = process, Connection(ours.detach()), False, None
        self.starts += 1
        log.info("started the peer process %s", process.pid)

    def _stop(self) -> None:
        conn, process = self.conn, self.process
        self.process, self.conn, self.ready, self.pending = None, None, False, None
        if conn is not None:
            conn.close()
        if process is not None:
            _end(process, 0)

    def _replace(self, why: str) -> None:
        self._stop()
        self.failures += 1
        if self.failures > MAX_FAILURES:
            log.error("the peer process %s, and %d peers before it failed: checking on one core from now on",
                      why, MAX_FAILURES)
            self.closed = True
            return
        log.warning("the peer process %s: its group is checked here, and a new peer is started", why)
        self._start()

    def submit(self, job: RunJob) -> Optional[int]:
        """Hand `job` to the peer; its ticket, or None when the peer cannot take it now (then
        the caller checks everything itself)."""
        with self.lock:
            if self.closed:
                return None
            try:
                if self.process is None and self.starts == 0:
                    self._start()  # not started with the server (no core to spare then)
                    return None
                if self.process is None or self.process.poll() is not None:
                    self._replace("is not running")
                    return None
                if not self.ready and not self._take_ready():
                    return None
                if self.pending is not None and not self._drain(BUSY_WAIT):
                    self._replace("was still checking a superseded version")
                    return None
                self.tickets += 1
                self.conn.send(("check", self.tickets, job))  # type: ignore[union-attr]
                self.pending = self.tickets
                return self.tickets
            except Exception as exc:  # noqa: BLE001 - a broken pipe, a bad message: never the check's problem
                self._replace(f"failed ({type(exc).__name__}: {exc})")
                return None

    def wait_ready(self, timeout: float) -> bool:
        """Whether the peer is warmed up within `timeout` seconds (for tests and benchmarks:
        the server never waits for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.ready or (self.conn is not None and self._take_ready()):
                    return True
            time.sleep(POLL)
        return False

    def prepare(self, text: str, file: str, overlays: Optional[dict[str, str]]) -> bool:
        """Have the peer parse a file it has not seen (an opened file), while the server parses
        it too: its half of the first check then finds its chunks parsed.  No answer comes;
        whether it was sent (not when the peer is not ready)."""
        with self.lock:
            if self.closed or self.conn is None or not (self.ready or self._take_ready()):
                return False
            try:
                self.conn.send(("parse", 0, (text, file, overlays)))
                return True
            except Exception:  # noqa: BLE001 - the next `submit` finds out and replaces it
                return False

    def _take_ready(self) -> bool:
        if not self.conn.poll(0):  # type: ignore[union-attr]
            return False  # still starting: this check runs on one core
        kind = self.conn.recv()[0]  # type: ignore[union-attr]
        if kind != "ready":
            raise RuntimeError(f"it said {kind!r} first")
        self.ready, self.failures = True, 0
        return True

    def _drain(self, timeout: float) -> bool:
        """Drop the results of superseded groups; whether the peer is free within `timeout`."""
        deadline = time.monotonic() + timeout
        while self.pending is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not self.conn.poll(left):  # type: ignore[union-attr]
                return False
            if self.conn.recv()[1] == self.pending:  # type: ignore[union-attr]
                self.pending = None
        return True

    def result(self, ticket: int, own_seconds: float,
               stop: Optional[Callable[[], bool]] = None) -> Optional[UnitResult]:
        """The result of the group of `ticket`, waited for once the server's own group (which
        took `own_seconds`) is done; None when the peer failed (or took too long: it is then
        replaced) or when `stop()` turned true (a newer version came: the result is dropped
        when it arrives)."""
        wait_limit = max(PEER_MIN_WAIT, PEER_WAIT_FACTOR * own_seconds)
        deadline = time.monotonic() + wait_limit
        with self.lock:
            while self.pending == ticket and self.conn is not None:
                if stop is not None and stop():
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    self._replace(f"took more than {wait_limit:.1f} s")
                    return None
                try:
                    if not self.conn.poll(min(POLL, left)):
                        continue
                    kind, number, payload = self.conn.recv()
                except Exception as exc:  # noqa: BLE001 - it died, or sent something unreadable
                    self._replace(f"failed ({type(exc).__name__}: {exc})")
                    return None
                if number != ticket:
                    continue  # a superseded group's
                self.pending = None
                if kind == "ok":
                    return payload
                log.warning("the peer's check failed; its group is checked here:\n%s", payload)
            return None

    def close(self) -> None:
        """End the process (with the server): its pipe closes, so it ends by itself; killed if
        it does not within `CLOSE_WAIT` seconds (busy with a long check)."""
        self.closed = True
        conn, process = self.conn, self.process
        if conn is not None:
            conn.close()
        if process is not None:
            _end(process, CLOSE_WAIT)


def _end(process: subprocess.Popen, grace: float) -> None:
    """Wait `grace` seconds for the process to end, then kill it; never leaves a zombie."""
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# The peer's command line: this process's import path, then the descriptor of its socket.
_BOOT = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
         "from fuzzpy.interfaces.lsp.peer import serve_descriptor; serve_descriptor(int(sys.argv[2]))")


def serve_descriptor(fd: int) -> None:
    """The peer process's entry: `serve` on the socket it inherited as descriptor `fd`, at a
    lower priority than the server (`NICENESS`): on an idle core it runs at full speed, and on
    a busy machine its start does not slow the server's first checks."""
    try:
        os.nice(NICENESS)
    except (AttributeError, OSError):
        pass
    serve(Connection(fd))


def serve(conn: Any) -> None:
    """The peer process: warm up, say "ready", then check each group it receives and send the
    result back (parse each file it is sent, answering nothing), until the server's end of the
    pipe closes."""
    executor = make_executor()  # checks need a thread with a large stack
    try:
        executor.submit(_warm_up).result()
        conn.send(("ready", os.getpid(), None))
        while True:
            try:
                kind, ticket, payload = conn.recv()
            except (EOFError, OSError):
                return  # the server ended
            if kind == "parse":
                executor.submit(_parse, *payload).result()
                continue
            try:
                conn.send(("ok", ticket, executor.submit(run_check, payload).result()))
            except (EOFError, OSError):
                return
            except Exception:  # noqa: BLE001 - the server checks the group itself and logs why
                conn.send(("error", ticket, traceback.format_exc()))
    except (EOFError, OSError):
        return
    finally:
        executor.shutdown(wait=False)


def _parse(text: str, file: str, overlays: Optional[dict[str, str]]) -> None:
    from ...syntax.loader import load_program

    try:
        load_program(text, file, overlays)  # fills the parser's cache of declaration chunks
    except Exception:  # noqa: BLE001 - only a head start: the check parses what is missing
        log.debug("the peer could not parse %s ahead", file, exc_info=True)


def _warm_up() -> None:
    """Import what a check needs and build the parser before the first group comes."""
    run_check(RunJob(WARM_UP_PROGRAM, "<fuzzpy-lsp peer warm-up>", {}, "main", None, None, None))
