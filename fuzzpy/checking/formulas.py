"""Costs as formulas of the public parameters (docs/formulas.md).

The checker computes every cost exactly at the parameters' given values; nothing here changes
that number or what is accepted.  A formula is derived from the same checker: the program is
checked again, exactly, at other values of its numeric parameters, and the costs (main's
epsilon, or rho for a program with Gaussian releases, and each function's sensitivities) are
interpolated exactly (rational Lagrange interpolation on a tensor grid, degree found from
one-parameter sweeps), then confirmed at further points where every numeric parameter moves.
A formula is shown with its status:

* `exact on the declared ranges`: every parameter is an `int[lo, hi]` and the formula matched
  the checker at every point of the ranges;
* `checked`: it matched the checker at every point computed (the fit's and the confirmation's),
  which is evidence, not a proof for the values in between; the number at the given values is
  always the checker's own;
* no formula: the costs are not a polynomial of low degree (a `max`, an LP whose solution is
  piecewise, a cost infinite at some values, a check that fails at some values), or the time
  limit was reached; the reason is given instead of a formula.

sympy is imported here only, lazily, when a formula is derived: `fuzzpy check` without
`--formula` never imports this module.
"""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional

from ..typesystem.sens import INF, is_const
from ..typesystem.types import Num

MAX_DEGREE = 3          # highest degree tried in each parameter
SWEEP_POINTS = MAX_DEGREE + 2
CONFIRM_POINTS = 3      # points where every numeric parameter moves, after the fit
MAX_GRID = 64           # most grid points (checks) a fit may need
MAX_EXHAUSTIVE = 64     # most points of finite int ranges checked one by one
DEFAULT_TIMEOUT = 10.0  # seconds, for `fuzzpy check --formula`

Quantities = dict[str, Any]  # name -> Fraction, INF or None (not known at that point)


@dataclass
class Formula:
    """One cost as a formula of the public parameters."""

    name: str                      # "epsilon", "rho", or "function.param" (a sensitivity)
    value: Any                     # the checker's exact number at the given values
    expr: Any = None               # a sympy expression, or None when no formula was derived
    status: str = "none"           # "exact", "checked", "constant" or "none"
    reason: str = ""               # why there is no formula (status "none")

    @property
    def text(self) -> Optional[str]:
        return None if self.expr is None else str(self.expr)

    @property
    def latex(self) -> Optional[str]:
        if self.expr is None:
            return None
        import sympy

        return sympy.latex(self.expr)

    @property
    def symbolic(self) -> bool:
        """Whether the formula mentions a parameter (a constant one is just the number)."""
        return self.expr is not None and bool(self.expr.free_symbols)


@dataclass
class FormulaReport:
    params: dict[str, Fraction]            # the numeric parameters and their given values
    formulas: dict[str, Formula] = field(default_factory=dict)
    checks: int = 0                        # checks run to derive and confirm
    seconds: float = 0.0
    points: int = 0                        # parameter points where every formula matched the checker
    note: str = ""                         # a reason that applies to all (time limit, no parameters)

    def get(self, name: str) -> Optional[Formula]:
        return self.formulas.get(name)

    @property
    def main(self) -> Optional[Formula]:
        """main's cost: its epsilon, or its rho when it makes Gaussian releases."""
        return self.formulas.get("epsilon") or self.formulas.get("rho")


# ---- what is fitted ----------------------------------------------------------------------------


def quantities(report: Any) -> Optional[Quantities]:
    """The costs of one check, or None when the check failed (a point outside the domain)."""
    if not report.ok:
        return None
    out: Quantities = {}
    if report.entry is not None and report.inputs:
        if report.is_pure:
            out["epsilon"] = report.epsilon
        else:
            out["rho"] = report.rho
    for f in report.functions:
        if f.coefs is None or f.generic or (f.span is not None and f.span.file != report.file):
            continue
        names = _param_names(report, f)
        for i, c in enumerate(f.coefs):
            out[f"{f.name}.{names[i]}"] = c if is_const(c) else INF
        for i, g in enumerate(f.rhos or []):
            if g != 0:
                out[f"{f.name}.{names[i]}.rho"] = g if is_const(g) else INF
    return out


def _param_names(report: Any, f: Any) -> list[str]:
    return list(f.param_names) if f.param_names else [str(i + 1) for i in range(len(f.coefs))]


# ---- sampling the parameters -------------------------------------------------------------------


def _is_int(v: Fraction, t: Any) -> bool:
    return (isinstance(t, Num) and t.integer) or v.denominator == 1


