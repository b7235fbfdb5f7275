"""What the service does for a request, apart from HTTP: authenticate, check, run, account.

A served run is `fuzzpy run` itself (`ServedRun` subclasses its pipeline, so the order check ->
budget -> load -> charge -> run -> release and every byte of its output are the same), with
three differences: the program arrives as text, the tables come from registered datasets, and
the charge books the dataset's and the analyst's accounts together (store.py).
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

from ..diagnostics import Diagnostic, FuzzError, error
from ..interfaces.run_command import _KEPT_NOTE, _Charge, _Options, _Run, dataset_amounts, match_data, table_inputs
from ..runtime.ledger import format_exact, program_hash
from .capture import captured
from .config import Limits
from .registry import find_analyst, published_schema, schema_json, schema_problems
from .store import AnalystRecord, DatasetRecord, Store, analyst_key, dataset_key

TABLE_CACHE = 16  # conformed tables kept in memory, by (file identity, program schema)


class RequestError(Exception):
    """A request refused before any output (HTTP status and one diagnostic)."""

    def __init__(self, status: int, code: str, message: str, *notes: str) -> None:
        super().__init__(message)
        self.status = status
        self.diagnostic = Diagnostic(code, message, None, list(notes))


@dataclass
class ProgramRequest:
    program: str
    file: str = "program.fz"
    datasets: list[str] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    entry: str = "main"
    budget: Optional[str] = None
    format: str = "json"
    delta: Optional[str] = None  # the delta of an (epsilon, delta) statement, in (0, 1)


def prepare_process() -> None:
    """Settings the checker and the interpreter change around each of their threads, fixed for
    the whole process: with many checks and runs at once, one thread's "restore the old value"
    would otherwise undo another's (a check thread started with a small stack, or a recursion
    limit lowered under a deep check).  With these set first, every restore restores them."""
    import sys

    from ..limits import RECURSION_LIMIT, STACK_BYTES
    from ..primitives.registry import all_primitives

    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    threading.stack_size(STACK_BYTES)  # virtual address space, committed only as it is used
    all_primitives()


class Service:
    def __init__(self, store: Store, limits: Optional[Limits] = None, name: str = "the curator's ledger") -> None:
        prepare_process()
        self.store = store
        self.limits = limits or Limits()
        self.name = name
        self.run_slots = threading.BoundedSemaphore(self.limits.max_concurrent_runs)
        self.check_slots = threading.BoundedSemaphore(self.limits.max_concurrent_checks)
        self._tables: OrderedDict = OrderedDict()
        self._fingerprints: dict[str, tuple] = {}
        self._lock = threading.Lock()

    # ---- who and what ------------------------------------------------------------------------

    def authenticate(self, header: Optional[str]) -> AnalystRecord:
        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise RequestError(401, "E1001", "this service needs an access token: send the header "
                                             "'Authorization: Bearer TOKEN'")
        found = find_analyst(self.store.analysts(), token.strip())
        if found is None:
            raise RequestError(401, "E1002", "the access token is not recognised")
        return found

    def granted(self, who: AnalystRecord) -> list[DatasetRecord]:
        """A curator uses every dataset; an analyst those the curator gave them a cap on."""
        records = self.store.datasets()
        if who.role == "curator":
            return records
        return [r for r in records if self.store.cap(analyst_key(who.name, r.name)) is not None]

    def dataset_for(self, who: AnalystRecord, name: str) -> DatasetRecord:
        rec = self.store.dataset(name) if isinstance(name, str) else None
        # One answer for "does not exist" and "not yours": names of others' datasets stay private.
        if rec is None or (who.role != "curator" and self.store.cap(analyst_key(who.name, name)) is None):
            raise RequestError(404, "E1004", f"no dataset named {str(name)[:70]!r} is available to you")
        return rec

    def require_curator(self, who: AnalystRecord) -> None:
        if who.role != "curator":
            raise RequestError(403, "E1003", "only the curator can see every analyst's spending")

    # ---- published schemas --------------------------------------------------------------------

    def schemas(self, who: AnalystRecord) -> dict:
        return {"datasets": [schema_json(r) for r in self.granted(who)]}

    def schema(self, who: AnalystRecord, name: str) -> dict:
        return schema_json(self.dataset_for(who, name))

    # ---- check and run ------------------------------------------------------------------------

    def validate(self, who: AnalystRecord, req: ProgramRequest, formats: tuple[str, ...]) -> None:
        if req.format not in formats:
            raise RequestError(400, "E1006", f"format must be {' or '.join(formats)}, not {req.format[:20]!r}")
        size = len(req.program.encode("utf-8", "surrogatepass"))
        if size > self.limits.max_program_bytes:
            raise RequestError(413, "E1007", f"the program has {size} bytes; this service accepts at most "
                                             f"{self.limits.max_program_bytes}")
        if not req.file or len(req.file) > 255 or any(ord(c) < 32 for c in req.file):
            raise RequestError(400, "E1006", "file must be a program name of 1 to 255 printable characters")
        if not req.datasets:
            raise RequestError(400, "E1006", "name the dataset to use: dataset = NAME (or PARAMETER=NAME)")
        for item in req.datasets:
            self.dataset_for(who, item.partition("=")[2] if "=" in item else item)
        if req.budget is not None:
            from ..exact import parse_exact

            try:
                if parse_exact(req.budget) < 0:
                    raise ValueError
            except ValueError:
                raise RequestError(400, "E1006", f"budget must be a non-negative number, not {req.budget[:30]!r}") from None
        if req.delta is not None:
            from ..exact import parse_delta

            try:
                parse_delta(req.delta)
            except ValueError:
                raise RequestError(400, "E1006", f"delta must be a number strictly between 0 and 1, not "
                                                 f"{req.delta[:30]!r}") from None

    def checked(self, who: AnalystRecord, req: ProgramRequest, *, for_run: bool) -> Any:
        """The checked program, with the service's own refusals added as diagnostics: imports
        beyond the standard library (E1012) and tables whose schema does not fit (E1011)."""
        from ..checking.program import CheckReport

        problems = import_problems(req.program, req.file)
        if problems:
            report = CheckReport(req.file, {req.file: req.program}, diagnostics=problems)
            report.entry = None
            return report
        report = self._timed_check(req)
        if not report.ok or report.entry is None:
            return report
        try:
            spec = match_data(list(req.datasets), table_inputs(report))
        except FuzzError as exc:
            if not for_run:  # a run reports these at its "arguments" stage, as `fuzzpy run` does
                report.diagnostics.extend(exc.diagnostics)
            return report
        schemas = dict(table_inputs(report))
        for param, dataset in spec.items():
            rec = self.dataset_for(who, str(dataset))
            for problem in schema_problems(schemas[param], published_schema(rec.schema_source)):
                report.diagnostics.append(Diagnostic(
                    "E1011", f"table '{param}' cannot read dataset {rec.name}: {problem}", None,
                    [f"GET /v1/datasets/{rec.name}/schema shows the published schema"]))
        return report

    def _timed_check(self, req: ProgramRequest) -> Any:
        """check_source in a thread, waited for at most check_seconds.  A check that overruns
        keeps its slot until it really ends (it cannot be interrupted), so overruns cannot pile up."""
        from ..checking.program import check_source
        from ..interfaces.report import apply_budget
        from ..exact import parse_exact

        limit = self.limits.check_seconds
        if not self.check_slots.acquire(timeout=limit):
            raise RequestError(503, "E1015", "every checking slot is busy; try again later")
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                report = check_source(req.program, req.file, dict(req.params), req.entry)
                apply_budget(report, None if req.budget is None else parse_exact(req.budget),
                             None if req.delta is None else parse_exact(req.delta))
                box["report"] = report
            finally:
                self.check_slots.release()

        thread = threading.Thread(target=work, name="fuzzpy-serve-check", daemon=True)
        thread.start()
        thread.join(limit)
        if "report" not in box:
            if thread.is_alive():
                raise RequestError(422, "E1008", f"checking the program took longer than {limit:g} s; "
                                                 "nothing was read or charged")
            raise RequestError(500, "E0901", "internal error in the checker; nothing was read or charged")
        return box["report"]

    def check(self, who: AnalystRecord, req: ProgramRequest) -> dict:
        from ..interfaces import report as R
        from ..interfaces.cli import exit_code_for

        self.validate(who, req, ("text", "json", "sarif"))
        report = self.checked(who, req, for_run=False)
        with captured() as buffers:
            {"json": R.print_json, "sarif": R.print_sarif}.get(req.format, _print_text_all)([report])
        return envelope(exit_code_for(report.diagnostics), buffers, req.format, report)

    def run(self, who: AnalystRecord, req: ProgramRequest) -> dict:
        self.validate(who, req, ("text", "json"))
        if not self.run_slots.acquire(timeout=self.limits.run_seconds):
            raise RequestError(503, "E1015", "every run slot is busy; try again later")
        try:
            opts = _Options(Path(req.file), list(req.datasets), None, dict(req.params), None, None,
                            req.format, req.entry)
            served = ServedRun(opts, service=self, who=who, request=req)
            with captured() as buffers:
                code = served.execute()
            return envelope(code, buffers, req.format, served.report)
        finally:
            self.run_slots.release()

    # ---- data ---------------------------------------------------------------------------------

    def verify_file(self, rec: DatasetRecord) -> None:
        """Refuse a dataset whose file is not the one registered (E1010).  The file is hashed
        again whenever its size, times or inode change; an unchanged stat needs no re-read."""
        from ..runtime.ledger import dataset_identity

        refused = error("E1010", f"dataset {rec.name} is unavailable: its data file changed after it was registered; "
                                 "nothing was charged", None, "the curator must register the dataset again")
        try:
            st = os.stat(rec.data_path)
        except OSError:
            raise refused from None
        stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev, rec.identity)
        if self._fingerprints.get(rec.data_path) == stamp:
            return
        try:
            identity = dataset_identity(Path(rec.data_path))
        except FuzzError:
            raise refused from None
        if identity != rec.identity:
            raise refused
        self._fingerprints[rec.data_path] = stamp

    def table(self, rec: DatasetRecord, schema: Any) -> tuple[Any, Any]:
        """The dataset conformed to the program's schema (cached: loading is the slow part), and
        the group key codes kept with it across runs (runtime/kept.py: the cached table never
        changes, and its file is checked before each run)."""
        from ..runtime.data import load_identified
        from ..runtime.kept import KeptCodes

        self.verify_file(rec)
        key = (rec.identity, schema)
        with self._lock:
            if key in self._tables:
                self._tables.move_to_end(key)
                frame, kept = self._tables[key]
                return frame.copy(deep=False), kept
        try:
            frame, identity = load_identified(rec.data_path, schema, table=rec.name)
            same = identity == rec.identity  # the bytes that were parsed are the registered ones
        except Exception:  # noqa: BLE001 - never shown: messages name server paths
            same = False
        if not same:
            raise error("E1010", f"dataset {rec.name} could not be read as registered; nothing was charged",
                        None, "the curator must register the dataset again")
        kept = KeptCodes()
        with self._lock:
            self._tables[key] = (frame, kept)
            while len(self._tables) > TABLE_CACHE:
                self._tables.popitem(last=False)
        return frame.copy(deep=False), kept

    def charge(self, who: AnalystRecord, amounts: dict[str, Fraction], digest: str, label: str) -> list[int]:
        """Book every dataset's and the analyst's accounts at once, or refuse (nothing booked).
        The analyst is told their own numbers; of the dataset's total only that it is too small."""
        accounts: dict[str, Fraction] = {}
        for name, eps in amounts.items():
            accounts[dataset_key(name)] = eps
            accounts[analyst_key(who.name, name)] = eps
        try:
            return self.store.charge(accounts, digest, label)
        except FuzzError as exc:
            if not any(d.code == "E0601" for d in exc.diagnostics):
                raise
        for name, eps in amounts.items():
            cap = self.store.cap(analyst_key(who.name, name))
            spent = sum((e.epsilon for e in self.store.entries(analyst_key(who.name, name))), Fraction(0))
            if cap is not None and spent + eps > cap:
                raise error("E1014", f"this run needs epsilon {format_exact(eps)} but only "
                                     f"{format_exact(max(cap - spent, Fraction(0)))} of your cap "
                                     f"{format_exact(cap)} on dataset {name} remains; nothing was charged")
        names = ", ".join(amounts)
        raise error("E1013", f"the remaining budget of dataset {names} is too small for a run of epsilon "
                             f"{format_exact(next(iter(amounts.values())))}; nothing was charged",
                    None, "the curator sets the dataset's total cap")

    # ---- spending -----------------------------------------------------------------------------

    def run_number(self, who: AnalystRecord, dataset: str, row: int) -> int:
        """The position (from 1) of ledger row `row` among the analyst's runs on the dataset."""
        ids = [e.id for e in self.store.entries(analyst_key(who.name, dataset))]
        return ids.index(row) + 1 if row in ids else row

    def account(self, key: str, own: bool = False) -> dict:
        """Cap, spent, remaining and runs of one account.  `own`: the analyst's view, where runs
        are numbered within the account instead of by the ledger's ids (which count everyone's)."""
        runs = self.store.entries(key)
        cap = self.store.cap(key)
        spent = sum((r.epsilon for r in runs), Fraction(0))
        return {"cap": None if cap is None else format_exact(cap), "spent": format_exact(spent),
                "remaining": None if cap is None else format_exact(max(cap - spent, Fraction(0))),
                "runs": [{"id": i + 1 if own else r.id, "time": r.started_at, "finished_at": r.finished_at,
                          "program_hash": r.program_hash, "epsilon": format_exact(r.epsilon),
                          "status": r.status, "label": r.label} for i, r in enumerate(runs)]}

    def spending(self, who: AnalystRecord) -> dict:
        """The analyst's own accounts only: never the dataset's total (it sums others' spending)."""
        return {"analyst": who.name, "role": who.role,
                "datasets": [{"dataset": r.name, **self.account(analyst_key(who.name, r.name), own=True)}
                             for r in self.granted(who)]}

    def ledger_view(self, who: AnalystRecord) -> dict:
        self.require_curator(who)
        analysts = self.store.analysts()
        out = []
        for rec in self.store.datasets():
            entry = {"dataset": rec.name, "data": rec.data_path, "identity": rec.identity,
                     "registered_at": rec.registered_at, **self.account(dataset_key(rec.name))}
            entry["analysts"] = [{"analyst": a.name, **{k: v for k, v in self.account(analyst_key(a.name, rec.name)).items()
                                                        if k != "runs"}}
                                 for a in analysts if self.store.cap(analyst_key(a.name, rec.name)) is not None]
            out.append(entry)
        return {"ledger": self.store.where, "datasets": out}


