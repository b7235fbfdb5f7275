"""The conformance suite: published programs of the Fuzz family, the bound their source states,
and how fuzzpy's checker is compared with it.  Used by tests/conformance/test_*.py and by
benchmarks/conformance_report.py (which prints the table of docs/conformance.md).

Kinds of case:
  epsilon      the entry point's privacy loss must equal the expected one exactly;
  sensitivity  the coefficients of a function's inferred type must equal the expected ones;
  rejected     the program must fail to check, with the expected error code;
  sound        a broken program (claimed epsilon below its true loss): it must be rejected, or
               checked with a bound at least its true loss (never its claimed one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction as F
from pathlib import Path
from typing import Any, Optional

PROGRAMS = Path(__file__).resolve().parent / "programs"
INF = float("inf")


def plist(values) -> str:
    """A --param value for a list of numbers."""
    return "[" + ", ".join(str(v) for v in values) + "]"


def pnum(q: F) -> str:
    """A --param value for a fraction."""
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


@dataclass
class Case:
    source: str
    program: str
    file: str
    kind: str                     # epsilon | sensitivity | rejected | sound
    expected: Any                 # Fraction, tuple of coefficients, an error code, or the true loss
    stated: str                   # the bound as the source states it
    entry: str = "main"
    function: Optional[str] = None
    params: dict = field(default_factory=dict)
    claimed: Optional[F] = None   # sound: the (wrong) claimed epsilon
    message: Optional[str] = None  # rejected: a fragment of the error message
    why: str = ""                 # sound: why fuzzpy's bound is at least the true loss

    @property
    def id(self) -> str:
        shown = [f"{k}={v}" if not str(v).startswith("[") else f"{k}:{str(v).count(',') + 1}"
                 for k, v in self.params.items()]
        return self.program + (f" [{', '.join(shown)}]" if shown else "")


@dataclass
class Outcome:
    bound: Any          # fuzzpy's bound (Fraction, tuple, INF) or None when rejected
    codes: list[str]
    messages: list[str]
    ok: bool
    verdict: str
    report: Any = None


def coefficients(t: str) -> tuple:
    """The sensitivity of every top-level arrow of a function type string."""
    out, depth, i = [], 0, 0
    while i < len(t):
        ch = t[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and t.startswith("->", i):
            out.append(INF)
        elif depth == 0 and t.startswith("-o", i):
            if t.startswith("-o[", i):
                j = t.index("]", i)
                out.append(F(t[i + 3:j]))
                i = j
            else:
                out.append(F(1))
        i += 1
    return tuple(out)


def show(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, tuple):
        return ", ".join(show(x) for x in v)
    if v == INF:
        return "inf"
    if isinstance(v, F):
        return str(v.numerator) if v.denominator == 1 else f"{v} (= {float(v):g})"
    return str(v)


def evaluate(case: Case) -> Outcome:
    from fuzzpy.checking.program import check_file

    report = check_file(PROGRAMS / case.file, params={k: str(v) for k, v in case.params.items()},
                        entry=case.entry)
    codes = [d.code for d in report.diagnostics if d.severity == "error"]
    messages = [d.message for d in report.diagnostics if d.severity == "error"]
    if case.kind == "rejected":
        ok = codes == [case.expected] and (case.message is None or case.message in messages[0])
        verdict = f"rejected ({', '.join(codes)})" if codes else "accepted: WRONG"
        return Outcome(None, codes, messages, ok, verdict, report)
    if case.kind == "sound":
        if codes:
            return Outcome(None, codes, messages, True, f"rejected ({', '.join(codes)}): sound", report)
        bound = report.epsilon
        ok = bound >= case.expected and (case.claimed is None or bound > case.claimed)
        verdict = (f"sound: charged {show(bound)} >= true loss" if ok else "UNSOUND: below the true loss")
        return Outcome(bound, codes, messages, ok, verdict, report)
    if codes:
        return Outcome(None, codes, messages, False, f"rejected ({', '.join(codes)}): WRONG", report)
    if case.kind == "epsilon":
        bound = report.epsilon
    else:
        (fn,) = [f for f in report.functions if f.name == case.function]
        bound = coefficients(fn.type)
    if bound == case.expected:
        verdict = "exact"
    elif _below(bound, case.expected):
        verdict = "LOWER than expected: check soundness"
    else:
        verdict = "looser than expected"
    return Outcome(bound, codes, messages, bound == case.expected, verdict, report)


def _below(a, b) -> bool:
    if isinstance(a, tuple):
        return any(x < y for x, y in zip(a, b))
    return a < b


# ---- the cases ----------------------------------------------------------------------------------

def _cases() -> list[Case]:
    cs: list[Case] = []
    add = cs.append

    # DFuzz / Adaptive Fuzz -----------------------------------------------------------------
    for n, eps in ((8, F(1, 2)), (3, F(1, 10)), (20, F(1, 4))):
        bounds = plist(range(10, 10 * n + 1, 10))
        add(Case("DFuzz", "cumulative histogram (histogram.fz)", "dfuzz_histogram.fz", "epsilon", n * eps,
                 f"n*eps = {show(n * eps)} (n = {n}, eps = {eps})",
                 params={"eps": pnum(eps), "buckets": bounds}))
        add(Case("DFuzz", "interval histogram by splits (cdf.fz)", "dfuzz_cdf.fz", "epsilon", eps,
                 f"DFuzz annotates i*eps = {show(n * eps)}; true loss eps = {eps} (disjoint parts)",
                 params={"eps": pnum(eps), "buckets": bounds}))
    for iters, eps in ((4, F(1, 10)), (1, F(1, 2)), (6, F(1, 3))):
        add(Case("DFuzz", "k-means (kmeans.fz)", "dfuzz_kmeans.fz", "epsilon", 3 * iters * eps,
                 f"3*i*eps = {show(3 * iters * eps)} (i = {iters}, eps = {eps})",
                 params={"eps": pnum(eps), "iters": iters}))
    for iters, eps in ((3, F(1, 10)), (1, F(1, 4)), (5, F(1, 5))):
        add(Case("DFuzz", "IDC (IDC.fz)", "dfuzz_idc.fz", "epsilon", 2 * iters * eps,
                 f"2*i*eps = {show(2 * iters * eps)} (i = {iters}, eps = {eps})",
                 params={"eps": pnum(eps), "iters": iters}))
    red = "adaptive_fuzz_simple_red.fz"
    add(Case("Adaptive Fuzz", "seq of two eps=1 releases (test-simple-red #11)", red, "epsilon", F(2),
             "2.0", entry="test11"))
    add(Case("Adaptive Fuzz", "par of 1.5 and 1.5 on a pair (#12)", red, "epsilon", F(3, 2), "1.5",
             entry="test12"))
    add(Case("Adaptive Fuzz", "par 1.3 1.0 (add_noise 1.3) (add_noise 1.5) at 1.5 (#13)",
             "adaptive_fuzz_simple_red_13.fz", "rejected", "E0301",
             "rejected: g = add_noise 1.5 does not fit par's annotation t = 1.0", entry="test13",
             message="this function is 1.5-sensitive, but num -o fuzzy num allows 1"))
    add(Case("Adaptive Fuzz", "#13's functions, sensitivities inferred", red, "epsilon", F(3, 2),
             "max(1.3, 1.5) = 1.5 on the pair (not stated: the true loss)", entry="test13_inferred"))
    add(Case("Adaptive Fuzz", "#13's releases on one number (sequential)", red, "epsilon", F(14, 5),
             "1.3 + 1.5 = 2.8 (not #13: shown for contrast)", entry="test13_sequential"))

    # Spar ------------------------------------------------------------------------------------
    spar = "spar.fz"
    for fn, coefs, stated in (
            ("dup", (F(2),), "2"),
            ("twice_dup", (F(4),), "4"),
            ("isort", (F(1),), "1 (insertion sort with cswap)"),
            ("map_scale3", (F(3),), "k = 3 (map with a 3-sensitive function)"),
            ("fold_sum", (F(1),), "1 (fold with +)"),
            ("lsum", (F(1),), "1"),
            ("append", (F(1), F(1)), "1, 1"),
            ("concat", (F(1),), "1"),
            ("zip", (F(1), F(1)), "1, 1"),
            ("len", (F(0),), "Spar: 1 over a bag; lists (Fuzz metric): 0"),
            ("bag_len", (F(1),), "1 (the size of a bag: count)"),
            ("histogram", (F(1),), "1")):
        add(Case("Spar", fn, spar, "sensitivity", coefs, stated, function=fn))
    add(Case("Spar", "CDF over 8 buckets at eps 1/8", spar, "epsilon", F(1), "8 * 1/8 = 1"))

    # Solo ------------------------------------------------------------------------------------
    add(Case("Solo", "laplace eps=2 on x + x", "solo.fz", "epsilon", F(2), "2 (calibrated to sensitivity 2)",
             entry="double_release"))
    add(Case("Solo", "two releases at eps 2 and 3", "solo.fz", "epsilon", F(5), "2 + 3 = 5", entry="two_releases"))
    add(Case("Solo", "CDF, eps = 1, 100 buckets", "solo.fz", "epsilon", F(100), "100",
             params={"bounds": plist(range(1, 101)), "cdf_eps": 1}))
    for rounds, eps in ((3, F(1, 10)), (1, F(1, 2)), (5, F(1, 4))):
        add(Case("Solo", "MWEM", "solo_mwem.fz", "epsilon", 2 * rounds * eps,
                 f"2*eps per round: {show(2 * rounds * eps)} ({rounds} rounds, eps = {eps})",
                 params={"eps": pnum(eps), "rounds": rounds}))

    # Fuzzi -------------------------------------------------------------------------------------
    for fn, coefs in (("x_of", (F(1),)), ("y_of", (F(2),)), ("z_of", (F(4),))):
        add(Case("Fuzzi", f"arithmetic: {fn[0]}", "fuzzi.fz", "sensitivity", coefs, show(coefs), function=fn))

    # CheckDP: correct algorithms ---------------------------------------------------------------
    for entry, name in (("svt", "SVT"), ("noisy_max_index", "NoisyMax (index)"),
                        ("noisy_max_name", "NoisyMax (named candidates)"), ("partial_sum", "PartialSum"),
                        ("partial_sum_table", "PartialSum over a table")):
        add(Case("CheckDP", name, "checkdp_correct.fz", "epsilon", F(1, 2), "eps = 1/2", entry=entry))

    # CheckDP: broken algorithms ----------------------------------------------------------------
    eps = F(1, 2)
    add(Case("CheckDP", "BadNoisyMax: releases the noisy max value", "checkdp_bad_noisy_max.fz", "sound",
             5 * eps / 2, f"claimed eps = {eps}; true loss <= 5 eps/2 (5 queries, Lap(2/eps))", claimed=eps,
             why="noisy_max returns only the candidate; by hand, each noisy query is a Laplace release "
                 "(eps/2 each) and the max is post-processing: n eps/2 bounds the true loss"))
    add(Case("CheckDP", "BadHistogram: noise scale eps, not 1/eps", "checkdp_bad_histogram.fz", "sound",
             1 / eps, f"claimed eps = {eps}; true loss 1/eps = {show(1 / eps)}", claimed=eps,
             why="the scale is S/epsilon, fixed by the checker: scale eps needs epsilon 1/eps, which is charged"))
    add(Case("CheckDP", "BadPartialSum: Lap(1/(2 eps))", "checkdp_bad_partial_sum.fz", "sound", 2 * eps,
             f"claimed eps = {eps}; true loss 2 eps = {show(2 * eps)}", claimed=eps,
             why="scale 1/(2 eps) on a 1-sensitive sum is epsilon 2 eps, and is charged 2 eps"))
    add(Case("CheckDP", "BadSVT: no query noise, no cut-off", "checkdp_bad_svt_no_noise.fz", "sound", INF,
             f"claimed eps = {eps}; not DP (infinite)", claimed=eps,
             why="comparing a private count with the threshold is a branch on private data: E0302"))
    add(Case("CheckDP", "BadSVT: query noise not scaled by the cut-off", "checkdp_bad_svt_unscaled.fz", "sound",
             8 * eps / 4, f"claimed eps = {eps}; true loss <= 8 eps/4 (8 queries, Lap(4/eps))", claimed=eps,
             why="above_threshold always scales by the cut-off; by hand, each noisy query is a Laplace "
                 "release, charged for every query that may be answered (sequential composition)"))
    add(Case("CheckDP", "BadSVT: releases the noisy query value", "checkdp_bad_svt_release_value.fz", "sound",
             8 * eps / 4, f"claimed eps = {eps}; true loss <= 8 eps/4", claimed=eps,
             why="above_threshold returns booleans only; by hand, the released value is a Laplace release, "
                 "charged per query"))
    add(Case("CheckDP", "BadGapSVT: releases q + noise, not the gap", "checkdp_bad_gap_svt.fz", "sound",
             8 * eps / 4, f"claimed eps = {eps}; true loss <= 8 eps/4", claimed=eps,
             why="every released number comes out of a Laplace release, charged per query"))
    add(Case("CheckDP", "mean divided by the exact count", "checkdp_bad_mean.fz", "sound", INF,
             "not DP (the count is released exactly)",
             why="returning s / count db releases a private value without noise: E0302"))
    add(Case("CheckDP", "mean divided by the exact count, inside the mechanism", "checkdp_bad_mean_inside.fz",
             "sound", INF, "not DP", why="dividing by a private count has unbounded sensitivity: E0305"))
    return cs


CASES = _cases()


def cases(source: str) -> list[Case]:
    return [c for c in CASES if c.source == source]
