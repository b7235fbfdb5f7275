"""The runtime's fast paths against its reference path, on generated programs.

A run evaluates a checked program with five optimisations, each of which a `RunState` flag turns
on or off (the first four are on by default, the fifth when a holder keeps a table, as the curator
service does): batched evaluation (pmap, each and selection scores over every part or
candidate at once, fuzzpy/runtime/batch.py; `batch`), vectorised row functions (one column
operation per expression instead of one call per row, fuzzpy/runtime/vectorize.py; `vectorise`),
public functions compiled to Python (fuzzpy/runtime/compiled.py; `compiled`), functions with
effects compiled too (`effects_compiled`, which only matters with `compiled`), and group key codes
kept across runs for a table its holder keeps (fuzzpy/runtime/kept.py; `kept`, which only matters
with `batch`).  The checker's proof is about the reference semantics: the scalar interpreter, one
call per part, candidate and row.  If a fast path computed another value, a mechanism could receive
an input whose sensitivity nobody proved.

So each generated program that the checker accepts is run with real noise under one seed on the
oracle's tables with every fast path off (the reference), with every fast path on, and with a
combination of the five flags drawn for the program (from the same seeded choices as the program,
so each of the 32 combinations is reached); every run must agree with the reference exactly: the
same status (or the same error), the same releases in the same order (keys, value and the value's
Python type), and the same result.  Runs with `kept` on share one store of key codes per table,
so a run reads the codes an earlier run kept.  The soundness oracle (support.py) checks the
reference path against the proof; this checks the fast paths against the reference path.  With
`--dask`, the programs whose table primitives the Dask engine implements also run on a Dask
cluster against the pandas engine (dask_diff.py).

    python -m tests.oracle.runtime_diff --programs 2000 --seed 0
    python -m tests.oracle.runtime_diff --programs 1 --seed 1234 --paths batch,compiled   # replay one
    python -m tests.oracle.runtime_diff --programs 300 --seed 0 --dask
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from fuzzpy.audit.oracle import _WORKER, OracleTimeout, call_depth, canonical
from fuzzpy.checking.program import check_source
from fuzzpy.diagnostics import FuzzError
from fuzzpy.runtime.interpreter import RECURSION_LIMIT, RunState, evaluate_entry
from fuzzpy.runtime.kept import KeptCodes
from fuzzpy.runtime.samplers import RandomSource

from .choices import Chooser, RandomChooser
from .support import TIMEOUT, Case, draw_case, pair_tables

# ---- the fast paths: five flags, 32 combinations ------------------------------------------------------

PATHS = ("batch", "vectorise", "compiled", "effects_compiled", "kept")
FAST = {p: True for p in PATHS}
REFERENCE = {p: False for p in PATHS}
COMBINATIONS = 1 << len(PATHS)


def combination(number: int) -> dict[str, bool]:
    """Combination `number` (0 to 31): bit i turns PATHS[i] on; 0 is the reference, 31 all on."""
    return {p: bool(number >> i & 1) for i, p in enumerate(PATHS)}


def number_of(paths: dict[str, bool]) -> int:
    return sum(1 << i for i, p in enumerate(PATHS) if paths[p])


def draw_paths(ch: Chooser) -> dict[str, bool]:
    """A combination drawn from the chooser that drew the program: any of the 32."""
    return combination(ch.below(COMBINATIONS))


def describe_paths(paths: dict[str, bool]) -> str:
    on = [p for p in PATHS if paths[p]]
    if len(on) in (0, len(PATHS)):
        return "every fast path " + ("on" if on else "off")
    return f"{', '.join(on)} on; {', '.join(p for p in PATHS if not paths[p])} off"


def paths_option(paths: dict[str, bool]) -> str:
    """The `--paths` value that forces this combination."""
    on = [p for p in PATHS if paths[p]]
    return ",".join(on) if on else "none"


def parse_paths(text: str) -> dict[str, bool]:
    """`all`, `none`, or the comma-separated names of the fast paths that are on."""
    if text.strip() == "all":
        return dict(FAST)
    names = [] if text.strip() == "none" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PATHS]
    if unknown:
        raise ValueError(f"unknown fast path(s) {', '.join(unknown)}; the fast paths are {', '.join(PATHS)}")
    return {p: p in names for p in PATHS}


# ---- one run, and its comparison ----------------------------------------------------------------------

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


def run_with(instance: Any, tables: dict[str, Any], seed: int, timeout: float,
             codes: Optional[dict[str, KeptCodes]] = None, **paths: bool) -> Run:
    """One real run (seeded noise) on the oracle's large-stack worker, stopped at `timeout`, with
    the fast paths `paths` (the five PATHS flags).  With `kept` on, the tables' key codes are read
    from and kept in `codes` (a store per table name, shared by the runs given the same one)."""
    state = RunState(RandomSource.seeded(seed), paths["vectorise"], batch=paths["batch"],
                     compiled=paths["compiled"], effects_compiled=paths.get("effects_compiled", True))
    if paths.get("kept"):
        stores = codes if codes is not None else {}
        for name, table in tables.items():
            state.kept[id(table)] = (table, stores.setdefault(name, KeptCodes()))
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
    side: str          # the tables (and which side of the pair)
    label: str         # what ran: a combination of fast paths, or an engine
    run: Run
    reference: Run
    reference_label: str = "reference (every fast path off)"

    def describe(self) -> str:
        width = max(len(self.label), len(self.reference_label)) + 1
        return (f"{self.side}\n  {self.label + ':':<{width}} {self.run.describe()}\n"
                f"  {self.reference_label + ':':<{width}} {self.reference.describe()}")


@dataclass
class DiffResult:
    status: str                          # "accepted" | "rejected" | "internal" (| "unsupported": dask_diff.py)
    runs: int = 0
    timeouts: int = 0
    errors: list[str] = field(default_factory=list)   # internal errors of either path
    differences: list[Difference] = field(default_factory=list)
    paths: dict = field(default_factory=dict)          # the combination drawn for the program


def compared(paths: dict[str, bool]) -> list[dict[str, bool]]:
    """The combinations run against the reference: every fast path on, and `paths` (once)."""
    return [FAST] + ([paths] if paths not in (FAST, REFERENCE) else [])


def diff_case(case: Case, timeout: float = TIMEOUT, seed: int = 7,
              paths: Optional[dict[str, bool]] = None) -> DiffResult:
    """Check the case's program; if accepted, run both sides of every pair with every fast path
    off, every fast path on, and the combination `paths`, and compare each with the first."""
    paths = dict(FAST) if paths is None else paths
    with call_depth(case.depth_limit):
        report = check_source(case.program.text, "gen.fz")
        if any(d.code == "E0901" for d in report.diagnostics):
            return DiffResult("internal", errors=[report.diagnostics[0].message], paths=paths)
        if not report.ok:
            return DiffResult("rejected", paths=paths)
        out = DiffResult("accepted", paths=paths)
        schemas = {inp.name: report.table_schema(inp) for inp in report.inputs}
        inputs = [inp.name for inp in report.inputs]
        for spec in case.pairs:
            tables = pair_tables(spec, schemas, inputs)
            for side in ("a", "b"):
                frames = tables.frames(schemas, side)
                codes: dict[str, KeptCodes] = {}  # one store per table, shared by this side's runs
                ref = run_with(report.entry_instance, frames, seed, timeout, codes, **REFERENCE)
                for combo in compared(paths):
                    run = run_with(report.entry_instance, frames, seed, timeout, codes, **combo)
                    out.runs += 1
                    if "timeout" in (run.status, ref.status):
                        out.timeouts += 1
                        continue
                    out.errors += [r.error for r in (run, ref) if r.status == "error"]
                    if not run.same_as(ref):
                        where = f"{tables.describe(schemas)} (side {side})"
                        out.differences.append(Difference(where, describe_paths(combo), run, ref))
                        return out
        return out


def draw_diff_case(seed: int, n_pairs: int = 3) -> tuple[Case, dict[str, bool]]:
    """Program `seed` of the script: its case, then its combination, from one seeded chooser."""
    ch = RandomChooser(seed)
    case = draw_case(ch, n_pairs=n_pairs)
    return case, draw_paths(ch)


# ---- the script -------------------------------------------------------------------------------------

class _DaskSide:
    """The script's Dask comparison: a cluster (started here unless a scheduler is given) and the
    counts of what it compared."""

    def __init__(self, scheduler: Optional[str]):
        import tempfile
        from pathlib import Path

        from .dask_diff import BudgetedDaskEngine

        self.cluster = None
        if scheduler is None:
            import distributed

            self.cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                                    dashboard_address=None, memory_limit=None)
            scheduler = self.cluster.scheduler_address
        self.engine = BudgetedDaskEngine.start(scheduler)
        self.directory = Path(tempfile.mkdtemp(prefix="fuzzpy-dask-diff-"))
        self.programs = self.runs = self.skipped = self.unsupported = 0

    def compare(self, case: Case, timeout: float) -> DiffResult:
        from .dask_diff import dask_case

        res = dask_case(case, self.engine, self.directory, timeout)
        self.unsupported += res.status == "unsupported"
        self.programs += res.status == "accepted"
        self.runs, self.skipped = self.runs + res.runs, self.skipped + res.timeouts
        return res

    def summary(self) -> str:
        return (f"Dask engine: {self.programs} programs compared with the pandas engine ({self.unsupported} use "
                f"primitives it does not implement), {self.runs} runs, {self.skipped} over their budget or time")

    def close(self) -> None:
        import shutil

        self.engine.close()
        if self.cluster is not None:
            self.cluster.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0, help="program i is drawn from seed SEED + i")
    ap.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds per run")
    ap.add_argument("--paths", type=parse_paths, default=None,
                    help="the combination to compare besides every fast path on: 'all', 'none', or the "
                         f"comma-separated fast paths that are on ({', '.join(PATHS)}); default: drawn per program")
    ap.add_argument("--dask", action="store_true",
                    help="also run the programs the Dask engine can run on a local Dask cluster against the "
                         "pandas engine")
    ap.add_argument("--scheduler", default=None, help="with --dask: an existing Dask scheduler's address")
    args = ap.parse_args(argv)
    dask = _DaskSide(args.scheduler) if args.dask else None
    counts = {"accepted": 0, "rejected": 0, "internal": 0}
    runs = timeouts = 0
    bad: list[tuple[int, DiffResult, Case]] = []
    start = time.monotonic()
    try:
        for seed in range(args.seed, args.seed + args.programs):
            case, drawn = draw_diff_case(seed)
            res = diff_case(case, args.timeout, paths=args.paths or drawn)
            counts[res.status] += 1
            runs, timeouts = runs + res.runs, timeouts + res.timeouts
            if res.differences or res.errors or res.status == "internal":
                bad.append((seed, res, case))
            if dask is not None and res.status == "accepted" and not res.differences:
                dres = dask.compare(case, args.timeout)
                if dres.differences or dres.errors:
                    bad.append((seed, dres, case))
    finally:
        if dask is not None:
            dask.close()
    print(f"{args.programs} programs (seeds {args.seed}..{args.seed + args.programs - 1}) in "
          f"{time.monotonic() - start:.0f} s: {counts['accepted']} accepted, {counts['rejected']} rejected, "
          f"{counts['internal']} checker internal errors; {runs} runs compared with the reference, {timeouts} "
          f"timed out; {sum(bool(r.differences) for _, r, _ in bad)} differences, "
          f"{sum(bool(r.errors) for _, r, _ in bad)} programs with runtime internal errors")
    if dask is not None:
        print(dask.summary())
    for seed, res, case in bad[:5]:
        replay = f"python -m tests.oracle.runtime_diff --programs 1 --seed {seed} --paths {paths_option(res.paths)}"
        print(f"\n--- seed {seed}: {describe_paths(res.paths)} (replay: {replay}{' --dask' if dask else ''})\n"
              f"{case.program.text}")
        for d in res.differences:
            print(d.describe())
        for e in res.errors[:3]:
            print(f"  internal error: {e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
