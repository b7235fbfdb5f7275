"""Where the service checks and runs programs: worker processes, shared fairly among analysts.

The HTTP front (gate, API, light endpoints) never checks or runs a program itself.  Each check
and run goes to one of `workers` processes, each with its own `Service` (store connection,
table cache), one request at a time.  So:

* **a crash stays with its request**: a worker that dies (a segmentation fault in a library, the
  memory limit of the system) is replaced; its request is answered E1022, and a run charged
  before it died keeps its charge (its ledger rows are finished as "failed");
* **time limits hold on wall time**: from the moment a worker takes it, a check gets
  `check_seconds`, a run `check_seconds` for its check and then `run_seconds` for its run; the
  worker stops an overrun itself (E1008, E1009 with what was released), and a worker that cannot
  (stuck in one long library call) is killed GRACE_S after the total (E1008, or E1009 "stopped
  after its charge"); a worker whose request overran is replaced;
* **one analyst cannot starve the others**: an analyst has at most `per_analyst` requests in
  workers and `queue_per_analyst` waiting (beyond: 429 E1021 at once); a free worker takes the
  next request of the next analyst in turn (round robin over analysts with waiting requests),
  so with N busy analysts each gets about 1/N of the workers; a request waits at most
  `queue_seconds` for a worker (503 E1015).

Everything here runs on the event loop's thread except `Worker.exchange`, which waits for a
worker in a thread of its own.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Optional

from ..diagnostics import Diagnostic, FuzzError

GRACE_S = 5.0          # a worker that has not answered GRACE_S after its limit is killed
READY_TIMEOUT_S = 120.0  # how long a new worker may take to import fuzzpy and open its store


@dataclass
class Reply:
    kind: str                        # done, refused, fuzz, internal, overran, crashed
    payload: tuple = ()
    charged: Optional[list[int]] = None  # the ledger rows a run booked before it ended
    overran: bool = False


# ---- the worker process ------------------------------------------------------------------------

def worker_main(conn: Any, where: str, limits: Any, name: str) -> None:
    """A worker's life: open its own store, then answer requests one at a time until the front
    goes away (its end of the pipe closes)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the front decides when workers stop
    _die_with_parent()
    from .service import RequestError, Service
    from .store import open_store

    service = Service(open_store(where), limits, name)
    conn.send(("ready",))
    while True:
        try:
            kind, who, req = conn.recv()
        except (EOFError, OSError):
            return
        service.overran = False
        service.on_charge = lambda rows: conn.send(("charged", list(rows)))
        try:
            body = service.check(who, req) if kind == "check" else service.run(who, req)
            conn.send(("done", (body,), service.overran))
        except RequestError as exc:
            conn.send(("refused", (exc.status, exc.diagnostic.to_json()), service.overran))
        except FuzzError as exc:
            conn.send(("fuzz", tuple(d.to_json() for d in exc.diagnostics), False))
        except Exception as exc:  # noqa: BLE001 - only its type is shown: its text could quote data
            conn.send(("internal", (type(exc).__name__,), False))


def _die_with_parent() -> None:
    """A worker must not outlive the front (killed with -9, it cannot stop its workers): on Linux
    the kernel kills the worker with it; elsewhere a thread watches for the front to go away."""
    import os
    import threading

    parent = os.getppid()
    try:
        import ctypes

        if ctypes.CDLL(None).prctl(1, 9) == 0:  # PR_SET_PDEATHSIG, SIGKILL
            if os.getppid() == parent:
                return
            os._exit(1)  # the front died before the call
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="fuzzpy-worker-watch", daemon=True).start()


class Worker:
    """One worker process and the front's end of its pipe."""

    def __init__(self, ctx: Any, where: str, limits: Any, name: str) -> None:
        self._args = (ctx, where, limits, name)
        self._start()

    def _start(self) -> None:
        ctx, where, limits, name = self._args
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(child, where, limits, name), daemon=True,
                                name="fuzzpy-serve-worker")
        self.proc.start()
        child.close()
        self.ready = False

    def restart(self) -> None:
        self.stop()
        self._start()

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)
        self.conn.close()

    def exchange(self, message: tuple, seconds: float) -> Reply:
        """Send one request and wait for its answer, at most `seconds` once the worker is ready
        (blocking: called in a thread)."""
        if not self.ready and not self._wait_ready():
            return Reply("crashed")
        try:
            self.conn.send(message)
        except (OSError, ValueError):
            return Reply("crashed")
        deadline = time.monotonic() + seconds
        charged = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Reply("overran", charged=charged)
            try:
                if not self.conn.poll(min(remaining, 1.0)):
                    continue
                kind, *rest = self.conn.recv()
            except (EOFError, OSError):
                return Reply("crashed", charged=charged)
            if kind == "charged":
                charged = rest[0]
                continue
            return Reply(kind, rest[0], charged, bool(rest[1]))

    def _wait_ready(self) -> bool:
        try:
            if self.conn.poll(READY_TIMEOUT_S) and self.conn.recv() == ("ready",):
                self.ready = True
        except (EOFError, OSError):
            pass
        return self.ready


# ---- the front's side: admission, fairness, limits ----------------------------------------------

