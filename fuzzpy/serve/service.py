"""What the service does for a request, apart from HTTP: authenticate, check, run, account.

A served run goes through the run pipeline every interface uses (fuzzpy/pipeline/session.py:
check -> budget -> load -> charge -> run -> release) and is printed by the same renderer as
`fuzzpy run`, with three differences: the program arrives as text, the tables come from
registered datasets (`DatasetTables`), and the charge books the dataset's and the analyst's
accounts together (`AccountCharger`), through the one charge path (pipeline/charge.py).

The privacy notion of a dataset is the curator's: its cap is in pure epsilon, in epsilon at a
delta, or in rho.  A run is stated at the smallest of the dataset's delta and the delta the
analyst's request or program asks for; a request for a larger delta, or a run whose notion does
not fit the cap's (a Gaussian release on a pure dataset), is refused with E0606 before anything
is read, and again by the ledger's cap check when it is charged (rule Notion).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

from ..diagnostics import Diagnostic, FuzzError, error
from ..ledger import describe_cap, format_exact
from ..ledger.caps import CapRefusal, notion_problem
from ..pipeline.session import KEPT_NOTE, Charge, Loaded, Session
from ..pipeline.tables import match_data, table_inputs
from .config import Limits
from .registry import find_analyst, published_schema, schema_json, schema_problems
from .store import AnalystRecord, DatasetRecord, Store, analyst_key, dataset_key

TABLE_CACHE = 16  # conformed tables kept in memory, by (file identity, program schema)
ANALYSTS_TTL_S = 1.0  # how long the registered analysts read for authentication are reused


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
    """Checks, runs and accounts for analysts' requests.  In the HTTP front it only
    authenticates and answers the light endpoints (`prepare=False`); checks and runs are done by
    the Service of a worker process (workers.py), or of this process in tests."""

    def __init__(self, store: Store, limits: Optional[Limits] = None, name: str = "the curator's ledger",
                 prepare: bool = True) -> None:
        if prepare:
            prepare_process()
        self.overran = False  # the last check or run went over its time limit (its worker is replaced)
        self.on_charge: Any = None  # called with a served run's ledger rows as soon as they are booked
        self.store = store
        self.limits = limits or Limits()
        self.name = name
        self.run_slots = threading.BoundedSemaphore(self.limits.max_concurrent_runs)
        self.check_slots = threading.BoundedSemaphore(self.limits.max_concurrent_checks)
        self._tables: OrderedDict = OrderedDict()
        self._fingerprints: dict[str, tuple] = {}
        self._lock = threading.Lock()
        self._analyst_cache: Optional[tuple[float, list[AnalystRecord]]] = None

    # ---- who and what ------------------------------------------------------------------------

    def authenticate(self, header: Optional[str]) -> AnalystRecord:
        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise RequestError(401, "E1001", "this service needs an access token: send the header "
                                             "'Authorization: Bearer TOKEN'")
        found = find_analyst(self._analysts(), token.strip())
        if found is None:
            raise RequestError(401, "E1002", "the access token is not recognised")
        return found

    def _analysts(self) -> list[AnalystRecord]:
        """The registered analysts, read from the store at most every ANALYSTS_TTL_S: a flood of
        requests must not cost a store query each (an analyst added, changed or removed with the
        commands takes effect within that time)."""
        now = time.monotonic()
        with self._lock:
            if self._analyst_cache is not None and now - self._analyst_cache[0] < ANALYSTS_TTL_S:
                return self._analyst_cache[1]
        records = self.store.analysts()
        with self._lock:
            self._analyst_cache = (now, records)
        return records

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
        return {"datasets": [self.published(r) for r in self.granted(who)]}

    def schema(self, who: AnalystRecord, name: str) -> dict:
        return self.published(self.dataset_for(who, name))

    def published(self, rec: DatasetRecord) -> dict:
        """A dataset's published schema and privacy notion (the curator's choice, public)."""
        cap = self.store.cap_of(dataset_key(rec.name))
        delta = None if cap is None or hasattr(cap, "rho") else format_exact(cap.delta)
        return {**schema_json(rec), "privacy": {"notion": None if cap is None else describe_cap(cap), "delta": delta}}

    # ---- check and run ------------------------------------------------------------------------

    def validate(self, who: AnalystRecord, req: ProgramRequest, formats: tuple[str, ...]) -> None:
        for what, text in request_strings(req):
            if not isinstance(text, str) or not _unicode(text):
                raise RequestError(400, "E1006", f"malformed request: {what} is not valid Unicode text")
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
                raise RequestError(400, "E1006",
                                   f"budget must be a non-negative number, not {req.budget[:30]!r}") from None
        if req.delta is not None:
            from ..exact import parse_delta

            try:
                parse_delta(req.delta)
            except ValueError:
                raise RequestError(400, "E1006", f"delta must be a number strictly between 0 and 1, not "
                                                 f"{req.delta[:30]!r}") from None

    def checked(self, who: AnalystRecord, req: ProgramRequest, *, for_run: bool) -> Any:
        """The checked program with its budgets applied in its datasets' notion, and the service's
        own refusals added as diagnostics: imports beyond the standard library (E1012), tables
        whose schema does not fit (E1011), and a run whose notion does not fit a dataset's (E0606)."""
        from ..checking.program import CheckReport

        problems = import_problems(req.program, req.file)
        if problems:
            report = CheckReport(req.file, {req.file: req.program}, diagnostics=problems)
            report.entry = None
            return report
        caps = self.dataset_caps(who, req)
        report = self._timed_check(req, caps)
        if report.entry is None or report.guarantee is None:  # not well-typed: nothing more to say
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
        report.diagnostics.extend(notion_refusals(report, req, caps))
        return report

    def dataset_caps(self, who: AnalystRecord, req: ProgramRequest) -> dict[str, Any]:
        """The cap of every dataset the request names (its notion is the curator's choice)."""
        names = [item.partition("=")[2] if "=" in item else item for item in req.datasets]
        return {name: self.store.cap_of(dataset_key(self.dataset_for(who, name).name)) for name in names}

    def _timed_check(self, req: ProgramRequest, caps: dict[str, Any]) -> Any:
        """check_source in a thread, waited for at most check_seconds.  A check that overruns
        keeps its slot until it really ends (it cannot be interrupted), so overruns cannot pile up."""
        from ..checking.program import check_source
        from ..exact import parse_exact
        from ..pipeline.budget import SERVICE, apply_budget

        limit = self.limits.check_seconds
        if not self.check_slots.acquire(timeout=limit):
            raise RequestError(503, "E1015", "every checking slot is busy; try again later")
        box: dict[str, Any] = {}
        delta, pragma = run_delta(req, caps)

        def work() -> None:
            try:
                report = check_source(req.program, req.file, dict(req.params), req.entry)
                apply_budget(report, None if req.budget is None else parse_exact(req.budget), delta,
                             pragma_delta=pragma, wording=SERVICE)
                box["report"] = report
            finally:
                self.check_slots.release()

        thread = threading.Thread(target=work, name="fuzzpy-serve-check", daemon=True)
        thread.start()
        thread.join(limit)
        if "report" not in box:
            if thread.is_alive():
                self.overran = True
                raise RequestError(422, "E1008", f"checking the program took longer than {limit:g} s; "
                                                 "nothing was read or charged")
            raise RequestError(500, "E0901", "internal error in the checker; nothing was read or charged")
        return box["report"]

    def check(self, who: AnalystRecord, req: ProgramRequest) -> dict:
        from ..render import report as R
        from ..render.exits import exit_code_for
        from ..render.printed import Printed

        self.validate(who, req, ("text", "json", "sarif"))
        report = self.checked(who, req, for_run=False)
        if req.format == "json":
            shown = Printed()
            shown.out(R.reports_json_text([report]))
        elif req.format == "sarif":
            shown = Printed()
            shown.out(R.sarif_text([report]))
        else:
            shown = R.report_text(report)
        shown.exit_code = exit_code_for(report.diagnostics)
        return envelope(shown, req.format, report)

    def run(self, who: AnalystRecord, req: ProgramRequest) -> dict:
        from ..pipeline.output import printed

        self.validate(who, req, ("text", "json"))
        if not self.run_slots.acquire(timeout=self.limits.run_seconds):
            raise RequestError(503, "E1015", "every run slot is busy; try again later")
        try:
            session = Session(check=lambda: self.checked(who, req, for_run=True),
                              tables=DatasetTables(self, who, list(req.datasets)),
                              charger=lambda: AccountCharger(self, who),
                              label=f"{who.name}: {Path(req.file).name}:{req.entry}", params=dict(req.params),
                              wait=self.wait_for_run)
            outcome = session.execute()
            return envelope(printed(outcome, req.format), req.format, outcome.report)
        finally:
            self.run_slots.release()

    def wait_for_run(self, handle: Any, report: Any) -> None:
        """Wait at most run_seconds; then stop the run (its charge stays) and say so (E1009)."""
        from ..runtime.interpreter import RunFailure

        limit = self.limits.run_seconds
        if handle.wait(limit):
            return
        self.overran = True
        _stop(handle)
        failure = RunFailure("run time limit")
        failure.diagnostics = [Diagnostic("E1009", f"the run of {report.entry} took longer than {limit:g} s "
                                                   "and was stopped", None, [KEPT_NOTE])]
        raise failure

    # ---- data ---------------------------------------------------------------------------------

    def verify_file(self, rec: DatasetRecord) -> None:
        """Refuse a dataset whose file is not the one registered (E1010).  The file is hashed
        again whenever its size, times or inode change; an unchanged stat needs no re-read."""
        from ..ledger import dataset_identity

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

    # ---- spending -----------------------------------------------------------------------------

    def run_number(self, who: AnalystRecord, dataset: str, row: int) -> int:
        """The position (from 1) of ledger row `row` among the analyst's runs on the dataset."""
        ids = [e.id for e in self.store.entries(analyst_key(who.name, dataset))]
        return ids.index(row) + 1 if row in ids else row

    def account(self, key: str, own: bool = False) -> dict:
        """Cap, spent, remaining and runs of one account, in the notion of its cap.  `own`: the
        analyst's view, where runs are numbered within the account instead of by the ledger's
        ids (which count everyone's)."""
        runs = self.store.entries(key)
        use = self.store.usage(key)
        cap = use.cap
        return {"notion": None if cap is None else describe_cap(cap),
                "cap": None if cap is None else format_exact(cap.rho if hasattr(cap, "rho") else cap.epsilon),
                "spent": "inf" if use.spent == float("inf") else format_exact(use.spent),
                "remaining": None if cap is None else format_exact(use.remaining),
                "runs": [{"id": i + 1 if own else r.id, "time": r.started_at, "finished_at": r.finished_at,
                          "program_hash": r.program_hash, "epsilon": format_exact(r.epsilon),
                          "delta": format_exact(r.delta), "rho": None if r.rho is None else format_exact(r.rho),
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
            entry["analysts"] = [{"analyst": a.name, **_without_runs(self.account(analyst_key(a.name, rec.name)))}
                                 for a in analysts if self.store.cap(analyst_key(a.name, rec.name)) is not None]
            out.append(entry)
        return {"ledger": self.store.where, "datasets": out}


def _without_runs(account: dict) -> dict:
    return {k: v for k, v in account.items() if k != "runs"}


def envelope(shown: Any, fmt: str, report: Any) -> dict:
    """What the client prints: stdout (text) or the parsed document (json, sarif), and stderr."""
    import json

    out, err = _server_paths_hidden(shown.stdout()), _server_paths_hidden(shown.stderr())
    body: dict[str, Any] = {"exit_code": shown.exit_code}
    if fmt == "text":
        body["stdout"] = out
    else:
        body["result"] = json.loads(out) if out.strip() else None
    body["stderr"] = err
    body["epsilon"] = None
    if report is not None and report.ok and report.entry is not None:
        from ..render.report import exact

        body["epsilon"] = exact(report.epsilon)
    return body


def _server_paths_hidden(text: str) -> str:
    """Output as an analyst sees it: the standard library as stdlib/NAME.fz, never where this
    server installed it (as a path, and as the file URI of a SARIF log)."""
    from ..stdlib_location import STDLIB

    root = Path(STDLIB).resolve()
    for prefix in (root.as_uri() + "/", str(root) + os.sep):
        text = text.replace(prefix, "stdlib/")
    return text


def request_strings(req: ProgramRequest) -> list[tuple[str, Any]]:
    """Every text an analyst sent, named as the request's fields."""
    out = [("program", req.program), ("file", req.file), ("entry", req.entry), ("format", req.format),
           ("budget", req.budget), ("delta", req.delta)]
    out += [("dataset", d) for d in req.datasets]
    out += [("params", k) for k in req.params] + [("params", v) for v in req.params.values()]
    return [(what, text) for what, text in out if text is not None]


def _unicode(text: str) -> bool:
    """Text that UTF-8 can encode: no lone surrogate (JSON's \\ud800 escapes decode to one)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# rule Notion: the delta a run is stated at follows the dataset's notion
def run_delta(req: ProgramRequest, caps: dict[str, Any]) -> tuple[Optional[Fraction], bool]:
    """The delta a run is stated at, and whether the program's delta pragma may lower it.

    A pure dataset states its runs without a delta (the request may not ask for one: E0606; the
    pragma is ignored).  A dataset capped at a delta D states them at D, or at the smaller delta
    the request or the pragma asks for.  On a rho dataset a delta only states the guarantee in
    (epsilon, delta) as well; the run is charged in rho."""
    from ..exact import parse_exact

    asked = None if req.delta is None else parse_exact(req.delta)
    if any(_is_pure(cap) for cap in caps.values()):
        return None, False
    deltas = [c.delta for c in caps.values() if c is not None and not hasattr(c, "rho")]
    if deltas:
        return min(deltas + ([asked] if asked is not None else [])), True
    return asked, True


def _is_pure(cap: Any) -> bool:
    return cap is not None and not hasattr(cap, "rho") and not cap.delta


def notion_refusals(report: Any, req: ProgramRequest, caps: dict[str, Any]) -> list[Diagnostic]:
    """E0606 for each dataset whose cap's notion the run does not fit (rule Notion): a delta
    asked for on a pure dataset or beyond a dataset's delta, a Gaussian release on a pure
    dataset.  Nothing is read or charged; the ledger's cap check refuses the same runs when
    they are charged."""
    from ..exact import parse_exact
    from ..pipeline.charge import run_cost

    out = []
    asked = None if req.delta is None else parse_exact(req.delta)
    g = report.guarantee
    cost = run_cost(report) if g is not None and g.epsilon is not None else None
    for name, cap in caps.items():
        why = None
        if cap is None:
            continue
        if asked is not None and _is_pure(cap):
            why = f"the request asks for delta {format_exact(asked)}; a run on a pure dataset has no delta"
        elif asked is not None and not hasattr(cap, "rho") and asked > cap.delta:
            why = (f"the request asks for delta {format_exact(asked)}, more than the dataset's delta "
                   f"{format_exact(cap.delta)} (a run may ask for a smaller delta, never a larger one)")
        elif _is_pure(cap) and not report.is_pure:
            why = "it makes Gaussian releases, which a pure epsilon cap does not admit"
        elif cost is not None:
            why = notion_problem(cap, cost.delta, cost.rho, cost.loss)
        if why is not None:
            out.append(Diagnostic("E0606", f"dataset {name} is budgeted in {describe_cap(cap)}, and this run "
                                           f"does not fit: {why}; nothing was read or charged", None,
                                  [f"GET /v1/datasets/{name}/schema shows the dataset's privacy notion"]))
    return out


def import_problems(source: str, file: str) -> list[Diagnostic]:
    """A served program may import the standard library only: any other path would be read
    from the server's disk (E1012).  Checked before anything is read."""
    from ..stdlib_location import STDLIB
    from ..syntax import ast as A
    from ..syntax.loader import resolve_import
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


# ---- the served run: where its tables come from, which accounts it is charged on ----------------

@dataclass
class DatasetTables:
    """The registered datasets a request names, conformed to the program's schemas (cached)."""

    service: Any
    who: Any
    datasets: list[str]

    def match(self, report: Any) -> dict[str, Any]:
        return match_data(list(self.datasets), table_inputs(report))

    def load(self, report: Any, spec: dict[str, Any], seeded: bool) -> Loaded:
        schemas = dict(table_inputs(report))
        loaded = Loaded({}, {})
        for param, dataset in spec.items():
            rec = self.service.dataset_for(self.who, str(dataset))
            loaded.tables[param], loaded.kept[param] = self.service.table(rec, schemas[param])
            loaded.accounts[param] = rec.name
            loaded.shown[param] = rec.name
        return loaded

    def close(self) -> None:
        pass


@dataclass
class AccountCharger:
    """Each dataset of a served run is booked on two accounts in one transaction: the dataset's
    (capped by the dataset's total cap) and the analyst's on it (capped by their cap).  The
    analyst is told their own numbers (E1014); of the dataset's total only that it is too small
    (E1013): it sums other analysts' spending."""

    service: Any
    who: Any
    where: str = ""

    def __post_init__(self) -> None:
        self.where = self.service.name

    def charge(self, report: Any, loaded: Loaded, label: str, params: dict[str, str]) -> list[Charge]:
        from ..pipeline.charge import charge

        datasets = list(dict.fromkeys(loaded.accounts.values()))
        # The analyst's account first: when both caps are short, the analyst learns their own.
        names = {analyst_key(self.who.name, d): f"you on dataset {d}" for d in datasets}
        names.update({dataset_key(d): f"dataset {d}" for d in datasets})
        try:
            rows = charge(self.service.store, names, report, params, label, names)
        except CapRefusal as exc:
            raise self._refusal(exc) from None
        if self.service.on_charge is not None:
            self.service.on_charge(rows)
        charges = []
        for i, name in enumerate(datasets):
            mine, total = rows[i], rows[len(datasets) + i]
            # Shown as the run's number in the analyst's own account: the ledger's row ids count
            # every analyst's runs, which this analyst has no business knowing.
            number = self.service.run_number(self.who, name, mine)
            charges.append(Charge(name, number, (name,), (mine, total)))
        return charges

    def _refusal(self, exc: CapRefusal) -> FuzzError:
        if exc.code != "E0601":
            return exc  # E0606: the run's notion; the notion is public
        if exc.account.startswith("analyst:"):
            name = exc.account.rpartition(":")[2]
            if exc.amounts is None:
                return error("E1014", exc.diagnostics[0].message.replace("you on dataset", "your cap on dataset"),
                             None, "ask the curator for a larger cap")
            unit, needed, left, cap = exc.amounts
            return error("E1014", f"this run needs {unit} {needed} but only {left} of your cap {cap} on dataset "
                                  f"{name} remains; nothing was charged", None, "ask the curator for a larger cap")
        name = exc.account.partition(":")[2]
        return error("E1013", f"the remaining budget of dataset {name} is too small for this run; nothing was "
                              "charged", None, "the curator sets the dataset's total cap")

    def finish(self, charges: list[Charge], status: str) -> None:
        self.service.store.finish_many([row for c in charges for row in c.rows], status)

    def usage(self, charge: Charge) -> Any:
        # A local run shows the dataset's total spent and its cap; a served run must not (the
        # total includes other analysts' runs): the analyst's own spending is GET /v1/spending.
        return None

    def close(self) -> None:
        pass


class _Stopped(BaseException):
    """Raised inside a run that overran its time limit."""


def _stop(handle: Any) -> None:
    """Raise _Stopped in the run's thread (at its next Python instruction)."""
    thread = getattr(handle, "_thread", None)
    if thread is not None and thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(_Stopped))
