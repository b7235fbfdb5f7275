"""The run pipeline: check -> budget -> load -> charge -> run -> release, in that order.

Nothing is read before the program is proven within budget, nothing is charged before the data
loaded cleanly, nothing is released before the charge is committed, and a run that fails keeps
its charge.  The command line, the Python API, the Dask engine and the curator service all run
programs through `Session.execute`; they differ only in where the program's tables come from
(`Tables`), which ledger accounts a run is charged on (`Charger`), and how a run is waited for.
`Session.execute` prints nothing: it returns an `Outcome`, which `pipeline.output` renders.
Outcomes and diagnostics never contain private data: only released values, their cost and
accuracy, and messages fixed by the program text.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Protocol

from ..diagnostics import Diagnostic, FuzzError

GENERIC_FAILURE = ("the run of {entry} stopped with an internal error; no details are shown because they "
                   "could depend on the data")
KEPT_NOTE = "the epsilon charged for this run stays spent: values may have been released before the failure"
NEEDS_BUDGET = ("fuzzpy run needs a budget: pass --budget B (or --rho R) or declare it in the program with the "
                "line '# fuzzpy: budget B'")


@dataclass
class Loaded:
    """A run's tables, and the ledger account each entry parameter's table is charged on."""

    tables: dict[str, Any]
    accounts: dict[str, str]                              # entry parameter -> dataset identity
    shown: dict[str, str] = field(default_factory=dict)   # entry parameter -> how output names it
    kept: dict[str, Any] = field(default_factory=dict)    # table -> KeptCodes (runtime/kept.py)


class Tables(Protocol):
    """Where a run's private tables come from: files, DataFrames, a Dask cluster, a curator's
    registered datasets."""

    def match(self, report: Any) -> Any:
        """What each entry parameter reads (the arguments stage: nothing is read yet)."""

    def load(self, report: Any, spec: Any, seeded: bool) -> Loaded:
        """The tables, conformed to the program's schemas (the data stage)."""

    def close(self) -> None:
        """Give back what loading took (a Dask cluster), once the run is over."""


@dataclass
class Charge:
    """One booked dataset of a run: the ledger rows that book it, and how output names it."""

    dataset: str
    id: int                       # the number output shows
    shown: tuple[str, ...] = ()   # the files (or dataset names): never a hash of private rows
    rows: tuple[int, ...] = ()    # the ledger rows to finish (its own id when empty)


class Charger(Protocol):
    """Which ledger accounts a run is charged on; calls `pipeline.charge.charge`, the one path."""

    where: str  # how output names the ledger

    def charge(self, report: Any, loaded: Loaded, label: str, params: dict[str, str]) -> list[Charge]: ...
    def finish(self, charges: list[Charge], status: str) -> None: ...
    def usage(self, charge: Charge) -> Any:
        """The dataset's spending after this run (a ledger `Usage`), or None when it is not shown."""
    def close(self) -> None: ...


@dataclass
class Outcome:
    """Everything a run produced, for the renderers: how far it got and why it stopped."""

    report: Any
    stage: str = "check"              # check, arguments, data, ledger, run, released
    diagnostics: list[Diagnostic] = field(default_factory=list)
    result: Any = None                # runtime RunResult when released
    releases: list = field(default_factory=list)   # released before a failure (charged)
    estimates: list = field(default_factory=list)
    charges: list[Charge] = field(default_factory=list)
    seeded: Optional[int] = None      # the seed of a test run (not private, not charged)
    seed_warned: bool = False         # the seed warning belongs before the data stage's output
    interrupted: bool = False
    finish_problem: Optional[FuzzError] = None
    ledger: Optional[str] = None      # where it was charged
    usage: list[Any] = field(default_factory=list)  # per charge: its dataset's spending, or None

    @property
    def released(self) -> bool:
        return self.stage == "released"


def default_wait(handle: Any, report: Any) -> None:
    handle.wait()


