"""The soundness oracle's `subsample` theme: releases on Poisson samples against their exact laws.

A program of this theme makes releases on fresh Poisson samples of its table (`subsample q f db`
with a Laplace or Gaussian count or clipped sum inside f), in a sequence in main or in a recursion
over a public counter, sometimes with a Laplace release on the whole table beside. Its releases
do not depend on each other's outputs, so on a table D and its neighbour D + x the law of the
whole output is the product of the releases' laws, each computable exactly on a small table:
the statistic on a Poisson sample is a sum of independent Bernoulli(q)-weighted row values (a
mixture over the sample, computed row by row), shifted onto the noise's grid and convolved with
the runtime's own discrete noise (`plan_laplace`, `plan_gaussian`: the same grid and scale).

The oracle asks the checker for epsilon at `DELTA` and requires the true hockey-stick divergence
of the two output laws at e^epsilon, in both orders, to be at most `DELTA`. The divergence it
computes is a lower bound of the true one (the noise's tails beyond 40 scales are left out, and
every privacy loss is rounded *down* onto a lattice of 1e-4, the losses above epsilon + 2 lowered to it
and the mass of losses below -(epsilon + 2) left out, before the losses are composed), so
a violation it reports is real. On an empty table plus one row the amplified pair the accountant
uses is exact, so a wrong rate in the accountant (0.8 q) shows there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

import numpy as np

from .choices import Chooser, coin, pick

DELTA = Fraction(1, 10**4)
RATES = ["0.01", "0.05", "0.1", "0.3"]
LAPLACE_EPS = ["1", "0.5", "2"]
GAUSS_RHO = ["0.5", "0.1", "2"]
# the statistic inside f: (source text with the sample's name `s`, its sensitivity, a row's value)
STATISTICS = {"count": ("count {b}", 1), "sum": ("sum (map (fun r -> clip 0 4 r.n) {b})", 4)}
SCHEMA = 'schema P { age : num[0, 100], n : int[0, 5] }'
LOSS_STEP = 1e-4
_TAILS = 40  # noise kept within this many scales of its centre


@dataclass(frozen=True)
class Release:
    """One release of the program: a mechanism ("laplace" or "gaussian") of `param` (epsilon or
    rho) on `stat` of a Poisson sample of rate `rate` (None: of the whole table), `times` times."""

    mechanism: str
    param: Fraction
    stat: str
    rate: Optional[Fraction]
    times: int = 1


@dataclass(frozen=True)
class SubsampleProgram:
    text: str
    releases: tuple[Release, ...]


def generate(ch: Chooser) -> SubsampleProgram:
    """A program of the theme, from the chooser's small integers (0 is the simplest)."""
    releases: list[Release] = []
    decls: list[str] = []
    lines: list[str] = []
    names: list[str] = []
    for i in range(1 + ch.below(3)):
        rel = _sampled_release(ch)
        body = _mechanism_text(rel, "s")
        if coin(ch, 40):  # in a recursion over a public counter
            times = pick(ch, [2, 3, 5])
            name = f"steps{i}"
            decls.append(f"function {name} (b : bag P) (t : int) : fuzzy num {{\n"
                         f"  if t <= 0 then return 0\n"
                         f"  else\n"
                         f"    sample g = subsample {_decimal(rel.rate)} (fun s -> {body}) b;\n"
                         f"    sample r = {name} b (t - 1);\n"
                         f"    return (g + r)\n}}")
            lines.append(f"  sample a{i} = {name} db {times};")
            rel = Release(rel.mechanism, rel.param, rel.stat, rel.rate, times)
        else:
            lines.append(f"  sample a{i} = subsample {_decimal(rel.rate)} (fun s -> {body}) db;")
        releases.append(rel)
        names.append(f"a{i}")
    if coin(ch, 40):  # a release on the whole table beside
        rel = Release("laplace", Fraction(pick(ch, LAPLACE_EPS)), pick(ch, sorted(STATISTICS)), None)
        lines.append(f"  sample w = {_mechanism_text(rel, 'db')};")
        releases.append(rel)
        names.append("w")
    result = names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
    main = "function main (db : bag P) {\n" + "\n".join(lines) + f"\n  return {result}\n}}"
    return SubsampleProgram("\n".join([SCHEMA] + decls + [main]) + "\n", tuple(releases))


def _sampled_release(ch: Chooser) -> Release:
    rate = Fraction(pick(ch, RATES))
    stat = pick(ch, sorted(STATISTICS))
    if coin(ch, 30):
        return Release("gaussian", Fraction(pick(ch, GAUSS_RHO)), stat, rate)
    return Release("laplace", Fraction(pick(ch, LAPLACE_EPS)), stat, rate)


def _mechanism_text(rel: Release, bag: str) -> str:
    stat = STATISTICS[rel.stat][0].format(b=bag)
    return f"{rel.mechanism} {_decimal(rel.param)} ({stat})"


