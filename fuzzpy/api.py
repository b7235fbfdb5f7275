"""The Python API (docs/python.md): check a program and run it on pandas DataFrames.

The rules are the command line's (docs/runtime.md): the program is checked first; nothing is
read before its proven epsilon fits the budget; the epsilon is charged on the ledger before
anything runs; a run that fails keeps its charge; errors are `FuzzpyError`s whose text comes
from the program and the schema, never from the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from .diagnostics import Diagnostic, render

Program = Union[str, Path]


class Exact(Fraction):
    """An exact number the checker proved (an epsilon, a rho, a delta, a budget): a `Fraction`,
    shown with its decimal value next to it, `Fraction(35236667, 15625000) ≈ 2.25517`."""

    def __repr__(self) -> str:
        return f"Fraction({self.numerator}, {self.denominator}) ≈ {float(self):.6g}"


def _exact(x: Any) -> Any:
    """`x` as an Exact when it is a finite exact number (infinity and None stay as they are)."""
    return Exact(x) if isinstance(x, (int, Fraction)) and not isinstance(x, bool) else x


class FuzzpyError(Exception):
    """A refused check or run: `diagnostics` carry stable codes (docs/errors.md)."""

    def __init__(self, diagnostics: list[Diagnostic], sources: Optional[dict[str, str]] = None):
        self.diagnostics = list(diagnostics)
        self.codes = [d.code for d in self.diagnostics]
        super().__init__("\n".join(render(d, sources) for d in self.diagnostics))


# ---- checking ------------------------------------------------------------------------------------

@dataclass
class Mechanism:
    """One mechanism of the program, as the checker proved it, with its cost in its own notion:
    `epsilon` for a pure mechanism, `rho` (zCDP) for a Gaussian one (its epsilon is None)."""

    name: str
    location: str
    function: str
    sensitivity: Fraction
    epsilon: Optional[Fraction]
    scale: Fraction
    rho: Optional[Fraction] = None


@dataclass
class Report:
    """The checker's verdict on a program (what `fuzzpy check` prints, as objects)."""

    file: str
    ok: bool
    epsilon: Any                 # Fraction, or inf when unbounded; None without an entry point (or when
                                 # Gaussian releases need a delta to state it)
    per_input: dict[str, Any]    # entry parameter -> its pure epsilon
    budget: Optional[Fraction]
    mechanisms: list[Mechanism]
    functions: dict[str, str]    # name -> type, the program's own functions
    diagnostics: list[Diagnostic]
    text: str                    # the report as `fuzzpy check` prints it
    raw: Any = field(default=None, repr=False)  # the checker's CheckReport
    delta: Fraction = Fraction(0)  # the delta of the stated (epsilon, delta); 0 for a pure epsilon
    rho: Any = None                # the zCDP rho of all releases

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def raise_for_errors(self) -> "Report":
        if not self.ok:
            raise FuzzpyError(self.errors, self.raw.sources)
        return self

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        from .render.notebook import report_html

        return report_html(self)


def check(program: Program, *, params: Optional[Mapping[str, Any]] = None, budget: Any = None,
          entry: str = "main", delta: Any = None, rho: Any = None) -> Report:
    """Check a program given as a file path (ending in .fz) or as source text; reads no data.

    `params` override the program's public parameters (values as on the command line), `budget`
    adds E0401 when the proven epsilon exceeds it; `delta` states a program with Gaussian
    releases as (epsilon, delta) (docs/privacy-notions.md); `rho` is a budget in zCDP."""
    from .checking.program import check_file, check_source
    from .pipeline.budget import PYTHON, apply_budget

    text_params = {k: str(v) for k, v in (params or {}).items()}
    path = _as_path(program)
    raw = check_file(path, text_params, entry) if path is not None else \
        check_source(str(program), "<cell>", text_params, entry)
    apply_budget(raw, _budget(budget), _delta(delta), _budget(rho, "rho"), wording=PYTHON)
    return _report(raw)