def _in_range(x: Fraction, t: Any) -> bool:
    if not isinstance(t, Num):
        return True
    return (t.lo is None or x >= t.lo) and (t.hi is None or x <= t.hi)


def candidates(v: Fraction, t: Any) -> list[Fraction]:
    """Values of a parameter near its given value `v`, in the order they are tried: integers
    stay integers (a counter) on the same side of 0 (1 and above when v >= 1), other numbers
    keep their sign (an epsilon); all within the declared range."""
    out: list[Fraction] = []
    if _is_int(v, t):
        floor = Fraction(1) if v >= 1 else Fraction(0) if v == 0 else None
        if isinstance(t, Num) and t.lo is not None:
            floor = t.lo  # the declared range says which values are meant
        steps = [-1, -2, 1, -3, 2, -4, 3, 4, 5, 6]  # downwards first: a smaller counter checks faster
        for s in steps:
            x = v + s
            if floor is not None and x < floor or floor is None and x > -1:
                continue
            out.append(x)
    else:
        ratios = ["1/2", "3/2", "3/4", "5/4", "1/3", "3", "1/5", "7/4", "2/3", "9/8", "7/8", "5/3", "2/5", "11/7"]
        out = [v * Fraction(r) for r in ratios]
    return [x for x in out if _in_range(x, t)]


def _fmt_value(x: Fraction) -> str:
    """A parameter value as `--param` text (an exact constant expression)."""
    text = str(x) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
    return f"(0 - {text[1:]})" if text.startswith("-") else text


# ---- the derivation ----------------------------------------------------------------------------


class _OutOfTime(Exception):
    pass


class _Points:
    """Checks at parameter points, memoised, within a time limit."""

    def __init__(self, check: Callable[[dict[str, str]], Any], names: list[str], base: dict[str, str],
                 timeout: float) -> None:
        self.check, self.names, self.base = check, names, base
        self.cache: dict[tuple, Optional[Quantities]] = {}
        self.start = time.perf_counter()
        self.timeout = timeout
        self.longest = 0.0
        self.checks = 0

    def at(self, point: tuple) -> Optional[Quantities]:
        if point in self.cache:
            return self.cache[point]
        now = time.perf_counter()
        if now - self.start + self.longest > self.timeout:
            raise _OutOfTime()
        params = dict(self.base)
        params.update({n: _fmt_value(x) for n, x in zip(self.names, point)})
        q = quantities(self.check(params))
        self.longest = max(self.longest, time.perf_counter() - now)
        self.checks += 1
        self.cache[point] = q
        return q


def derive(report: Any, check: Callable[[dict[str, str]], Any], given: dict[str, str],
           timeout: float = DEFAULT_TIMEOUT, seed: int = 0) -> FormulaReport:
    """Formulas for the costs of `report` (a successful check).  `check(params)` checks the
    same program with `--param` texts `params`; `given` are the texts the report was checked
    with (the other parameters keep their defaults)."""
    import sympy

    t0 = time.perf_counter()
    numeric = {n: v for n, v in report.params.items()
               if isinstance(v, Fraction) and isinstance(report.param_types.get(n, Num()), Num)}
    names = sorted(numeric)
    out = FormulaReport(dict(numeric))
    base_q = quantities(report)
    if base_q is None:
        out.note = "the program does not check"
        return out
    for name, value in base_q.items():
        out.formulas[name] = Formula(name, value)
    if not names:
        for f in out.formulas.values():
            _constant(f, sympy)
        out.note = "the program has no numeric parameters"
        return out
    base = tuple(numeric[n] for n in names)
    points = _Points(check, names, dict(given), timeout)
    points.cache[base] = base_q
    try:
        _fit_all(out, points, names, base, report, sympy, seed)
    except _OutOfTime:
        out.note = f"time limit ({timeout:g} s) reached after {points.checks} checks"
        for f in out.formulas.values():
            if f.status == "none" and not f.reason:
                f.reason = out.note
    out.checks, out.seconds = points.checks, time.perf_counter() - t0
    out.points = sum(q is not None for q in points.cache.values())
    return out