def _print_text_all(reports: list) -> None:
    from ..interfaces import report as R

    for r in reports:
        R.print_text(r)


def envelope(code: int, buffers: dict, fmt: str, report: Any) -> dict:
    """What the client prints: stdout (text) or the parsed document (json, sarif), and stderr."""
    out, err = buffers["out"].getvalue(), buffers["err"].getvalue()
    body: dict[str, Any] = {"exit_code": code}
    if fmt == "text":
        body["stdout"] = out
    else:
        body["result"] = json.loads(out) if out.strip() else None
    body["stderr"] = err
    body["epsilon"] = None
    if report is not None and report.ok and report.entry is not None:
        from ..interfaces.report import exact

        body["epsilon"] = exact(report.epsilon)
    return body


def import_problems(source: str, file: str) -> list[Diagnostic]:
    """A served program may import the standard library only: any other path would be read
    from the server's disk (E1012).  Checked before anything is read."""
    from ..syntax import ast as A
    from ..syntax.loader import STDLIB, resolve_import
    from ..syntax.parser import parse_module

    module, errors = parse_module(source, file)
    if errors:
        return []  # the checker reports them
    stdlib = Path(STDLIB).resolve()
    out = []
    for decl in module.decls:
        if not isinstance(decl, A.Import) or not decl.path.endswith(".fz"):
            continue  # other paths the loader refuses without reading
        target = resolve_import(decl.path, file) if not Path(decl.path).is_absolute() else None
        inside = target is not None and Path(target).resolve().is_relative_to(stdlib)
        if not inside:
            out.append(Diagnostic("E1012", f"a served program may import only the standard library, not "
                                           f"\"{decl.path[:80]}\"", decl.span,
                                  ["put the functions you need into the program file itself"]))
    return out