def _delta(delta: Any) -> Optional[Fraction]:
    from .exact import parse_delta

    if delta is None:
        return None
    try:
        return parse_delta(str(delta))
    except ValueError:
        raise FuzzpyError([Diagnostic("E0701", f"delta must be a number strictly between 0 and 1, got "
                                               f"{str(delta)[:40]!r}")]) from None


def _as_path(program: Program) -> Optional[Path]:
    if isinstance(program, Path):
        return program
    text = str(program)
    return Path(text) if "\n" not in text and text.strip().endswith(".fz") else None


def _budget(budget: Any, what: str = "budget") -> Optional[Fraction]:
    from .exact import parse_exact

    if budget is None:
        return None
    try:
        value = parse_exact(str(budget))
    except ValueError:
        value = None
    if value is None or value < 0:
        raise FuzzpyError([Diagnostic("E0701", f"the {what} must be a non-negative number, got {str(budget)[:40]!r}")])
    return value


def _report(raw: Any) -> Report:
    from .render.report import report_text

    shown = report_text(raw)
    mechs = [_mechanism(m, raw.file) for m in raw.mechanisms] if raw.ok else []
    own = {f.name: f.type for f in raw.functions if f.span is None or f.span.file == raw.file}
    g = raw.guarantee
    eps = (g.epsilon if g is not None else raw.epsilon if raw.is_pure else None) if raw.entry else None
    return Report(raw.file, raw.ok, _exact(eps), {i.name: _exact(i.epsilon) for i in raw.inputs},
                  _exact(raw.budget), mechs, own, list(raw.diagnostics), shown.stderr() + shown.stdout(), raw,
                  _exact(g.stated_delta if g is not None else Fraction(0)), _exact(raw.rho) if raw.entry else None)


def _mechanism(m: Any, program: str) -> Mechanism:
    gaussian = m.name == "gaussian"
    return Mechanism(m.name, _where(m.span, program), m.function, _exact(m.sensitivity),
                     None if gaussian else _exact(m.epsilon), _exact(m.scale),
                     _exact(m.extra.get("rho", 0)) if gaussian else None)


def _where(span: Any, program: str) -> str:
    from .render.locations import relative_span

    return relative_span(span, program)


# ---- running -------------------------------------------------------------------------------------

@dataclass
class Accuracy:
    """A mechanism's accuracy statement: `what <= bound` with probability 1 - beta; for additive
    noise, `interval` is value +- bound."""

    bound: float
    beta: float
    what: str
    words: str
    interval: Optional[tuple[float, float]] = None


@dataclass
class Released:
    """One value released by a mechanism, with its cost in its own notion: `epsilon` for a pure
    mechanism, `rho` (zCDP) for a Gaussian one (its epsilon is None)."""

    label: str
    keys: tuple[str, ...]
    value: Any
    epsilon: Optional[Fraction]
    mechanism: str
    accuracy: Optional[Accuracy]
    location: Optional[str]
    rho: Optional[Fraction] = None
    # Released in an `each`: `epsilon` is per group; all `groups` of it cost `epsilon_together`.
    epsilon_together: Optional[Fraction] = None
    groups: Optional[int] = None


@dataclass
class Estimate:
    """A value computed from releases (post-processing: it costs nothing more), with what their
    accuracy implies in the user's units: a group mean with a 95% `interval` for the exact mean
    (None when there is none), an adaptively chosen clip bound (docs/runtime.md, "Estimates")."""

    label: str
    kind: str
    keys: tuple[str, ...]
    value: Any
    interval: Optional[tuple[float, float]]
    beta: float
    words: str
    sources: list[str]          # the labels of the releases it is computed from
    location: Optional[str]
    bounded: bool = True        # False: the noise bounds nothing (the interval is the clip range)