def _fit_all(out: FormulaReport, points: _Points, names: list[str], base: tuple, report: Any, sympy: Any,
             seed: int) -> None:
    symbols = [sympy.Symbol(n) for n in names]
    pending = {k for k, f in out.formulas.items() if f.value is not None and f.value != INF}
    for k, f in out.formulas.items():
        if k not in pending:
            f.reason = "infinite"  # no formula for a cost that is not bounded
    # 1. one-parameter sweeps: each cost's degree in each parameter (None: not a polynomial).
    degree: dict[str, list[Optional[int]]] = {k: [0] * len(names) for k in pending}
    sweep_values: list[list[Fraction]] = []
    for i, n in enumerate(names):
        t = report.param_types.get(n)
        values = [base[i]]
        for x in candidates(base[i], t):
            if len(values) >= SWEEP_POINTS:
                break
            q = points.at(base[:i] + (x,) + base[i + 1:])
            if q is not None:
                values.append(x)
                if len(values) >= 3 and all(_degree1d(_line(points, base, i, values, k)) == 0 for k in pending):
                    break  # constant along this parameter on 3 points: enough
        sweep_values.append(values)
        for k in pending:
            ys = _line(points, base, i, values, k)
            degree[k][i] = _degree1d(ys) if len(values) >= 2 else 0
    for k in list(pending):
        f = out.formulas[k]
        bad = [names[i] for i, d in enumerate(degree[k]) if d is None]
        if bad:
            f.reason = (f"not a polynomial of degree at most {MAX_DEGREE} in {', '.join(bad)} "
                        "(piecewise, infinite or not checking at some values)")
            pending.discard(k)
    # 2. the grid: a tensor product over the parameters some cost depends on; then confirmation.
    for extra in (0, 1):
        if not pending:
            break
        deg = [max([degree[k][i] for k in pending] + [0]) for i in range(len(names))]
        deg = [d + extra if d else 0 for d in deg]
        fitted = _fit_grid(out, points, names, base, sweep_values, deg, pending, symbols, sympy, report)
        if fitted is None:
            break
        failed = _confirm(out, points, names, base, sweep_values, deg, fitted, symbols, report, seed)
        failed_at = failed
        for k, expr in fitted.items():
            if k not in failed:
                f = out.formulas[k]
                f.expr = sympy.factor(expr)
                f.status = "checked" if f.expr.free_symbols else "constant"
                f.reason = ""
                pending.discard(k)
        for k, p in failed_at.items():
            at = ", ".join(f"{n} = {_show(x)}" for n, x in zip(names, p))
            out.formulas[k].reason = (f"not one polynomial in the parameters: the formula fitted near the given "
                                      f"values differs from the checker at {at} (a max, min, or LP solution is "
                                      "piecewise)")
    for k in pending:
        if not out.formulas[k].reason:
            out.formulas[k].reason = f"needs more than {MAX_GRID} checks to fit"
    _exhaustive(out, points, names, report, symbols)


def _line(points: _Points, base: tuple, i: int, values: list[Fraction], k: str) -> list[tuple]:
    ys = []
    for x in values:
        q = points.cache.get(base[:i] + (x,) + base[i + 1:])
        ys.append((x, q.get(k) if q is not None else None))
    return ys


def _degree1d(xy: list[tuple]) -> Optional[int]:
    """The least degree d whose interpolant of the first d + 1 points matches all of them, when
    one more point confirms it (None: a missing or infinite value, or no such d)."""
    if any(y is None or y == INF for _, y in xy):
        return None
    if len(xy) == 2:  # all a short range allows: a line, which the confirmation checks
        return 0 if xy[0][1] == xy[1][1] else 1
    for d in range(0, min(MAX_DEGREE, len(xy) - 2) + 1):
        head = xy[:d + 1]
        if all(_lagrange(head, x) == y for x, y in xy[d + 1:]):
            return d
    return None


def _lagrange(xy: list[tuple], x: Fraction) -> Fraction:
    total = Fraction(0)
    for j, (xj, yj) in enumerate(xy):
        term = Fraction(yj)
        for m, (xm, _) in enumerate(xy):
            if m != j:
                term *= (x - xm) / (xj - xm)
        total += term
    return total


