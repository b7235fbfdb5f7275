"""The runtime's fast paths against its reference path, on generated programs.

`fuzzpy run` evaluates a checked program with three optimisations on by default: batched
evaluation (pmap, each and selection scores over every part or candidate at once,
fuzzpy/runtime/batch.py), vectorised row functions (one column operation per expression
instead of one call per row, fuzzpy/runtime/vectorize.py) and public functions compiled to
Python (fuzzpy/runtime/compiled.py).  The checker's proof is about the
reference semantics: the scalar interpreter, one call per part, candidate and row.  If a fast
path computed another value, a mechanism could receive an input whose sensitivity nobody proved.

So each generated program that the checker accepts is run with real noise under one seed in
both ways (fast paths on; both off) on the oracle's tables, and the two runs must agree exactly:
the same status (or the same error), the same releases in the same order (keys, value and the
value's Python type), and the same result.  The soundness oracle (support.py) checks the
reference path against the proof; this checks the fast paths against the reference path.

    python -m tests.oracle.runtime_diff --programs 2000 --seed 0
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from fuzzpy.audit.oracle import OracleTimeout, _WORKER, call_depth, canonical
from fuzzpy.checking.program import check_source
from fuzzpy.diagnostics import FuzzError
from fuzzpy.runtime.interpreter import RECURSION_LIMIT, RunState, evaluate_entry
from fuzzpy.runtime.samplers import RandomSource

from .choices import RandomChooser
from .support import TIMEOUT, Case, draw_case, pair_tables

FAST = {"batch": True, "vectorise": True, "compiled": True}
REFERENCE = {"batch": False, "vectorise": False, "compiled": False}


@dataclass
class Run:
    status: str                      # "ok" | "failed" | "error" | "timeout"
    releases: list = field(default_factory=list)   # (keys, canonical value, value's type name)
    result: Any = None
    error: str = ""

    def same_as(self, other: "Run") -> bool:
        return (self.status, self.releases, self.result, self.error) == (
            other.status, other.releases, other.result, other.error)

    def describe(self) -> str:
        if self.status != "ok":
            return f"{self.status} {self.error}".strip()
        return f"ok, {len(self.releases)} release(s) {self.releases[:4]}, result {self.result!r:.200}"


def run_with(instance: Any, tables: dict[str, Any], seed: int, timeout: float, **paths: bool) -> Run:
    """One real run (seeded noise) on the oracle's large-stack worker, stopped at `timeout`."""
    state = RunState(RandomSource.seeded(seed), paths["vectorise"], batch=paths["batch"],
                     compiled=paths["compiled"])
    box: dict[str, Any] = {}

    def main() -> None:
        import warnings

        import numpy as np

        old = sys.getrecursionlimit()
        try:
            sys.setrecursionlimit(max(old, RECURSION_LIMIT))
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                box["result"] = evaluate_entry(instance, tables, state)
        except BaseException as exc:
            box["error"] = exc
        finally:
            sys.setrecursionlimit(old)

    if not _WORKER.run(main, timeout):
        return Run("timeout")
    releases = [(tuple(r.keys), canonical(r.value), type(r.value).__name__) for r in state.releases]
    if "result" in box:
        return Run("ok", releases, canonical(box["result"].value))
    exc = box["error"]
    if isinstance(exc, OracleTimeout):
        return Run("timeout")
    if isinstance(exc, FuzzError):
        d = exc.diagnostics[0]
        return Run("failed", releases, error=f"{d.code}: {d.message}")
    if isinstance(exc, RecursionError):
        return Run("failed", releases, error="RecursionError")
    return Run("error", releases, error=f"{type(exc).__name__}: {str(exc)[:200]}")


@dataclass
class Difference:
    side: str
    fast: Run
    reference: Run


@dataclass
class DiffResult:
    status: str                          # "accepted" | "rejected" | "internal"
    runs: int = 0
    timeouts: int = 0
    errors: list[str] = field(default_factory=list)   # internal errors of either path
    differences: list[Difference] = field(default_factory=list)


def diff_case(case: Case, timeout: float = TIMEOUT, seed: int = 7) -> DiffResult:
    """Check the case's program; if accepted, run both sides of every pair both ways."""
    with call_depth(case.depth_limit):
        report = check_source(case.program.text, "gen.fz")
        if any(d.code == "E0901" for d in report.diagnostics):
            return DiffResult("internal", errors=[report.diagnostics[0].message])
        if not report.ok:
            return DiffResult("rejected")
        out = DiffResult("accepted")
        schemas = {inp.name: report.table_schema(inp) for inp in report.inputs}
        inputs = [inp.name for inp in report.inputs]
        for spec in case.pairs:
            tables = pair_tables(spec, schemas, inputs)
            for side in ("a", "b"):
                frames = tables.frames(schemas, side)
                fast = run_with(report.entry_instance, frames, seed, timeout, **FAST)
                ref = run_with(report.entry_instance, frames, seed, timeout, **REFERENCE)
                out.runs += 1
                if "timeout" in (fast.status, ref.status):
                    out.timeouts += 1
                    continue
                out.errors += [r.error for r in (fast, ref) if r.status == "error"]
                if not fast.same_as(ref):
                    out.differences.append(Difference(f"{tables.describe(schemas)} (side {side})", fast, ref))
                    return out
        return out


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=TIMEOUT)
    args = ap.parse_args(argv)
    counts = {"accepted": 0, "rejected": 0, "internal": 0}
    runs = timeouts = 0
    bad: list[tuple[int, DiffResult, Case]] = []
    start = time.monotonic()
    for seed in range(args.seed, args.seed + args.programs):
        case = draw_case(RandomChooser(seed))
        res = diff_case(case, args.timeout)
        counts[res.status] += 1
        runs, timeouts = runs + res.runs, timeouts + res.timeouts
        if res.differences or res.errors or res.status == "internal":
            bad.append((seed, res, case))
    print(f"{args.programs} programs (seeds {args.seed}..{args.seed + args.programs - 1}) in "
          f"{time.monotonic() - start:.0f} s: {counts['accepted']} accepted, {counts['rejected']} rejected, "
          f"{counts['internal']} checker internal errors; {runs} runs compared both ways, {timeouts} timed out; "
          f"{sum(bool(r.differences) for _, r, _ in bad)} differences, "
          f"{sum(bool(r.errors) for _, r, _ in bad)} programs with runtime internal errors")
    for seed, res, case in bad[:5]:
        print(f"\n--- seed {seed}\n{case.program.text}")
        for d in res.differences:
            print(f"{d.side}\n  fast:      {d.fast.describe()}\n  reference: {d.reference.describe()}")
        for e in res.errors[:3]:
            print(f"  internal error: {e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