@dataclass
class Spending:
    """A dataset's total spent on the ledger after this run, and its cap (None: no cap).

    `spent` is in the notion of the cap (`notion`: "pure epsilon", "epsilon at delta D" or
    "zCDP rho"; docs/ledger.md); without a cap, the sum of the epsilons charged.  `default_cap`:
    the cap is the default one the dataset's first run set (docs/ledger.md, "The default cap")."""

    dataset: str
    spent: Any
    cap: Optional[Fraction]
    notion: Optional[str] = None
    default_cap: bool = False


@dataclass
class Result:
    """A run's released values (post-processing included) and what it cost."""

    value: Any
    releases: list[Released]
    epsilon: Fraction
    budget: Fraction
    spending: list[Spending]
    seeded: bool = False
    estimates: list[Estimate] = field(default_factory=list)

    def to_frame(self) -> Any:
        """One row per released value (label, its key columns, value, its cost: epsilon for a pure
        release, rho for a Gaussian one; for a release in an `each`, epsilon per group and
        epsilon_together for all its groups, which is what adds up; accuracy), then one per
        estimate (mechanism "estimate: KIND", epsilon 0: it costs nothing more).  Each component
        of a key has its own column, named after the field the key function read (`sex`,
        `income`), as in `--format csv`."""
        import pandas as pd

        from .render.labels import key_cells, key_columns

        cells = [dict(key_cells(x.keys)) for x in [*self.releases, *self.estimates]]
        keys = key_columns(cells)
        rows = [{"label": r.label, "value": r.value, "epsilon": None if r.epsilon is None else float(r.epsilon),
                 "epsilon_together": None if r.epsilon_together is None else float(r.epsilon_together),
                 "rho": None if r.rho is None else float(r.rho), "mechanism": r.mechanism,
                 "low": r.accuracy.interval[0] if r.accuracy and r.accuracy.interval else None,
                 "high": r.accuracy.interval[1] if r.accuracy and r.accuracy.interval else None,
                 "accuracy": r.accuracy.words if r.accuracy else None} for r in self.releases]
        rows += [{"label": e.label, "value": e.value, "epsilon": 0.0, "rho": None, "mechanism": f"estimate: {e.kind}",
                  "low": e.interval[0] if e.interval else None, "high": e.interval[1] if e.interval else None,
                  "accuracy": e.words} for e in self.estimates]
        for row, cell in zip(rows, cells):
            row.update({c: cell.get(c) for c in keys})
        columns = ["label", *keys, "value", "epsilon", "epsilon_together", "rho", "mechanism", "low", "high",
                   "accuracy"]
        return pd.DataFrame(rows, columns=columns)

    @property
    def table(self) -> Any:
        """The result as a DataFrame when it is tabular (one value per key), else None."""
        from .render.notebook import result_table

        return result_table(self.value)

    def _repr_html_(self) -> str:
        from .render.notebook import result_html

        return result_html(self)


def run(program: Program, data: Any, *, budget: Any = None, params: Optional[Mapping[str, Any]] = None,
        ledger: Union[str, Path, None] = None, entry: str = "main", seed: Optional[int] = None,
        delta: Any = None, rho: Any = None, public: Optional[Mapping[str, Any]] = None,
        allow_empty: bool = False) -> Result:
    """Check `program`, charge its cost on the ledger, run it on `data` and return what it released.

    `data` is a DataFrame (a program with one table) or a mapping from the entry point's table
    parameters to DataFrames; `public` maps each public table of the entry point (a parameter
    `bag S` of a `public schema S`) to a DataFrame, which is verified against its schema and
    never charged.  `budget` (epsilon, at `delta` for Gaussian releases) or `rho`
    (zCDP) limits this run, one of them is needed; each dataset's total is capped by the ledger
    (`fuzzpy ledger set-cap`).  `seed` is for tests only: reproducible noise, NOT private, and
    nothing is charged.  A table left without rows by conforming is refused before the charge
    (E0509), unless `allow_empty` (docs/data.md, "Empty tables")."""
    from dataclasses import replace

    from .pipeline.local import FRAME_ADVICE, FrameTables, LocalLedger, ledger_path
    from .pipeline.session import Session

    report = check(program, params=params, budget=budget, entry=entry, delta=delta, rho=rho).raise_for_errors()
    raw = report.raw
    name = Path(raw.file).name if raw.file != "<cell>" else "notebook"
    session = Session(check=lambda: raw,
                      tables=FrameTables(data, public=public, empty=replace(FRAME_ADVICE, allowed=allow_empty)),
                      charger=None if seed is not None else (lambda: LocalLedger(_ledger(ledger_path, ledger))),
                      label=f"{name}:{raw.entry}", params={k: str(v) for k, v in (params or {}).items()}, seed=seed,
                      needs_budget="a run needs a budget: pass budget=B (or rho=R)")
    outcome = session.execute()
    if not outcome.released:
        raise FuzzpyError(outcome.diagnostics or [d for d in raw.diagnostics if d.severity == "error"],
                          raw.sources)
    return _result(raw, outcome)