# ---- the served run: `fuzzpy run`'s pipeline, fed by the service ----------------------------------

@dataclass
class ServedRun(_Run):
    service: Any = None
    who: Any = None
    request: Any = None
    _groups: dict = field(default_factory=dict)
    freeze_heap: bool = False  # runs of several analysts at once: the collector is left as it is

    def check_program(self) -> Any:
        return self.service.checked(self.who, self.request, for_run=True)

    def spending_json(self) -> list[dict]:
        # A local run shows the dataset's total spent and its cap; a served run must not (the
        # total includes other analysts' runs): the analyst's own spending is GET /v1/spending.
        return []

    def load(self, spec: dict[str, Path]) -> tuple[dict[str, Any], dict[str, str]]:
        schemas = dict(table_inputs(self.report))
        tables, identities = {}, {}
        for param, dataset in spec.items():
            rec = self.service.dataset_for(self.who, str(dataset))
            tables[param], self.kept[param] = self.service.table(rec, schemas[param])
            identities[param] = rec.name
        return tables, identities

    def charge(self, identities: dict[str, str]) -> None:
        report, o = self.report, self.opts
        source = report.sources.get(report.file, "") + "".join(
            f"\n# imported: {name}\n{text}" for name, text in sorted(report.sources.items()) if name != report.file)
        amounts = dataset_amounts(report, identities)
        self.ledger_path = self.service.name
        self.book = _Book(self.service.store, self._groups)
        ids = self.service.charge(self.who, amounts, program_hash(source, o.params),
                                  f"{self.who.name}: {o.program.name}:{report.entry}")
        for i, name in enumerate(amounts):
            group = ids[2 * i:2 * i + 2]
            # Shown as the run's number in the analyst's own account: the ledger's row ids count
            # every analyst's runs, which this analyst has no business knowing.
            number = self.service.run_number(self.who, name, group[1])
            self._groups[number] = group
            self.charges.append(_Charge(name, number, (name,)))

    def wait_for(self, handle: Any) -> None:
        from ..runtime.interpreter import RunFailure

        limit = self.service.limits.run_seconds
        if handle.wait(limit):
            return
        _stop(handle)
        failure = RunFailure("run time limit")
        failure.diagnostics = [Diagnostic("E1009", f"the run of {self.report.entry} took longer than {limit:g} s "
                                                   "and was stopped", None, [_KEPT_NOTE])]
        raise failure


class _Book:
    """The run pipeline's view of the ledger: finishing a charge finishes both its accounts."""

    def __init__(self, store: Store, groups: dict) -> None:
        self.store, self.groups = store, groups

    def finish(self, charge_id: int, status: str) -> None:
        self.store.finish(self.groups.get(charge_id, [charge_id]), status)

    def close(self) -> None:
        pass


class _Stopped(BaseException):
    """Raised inside a run that overran its time limit."""


def _stop(handle: Any) -> None:
    """Raise _Stopped in the run's thread (at its next Python instruction)."""
    thread = getattr(handle, "_thread", None)
    if thread is not None and thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(_Stopped))
