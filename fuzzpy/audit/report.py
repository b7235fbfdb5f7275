"""An AuditResult as text (for people) or JSON (for tools).

Everything shown comes from synthetic inputs and sampled outputs, never from private data.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from .auditor import AuditResult
from .search import Tested

DISCLAIMER = ("an audit can show that a program is not private, never that it is: "
              "see docs/audit.md")


def _num(x: float) -> Any:
    """A JSON number, or "inf" / "-inf" (JSON has no infinities)."""
    x = float(x)
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _fmt(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}" if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _eps(x: Fraction) -> str:
    if x.denominator == 1:
        return str(x)
    if x.denominator > 10**6:  # a converted claim, rounded up on a fine binary grid
        return f"{float(x):.6g} (rounded up)"
    return f"{x} ({float(x):g})"


def _claim(r: AuditResult) -> str:
    if not r.delta:
        return _eps(r.claimed)
    rho = f" (from rho {_eps(r.rho)} zCDP)" if r.rho is not None else ""
    return f"{_eps(r.claimed)} at delta {float(r.delta):g}{rho}"


def _ratio(t: Tested, num: str, den: str) -> str:
    return f"ln((P[{num} in E] - delta) / P[{den} in E])" if t.delta else f"ln(P[{num} in E] / P[{den} in E])"


def _sides(t: Tested) -> tuple[str, str]:
    return ("A", "B") if t.direction == 1 else ("B", "A")


# ---- JSON ---------------------------------------------------------------------------------------------

def _probability(t: Tested, side: str, k: int) -> dict:
    lo, hi = t.interval(k)
    return {"side": side, "count": k, "n": t.n, "estimate": k / t.n, "lower": lo, "upper": hi}


def witness_json(t: Tested) -> dict:
    num, den = _sides(t)
    return {"pair": t.pair.label, "input_a": t.pair.shown(t.pair.a), "input_b": t.pair.shown(t.pair.b),
            "event": t.event.to_json(),
            "ratio": f"(P[{num} in E] - delta) / P[{den} in E]" if t.delta else f"P[{num} in E] / P[{den} in E]",
            "delta": float(t.delta),
            "p1": _probability(t, num, t.k1), "p2": _probability(t, den, t.k2),
            "estimate": _num(t.estimate), "lower_bound": _num(t.lower_bound),
            "claimed_epsilon": float(t.pair.claimed)}


def result_json(r: AuditResult) -> dict:
    s = r.stats
    best = r.best
    return {
        "target": r.target,
        "claimed_epsilon": float(r.claimed), "claimed_epsilon_exact": str(r.claimed),
        "delta": float(r.delta), "delta_exact": str(r.delta),
        "rho": None if r.rho is None else float(r.rho), "rho_exact": None if r.rho is None else str(r.rho),
        "lower_bound": r.lower_bound, "confidence": r.confidence,
        "verdict": r.verdict, "violation": r.violation,
        "samples_per_side": r.samples, "tests": r.tests, "seed": r.seed,
        "witness": witness_json(best) if best is not None and best.lower_bound > 0 else None,
        "tested": [{"pair": t.pair.label, "event": t.event.text, "direction": "A/B" if t.direction == 1 else "B/A",
                    "k1": t.k1, "k2": t.k2, "n": t.n, "estimate": _num(t.estimate),
                    "lower_bound": _num(t.lower_bound), "claimed_epsilon": float(t.pair.claimed)}
                   for t in r.tested],
        "search": {"pairs": s.pairs, "screened": s.screened, "climb_evaluations": s.climbed, "explored": s.explored,
                   "samples": s.samples, "seconds": round(s.seconds, 3),
                   "samples_per_second": None if math.isnan(s.samples_per_second) else round(s.samples_per_second)},
        "notes": list(r.notes),
        "disclaimer": DISCLAIMER,
    }


# ---- text -------------------------------------------------------------------------------------------

def _input_text(x: Any) -> str:
    if isinstance(x, dict) and all(isinstance(v, list) for v in x.values()):
        parts = []
        for name, rows in x.items():
            if not rows:
                parts.append(f"{name}: empty table")
                continue
            shown = ", ".join("{" + ", ".join(f"{k} = {_cell(v)}" for k, v in row.items()) + "}" for row in rows)
            parts.append(f"{name}: {len(rows)} row{'s' if len(rows) != 1 else ''} {shown}")
        return "; ".join(parts)
    return str(x)


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return f"{v:g}" if isinstance(v, float) else str(v)


def _prob_line(t: Tested, side: str, k: int, bound: str) -> str:
    lo, hi = t.interval(k)
    which = f">= {_fmt(lo)}" if bound == "lower" else f"<= {_fmt(hi)}"
    return f"  P[{side} in E] = {k / t.n:.4g}  ({k}/{t.n}; {which})"


def result_text(r: AuditResult) -> str:
    s = r.stats
    level = f"{100 * r.confidence:g}%"
    lines = [f"audit of {r.target}",
             f"  claimed epsilon:     {_claim(r)}",
             f"  searched:            {s.pairs} neighbouring pair{'s' if s.pairs != 1 else ''}"
             + (f" (screened {s.screened}, {s.climbed} climb steps)" if s.screened or s.climbed else "")
             + f", {r.tests} event{'s' if r.tests != 1 else ''} tested on {r.samples} fresh samples per side",
             f"  largest lower bound: {r.lower_bound:.4g}  ("
             + (f"on epsilon at delta {float(r.delta):g}, " if r.delta else "")
             + f"at {level} confidence, Bonferroni over {r.tests} "
             f"test{'s' if r.tests != 1 else ''})"]
    best = r.best
    if best is None or best.lower_bound <= 0:
        lines.append("witness: none (no tested event separates the two inputs at this sample size)")
    else:
        num, den = _sides(best)
        lines += ["witness" + (" (synthetic tables)" if isinstance(best.pair.shown(best.pair.a), dict) else "") + ":",
                  f"  A: {_input_text(best.pair.shown(best.pair.a))}",
                  f"  B: {_input_text(best.pair.shown(best.pair.b))}",
                  f"  event E: {best.event.text}",
                  _prob_line(best, num, best.k1, "lower"),
                  _prob_line(best, den, best.k2, "upper"),
                  f"  {_ratio(best, num, den)}: estimate {_fmt(best.estimate)}, "
                  f"lower bound {_fmt(best.lower_bound)}"
                  + (f" (claim for this pair: {_eps(best.pair.claimed)})" if best.pair.claimed != r.claimed else "")]
    lines.append(f"verdict: {r.verdict}")
    if not r.violation:
        lines.append(f"  ({DISCLAIMER})")
    for note in r.notes:
        lines.append(f"note: {note}")
    rate = "" if math.isnan(s.samples_per_second) else f" ({s.samples_per_second:,.0f} samples/s)"
    lines.append(f"sampling: {s.samples:,} outputs in {s.seconds:.1f} s{rate}; seed {r.seed}")
    return "\n".join(lines)