@dataclass
class _Ticket:
    analyst: str
    kind: str
    message: tuple
    assigned: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class WorkerPool:
    """The workers and the waiting requests of every analyst (see the module's docstring)."""

    def __init__(self, where: str, limits: Any, name: str, store: Any) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # the front runs threads: never fork it
        self.limits, self.store = limits, store
        self.workers = [Worker(ctx, where, limits, name) for _ in range(limits.workers)]
        self.idle = list(self.workers)
        self.queues: dict[str, deque[_Ticket]] = {}
        self.turns: deque[str] = deque()  # analysts with waiting requests, in the order they are served
        self.active: Counter = Counter()  # requests in workers, per analyst
        self.kinds: Counter = Counter()   # requests in workers, per kind

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()

    async def submit(self, who: Any, kind: str, req: Any) -> dict:
        """The answer of a worker to one check or run (raises RequestError or FuzzError)."""
        from starlette.concurrency import run_in_threadpool

        from .service import RequestError

        ticket = self._enqueue(who, kind, (kind, who, req))
        try:
            worker = await asyncio.wait_for(asyncio.shield(ticket.assigned), self.limits.queue_seconds)
        except asyncio.TimeoutError:
            if not ticket.assigned.done():
                self._withdraw(ticket)
                raise RequestError(503, "E1015", f"no worker was free for {self.limits.queue_seconds:g} s; nothing "
                                                 "was read or charged; try again later") from None
            worker = ticket.assigned.result()
        except BaseException:  # the client went away while waiting
            self._withdraw(ticket)
            raise
        # A run is checked first: its check has check_seconds, its run run_seconds (the worker
        # enforces each); the front stops the worker only GRACE_S after both.
        limit = self.limits.check_seconds + (self.limits.run_seconds if kind == "run" else 0)
        try:
            reply = await run_in_threadpool(worker.exchange, ticket.message, limit + GRACE_S)
            if reply.kind in ("overran", "crashed") or reply.overran:
                await run_in_threadpool(worker.restart)
            return await self._answer(reply, kind, req, limit)
        finally:
            self._release(ticket, worker)

    # -- admission and turns ------------------------------------------------------------------

    def _enqueue(self, who: Any, kind: str, message: tuple) -> _Ticket:
        from .service import RequestError

        name = who.name
        waiting = self.queues.setdefault(name, deque())
        if len(waiting) >= self.limits.queue_per_analyst:
            raise RequestError(429, "E1021", f"you already have {len(waiting)} requests waiting for a worker (at most "
                                             f"{self.limits.queue_per_analyst}); wait for them to finish")
        ticket = _Ticket(name, kind, message)
        waiting.append(ticket)
        if name not in self.turns:
            self.turns.append(name)
        self._dispatch()
        return ticket

    def _withdraw(self, ticket: _Ticket) -> None:
        waiting = self.queues.get(ticket.analyst)
        if waiting is not None and ticket in waiting:
            waiting.remove(ticket)
            self._forget_if_done(ticket.analyst)

    def _release(self, ticket: _Ticket, worker: Worker) -> None:
        self.active[ticket.analyst] -= 1
        self.kinds[ticket.kind] -= 1
        self.idle.append(worker)
        self._dispatch()

    def _dispatch(self) -> None:
        """Give free workers to waiting requests: the next analyst in turn whose request may run."""
        while self.idle and self.turns:
            for _ in range(len(self.turns)):
                name = self.turns[0]
                self.turns.rotate(-1)
                waiting = self.queues[name]
                if waiting and self._may_start(name, waiting[0].kind):
                    ticket = waiting.popleft()
                    self._forget_if_done(name)
                    self.active[name] += 1
                    self.kinds[ticket.kind] += 1
                    ticket.assigned.set_result(self.idle.pop())
                    break
            else:
                return  # every waiting request is held back by its analyst's or its kind's limit

    def _may_start(self, analyst: str, kind: str) -> bool:
        per_kind = self.limits.max_concurrent_checks if kind == "check" else self.limits.max_concurrent_runs
        return self.active[analyst] < self.limits.per_analyst and self.kinds[kind] < per_kind

    def _forget_if_done(self, analyst: str) -> None:
        if not self.queues.get(analyst):
            self.queues.pop(analyst, None)
            if analyst in self.turns:
                self.turns.remove(analyst)

    # -- answers --------------------------------------------------------------------------------

    async def _answer(self, reply: Reply, kind: str, req: Any, limit: float) -> dict:
        from starlette.concurrency import run_in_threadpool

        from ..pipeline.session import KEPT_NOTE
        from .service import RequestError

        if reply.kind == "done":
            return reply.payload[0]
        if reply.kind == "refused":
            status, diag = reply.payload
            raise RequestError(status, diag["code"], diag["message"], *diag.get("notes", []))
        if reply.kind == "fuzz":
            raise FuzzError([Diagnostic(d["code"], d["message"], None, list(d.get("notes", [])))
                             for d in reply.payload])
        if reply.kind == "internal":
            raise RequestError(500, "E0901", f"internal error in the service ({reply.payload[0]}); no details are "
                                             "shown, because they could contain private data")
        charged = bool(reply.charged)
        if charged:  # a run stopped from outside after its charge: it stays spent, marked failed
            await run_in_threadpool(self.store.finish_many, reply.charged, "failed")
        after = KEPT_NOTE if charged else "nothing was read or charged" if kind == "check" else "nothing was charged"
        if reply.kind == "overran" and kind == "check":
            raise RequestError(422, "E1008", f"checking the program took longer than {limit:g} s and was stopped; "
                                             "nothing was read or charged")
        if reply.kind == "overran":
            raise RequestError(504, "E1009", f"the run of {req.entry[:100]} did not end within {limit:g} s (its check "
                                             f"and its run) and was stopped{' after its charge' if charged else ''}",
                               after)
        raise RequestError(500, "E1022", f"the worker process {'running' if kind == 'run' else 'checking'} this "
                                         f"request stopped unexpectedly{' after its charge' if charged else ''}", after)