def _ledger(ledger_path: Any, ledger: Union[str, Path, None]) -> Path:
    return ledger_path(Path(ledger) if ledger is not None else None)


def _spending(outcome: Any) -> list[Spending]:
    """Each table's dataset total on the ledger after the run, in the notion of its cap."""
    from .ledger import describe_cap

    out = []
    for charge, use in zip(outcome.charges, outcome.usage):
        cap = use.cap
        amount = None if cap is None else (cap.rho if hasattr(cap, "rho") else cap.epsilon)
        for shown in charge.shown:
            out.append(Spending(shown, use.spent, amount, None if cap is None else describe_cap(cap), use.default))
    return out


def _result(raw: Any, outcome: Any) -> Result:
    from .render.labels import labels, location
    from .render.released import accuracy_parts, accuracy_words, cost_together, plain

    result = outcome.result
    names = labels(result.releases, raw.file, raw.sources)
    releases = []
    for r, name in zip(result.releases, names):
        bound, beta, what = accuracy_parts(r.accuracy)
        acc = None
        if bound is not None:
            interval = None
            value = plain(r.value)
            if what.startswith("|noise|") and isinstance(value, (int, float)) and not isinstance(value, bool):
                interval = (value - bound, value + bound)
            acc = Accuracy(bound, beta or 0.0, what, accuracy_words(r.accuracy, r.value), interval)
        gaussian = r.mechanism == "gaussian"
        together = cost_together(r)
        releases.append(Released(name, tuple(r.keys), _python(r.value), None if gaussian else _exact(r.epsilon),
                                 r.mechanism, acc, location(r, raw.file),
                                 _exact(r.extra.get("rho", 0)) if gaussian else None,
                                 None if together is None else _exact(together[0]),
                                 None if together is None else together[1]))
    return Result(_python(result.value), releases, _exact(raw.guarantee.epsilon), _exact(raw.budget),
                  _spending(outcome),
                  outcome.seeded is not None, _estimates(raw, getattr(result, "estimates", [])))


def _estimates(raw: Any, estimates: list) -> list[Estimate]:
    """The run's estimates as the command line's JSON states them (render/released.py)."""
    from .render.labels import estimate_labels, estimate_location, labels
    from .render.released import estimate_json

    out = []
    for e, name in zip(estimates, estimate_labels(estimates, raw.file, raw.sources)):
        js = estimate_json(e, name, estimate_location(e, raw.file), labels(list(e.sources), raw.file, raw.sources))
        interval = (js["low"], js["high"]) if js["low"] is not None and js["high"] is not None else None
        out.append(Estimate(name, e.kind, tuple(js["keys"]), _python(e.value), interval, js["beta"], js["words"],
                            js["from"], js["where"], e.bounded))
    return out


def _python(v: Any) -> Any:
    """Released values as plain Python objects (numbers as floats, tuples, dicts)."""
    from .render.released import plain

    v = plain(v)
    if isinstance(v, dict):
        return {k: _python(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return tuple(_python(x) for x in v)
    return v


__all__ = ["check", "run", "Report", "Result", "Released", "Accuracy", "Estimate", "Spending", "Mechanism",
           "FuzzpyError"]