@dataclass
class Session:
    """One run of one checked program (see the module's docstring)."""

    check: Callable[[], Any]                   # the checked program with its budgets applied
    tables: Tables
    charger: Optional[Callable[[], Charger]]   # opened at the charge stage; None: a seeded run
    label: str
    params: dict[str, str] = field(default_factory=dict)
    seed: Optional[int] = None
    wait: Callable[[Any, Any], None] = default_wait
    # One run in this process (the command line): the objects alive when the run starts are left
    # out of the cyclic garbage collector's full passes while it runs (gc.freeze: a full pass
    # over the modules, the checked program and the table cost 15 of the 130 ms of a decision
    # tree's run), and before it, while the modules are imported, the program checked and the
    # data read, the collector does not run at all (`collector_held`).  A process running
    # several programs at once does not (it is process-wide).
    freeze_heap: bool = False
    needs_budget: str = NEEDS_BUDGET

    def execute(self) -> Outcome:
        try:
            with collector_held(self.freeze_heap):
                return self._execute()
        finally:
            self.tables.close()

    def _execute(self) -> Outcome:
        report = self.check()
        outcome = Outcome(report, seeded=self.seed)
        if report.ok and report.guarantee is not None and report.guarantee.epsilon is None:
            from .budget import needs_delta

            report.diagnostics.append(needs_delta(report))  # the ledger books (epsilon, delta)
        if not report.ok:
            return outcome
        charger = None
        try:
            outcome.stage = "arguments"
            if report.budget is None and report.rho_budget is None:
                raise FuzzError(Diagnostic("E0701", self.needs_budget))
            spec = self.tables.match(report)
            outcome.seed_warned = self.seed is not None
            outcome.stage = "data"
            loaded = self.tables.load(report, spec, self.seed is not None)
            if self.seed is None and self.charger is not None:
                outcome.stage = "ledger"
                charger = self.charger()
                outcome.ledger = charger.where
                outcome.charges = charger.charge(report, loaded, self.label, self.params)
        except FuzzError as exc:
            outcome.diagnostics = list(exc.diagnostics)
            _close(charger)
            return outcome
        try:
            self._run(outcome, loaded, charger)
            if charger is not None and outcome.released:
                outcome.usage = [charger.usage(c) for c in outcome.charges]
        finally:
            _close(charger)
        return outcome

    def _run(self, outcome: Outcome, loaded: Loaded, charger: Optional[Charger]) -> None:
        from ..runtime.interpreter import RunFailure, start_run
        from ..runtime.samplers import RandomSource

        report = outcome.report
        outcome.stage = "run"
        rng = RandomSource.seeded(self.seed) if self.seed is not None else RandomSource()
        with heap_frozen(self.freeze_heap):
            handle = start_run(report.entry_instance, loaded.tables, rng, user_file=report.file, kept=loaded.kept)
            try:
                self.wait(handle, report)
                outcome.result = handle.result()
            except KeyboardInterrupt:
                outcome.interrupted = True
                _finish(charger, outcome, "failed")
                return
            except RunFailure as exc:
                _failed(outcome, charger, exc.diagnostics, handle)
                return
            except BaseException:  # noqa: BLE001 - its text could depend on the data: never shown
                diag = Diagnostic("E0604", GENERIC_FAILURE.format(entry=report.entry), None, [KEPT_NOTE])
                _failed(outcome, charger, [diag], handle)
                return
        outcome.stage = "released"
        _finish(charger, outcome, "released")


def _failed(outcome: Outcome, charger: Optional[Charger], diags: list[Diagnostic], handle: Any) -> None:
    """What was released before the failure is charged, so it is kept for output, with its
    estimates (post-processing of those releases: they reveal nothing more)."""
    outcome.diagnostics = list(diags)
    outcome.releases = list(handle.state.releases)
    outcome.estimates = list(handle.state.estimates)
    _finish(charger, outcome, "failed")


def _finish(charger: Optional[Charger], outcome: Outcome, status: str) -> None:
    if charger is None or not outcome.charges:
        return
    try:
        charger.finish(outcome.charges, status)
    except FuzzError as exc:
        outcome.finish_problem = exc


def _close(charger: Optional[Charger]) -> None:
    if charger is not None:
        charger.close()


@contextmanager
def heap_frozen(freeze: bool) -> Iterator[None]:
    """The objects alive now left out of the garbage collector's passes until the block ends,
    and the collector running meanwhile (`Session.freeze_heap`)."""
    if not freeze:
        yield
        return
    held = not gc.isenabled()
    gc.freeze()
    gc.enable()  # the run's own cycles are collected as they come
    try:
        yield
    finally:
        if held:
            gc.disable()
        gc.unfreeze()


@contextmanager
def collector_held(hold: bool) -> Iterator[None]:
    """No cyclic garbage collection in the block, outside a run (`heap_frozen` lets it run):
    start-up imports pandas, pyarrow and the checker and makes few cycles, and each of the
    collector's passes meanwhile walks a heap that only grows (5% of the instructions of a
    whole `fuzzpy run` of a Laplace count on a small file, more of its time: the passes miss
    the caches).  The few cycles start-up leaves are collected after the run."""
    if not hold or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