def _fit_grid(out: FormulaReport, points: _Points, names: list[str], base: tuple, sweep: list[list[Fraction]],
              deg: list[int], pending: set[str], symbols: list, sympy: Any, report: Any) -> Optional[dict]:
    axes = []
    for i, d in enumerate(deg):
        if d == 0:
            axes.append([base[i]])
            continue
        values = list(sweep[i])
        for x in candidates(base[i], report.param_types.get(names[i])):
            if len(values) > d:
                break
            if x not in values:
                values.append(x)
        if len(values) <= d:
            for k in pending:
                out.formulas[k].reason = f"too few valid values of {names[i]} to fit"
            return None
        axes.append(values[:d + 1])
    size = 1
    for a in axes:
        size *= len(a)
    if size > MAX_GRID:
        return None
    values: dict[tuple, Quantities] = {}
    for p in itertools.product(*axes):
        q = points.at(p)
        if q is None:
            for k in pending:
                out.formulas[k].reason = "the program does not check at some parameter values near the given ones"
            return None
        values[p] = q
    fitted = {}
    for k in pending:
        if any(q.get(k) is None or q.get(k) == INF for q in values.values()):
            out.formulas[k].reason = "infinite or missing at some parameter values"
            continue
        expr = 0
        for p, q in values.items():
            term = sympy.Rational(q[k].numerator, q[k].denominator)
            for i, a in enumerate(axes):
                for xm in a:
                    if xm != p[i]:
                        term *= (symbols[i] - _rat(sympy, xm)) / _rat(sympy, p[i] - xm)
            expr += term
        fitted[k] = sympy.expand(expr)
    return fitted


def _rat(sympy: Any, x: Fraction) -> Any:
    return sympy.Rational(x.numerator, x.denominator)


def _confirm(out: FormulaReport, points: _Points, names: list[str], base: tuple, sweep: list[list[Fraction]],
             deg: list[int], fitted: dict, symbols: list, report: Any, seed: int) -> dict[str, tuple]:
    """Check the fitted formulas where every numeric parameter moves, and at every sweep point;
    those that differ somewhere, each with the first point where it does."""
    rng = random.Random(seed)
    failed: dict[str, tuple] = {}
    targets = list(itertools.islice((p for p, q in points.cache.items() if q is not None), 1000))
    # near the given values for a counter (a far larger one could take far longer to check);
    # from a fifth to three times the given value for another number
    pools = [candidates(base[i], report.param_types.get(names[i]))[:5 if _is_int(base[i], report.param_types.get(
        names[i])) else 7] or [base[i]] for i in range(len(names))]
    # the far ends first (all parameters up, all down), then random points
    tries = [tuple(max(pool) for pool in pools), tuple(min(pool) for pool in pools)]
    tries += [tuple(rng.choice(pool) for pool in pools) for _ in range(CONFIRM_POINTS * 4)]
    extra = 0
    for p in tries:
        if extra >= CONFIRM_POINTS:
            break
        if p in points.cache:
            continue
        if points.at(p) is not None:
            targets.append(p)
            extra += 1
    for p in targets:
        q = points.cache[p]
        subs = dict(zip(symbols, (_rat_any(x) for x in p)))
        for k, expr in fitted.items():
            y = q.get(k)
            if k not in failed and (y is None or y == INF or _to_fraction(expr.subs(subs)) != Fraction(y)):
                failed[k] = p
    return failed


def _show(x: Fraction) -> str:
    return str(x) if x.denominator == 1 or x.denominator > 10**6 else f"{float(x):g}"


def _rat_any(x: Fraction) -> Any:
    import sympy

    return sympy.Rational(x.numerator, x.denominator)


def _to_fraction(value: Any) -> Optional[Fraction]:
    try:
        return Fraction(int(value.p), int(value.q))
    except (AttributeError, TypeError):
        return None


def _exhaustive(out: FormulaReport, points: _Points, names: list[str], report: Any, symbols: list) -> None:
    """When every numeric parameter is an int with a finite declared range and there are few
    points, check every one: the formulas that match everywhere are exact on the ranges."""
    types = [report.param_types.get(n) for n in names]
    if not all(isinstance(t, Num) and t.integer and t.bounded for t in types):
        return
    ranges = [range(int(t.lo), int(t.hi) + 1) for t in types]
    size = 1
    for r in ranges:
        size *= len(r)
    if size > MAX_EXHAUSTIVE:
        return
    done = [f for f in out.formulas.values() if f.status in ("checked", "constant")]
    if not done:
        return
    for p in itertools.product(*ranges):
        point = tuple(Fraction(x) for x in p)
        q = points.at(point)
        subs = dict(zip(symbols, (_rat_any(x) for x in point)))
        for f in done:
            y = q.get(f.name) if q is not None else None
            if y is None or y == INF or _to_fraction(f.expr.subs(subs)) != Fraction(y):
                f.status, f.expr = "none", None
                f.reason = "the program does not check, or differs from the formula, at some values of the ranges"
    for f in done:
        if f.expr is not None and f.expr.free_symbols:
            f.status = "exact"


def _constant(f: Formula, sympy: Any) -> None:
    if f.value is not None and f.value != INF:
        f.expr, f.status = sympy.Rational(f.value.numerator, f.value.denominator), "constant"