def _decimal(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else str(float(x))


# --- the exact laws ----------------------------------------------------------------------------

def _noise(rel: Release) -> tuple[Fraction, np.ndarray]:
    """The runtime's grid step for this release and its noise's law on the grid (centred)."""
    from fuzzpy.runtime.noise import plan_gaussian, plan_laplace

    sens = Fraction(STATISTICS[rel.stat][1])
    if rel.mechanism == "laplace":
        plan = plan_laplace(sens, rel.param)
        scale = float(plan.grid_scale)
        z = np.arange(-int(_TAILS * scale), int(_TAILS * scale) + 1)
        law = np.exp(-np.abs(z) / scale)
        return plan.granularity, law / law.sum()
    gplan = plan_gaussian(sens, rel.param)
    sigma = math.sqrt(float(gplan.grid_sigma2))
    z = np.arange(-int(_TAILS * sigma / 4), int(_TAILS * sigma / 4) + 1)  # 10 sigma: e^-50
    law = np.exp(-(z.astype(float) ** 2) / (2 * float(gplan.grid_sigma2)))
    return gplan.granularity, law / law.sum()


def _statistic_law(values: list[int], rate: Optional[Fraction]) -> np.ndarray:
    """The law of the sum of the rows' values on a Poisson sample of rate `rate` (every row when
    rate is None), on the integers from 0."""
    law = np.zeros(sum(values) + 1)
    if rate is None:
        law[sum(values)] = 1.0
        return law
    law[0] = 1.0
    q = float(rate)
    for v in values:
        law = (1 - q) * law + q * np.concatenate((np.zeros(v), law[:len(law) - v]))
    return law


def _values(rel: Release, rows: list[int]) -> list[int]:
    """The statistic's value of each row (its column n): 1 for a count, n clipped to 4 for a sum."""
    return [1] * len(rows) if rel.stat == "count" else [min(n, 4) for n in rows]


def output_law(rel: Release, rows: list[int]) -> np.ndarray:
    """The law of one release's output on the grid (origin 0 - the noise's half width, the same
    for neighbouring tables)."""
    step, noise = _noise(rel)
    stat = _statistic_law(_values(rel, rows), rel.rate)
    per_unit = Fraction(1) / step
    assert per_unit.denominator == 1, "the statistic's values must lie on the noise's grid"
    k = int(per_unit)
    out = np.zeros(k * (len(stat) - 1) + len(noise))
    for v, p in enumerate(stat):
        if p:
            out[v * k:v * k + len(noise)] += p * noise
    return out


def _loss_pld(p: np.ndarray, q: np.ndarray, reach: float) -> tuple[int, np.ndarray]:
    """The law under p of the loss log(p/q), each loss rounded down onto LOSS_STEP and lowered to
    `reach` at most, the mass of losses below -reach left out: every change lowers every
    hockey-stick divergence of every composition. Outputs q cannot give are left out too (their
    loss is +infinity)."""
    n = max(len(p), len(q))
    p, q = np.pad(p, (0, n - len(p))), np.pad(q, (0, n - len(q)))
    keep = (p > 0) & (q > 0)
    loss = np.log(p[keep] / q[keep])
    inside = loss >= -reach
    idx = np.floor(np.minimum(loss[inside], reach) / LOSS_STEP).astype(np.int64)
    lo = int(idx.min())
    out = np.zeros(int(idx.max()) - lo + 1)
    np.add.at(out, idx - lo, p[keep][inside])
    return lo, out


ADDED_ROW = 5  # the neighbour's extra row: n = 5, the largest move of a count and of a sum


def observed_delta(program: SubsampleProgram, rows: list[int], epsilon: float) -> float:
    """The larger of the two orders' hockey-stick divergence at e^epsilon of the program's output
    laws on the table `rows` (each row's column n) and on it plus one row (a lower bound of the
    true one)."""
    from scipy import signal

    worst = 0.0
    for big_first in (True, False):
        lo, pld = 0, np.ones(1)
        for rel in program.releases:
            small, big = output_law(rel, rows), output_law(rel, rows + [ADDED_ROW])
            one_lo, one = _loss_pld(big, small, epsilon + 2) if big_first else _loss_pld(small, big, epsilon + 2)
            for _ in range(rel.times):
                lo, pld = lo + one_lo, np.clip(signal.fftconvolve(pld, one), 0.0, None)
        losses = (lo + np.arange(len(pld))) * LOSS_STEP
        above = losses > epsilon
        worst = max(worst, float(np.sum(pld[above] * -np.expm1(epsilon - losses[above]))))
    return worst


def check_against_laws(program: SubsampleProgram, tables: list[list[int]]) -> list[str]:
    """Violations: tables on which the true divergence at the proven epsilon exceeds DELTA."""
    from fuzzpy.api import check

    report = check(program.text, delta=DELTA)
    if not report.ok:
        return [f"the checker refused the program:\n{program.text}\n{report}"]
    eps = float(report.epsilon)
    found = []
    for rows in tables:
        got = observed_delta(program, rows, eps)
        if got > float(DELTA) * (1 + 1e-9) + 1e-12:
            found.append(f"on {len(rows)} rows plus one, delta {got:.6g} > {float(DELTA)} at the proven "
                         f"epsilon {eps:.6g}\n{program.text}")
    return found
