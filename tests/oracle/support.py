"""What the soundness oracle's test and script share: a case (a generated program and the
neighbouring tables to run it on), running a case through the checker and the identity
runtime, statistics, and counterexample files.

A case's tables are drawn with its program, from the same chooser, so hypothesis (or the
script's shrinker) shrinks both.  Table sizes straddle the call-depth limit; when a program's
call depth turns out to depend on the data, extra pairs are built at the size where it crosses
the limit (one table's run succeeds, its neighbour's would fail), whatever the program computes
from the rows.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from fuzzpy.audit.neighbours import candidate_rows, make_frame
from fuzzpy.audit.oracle import PairResult, Violation, audit_pair, call_depth, run_identity
from fuzzpy.checking.program import check_source

from .choices import Chooser, coin, pick, weighted
from .generator import Program, generate

DEPTH_LIMIT = 30          # the shared call-depth limit while the oracle checks and runs
TIMEOUT = 5.0             # seconds per run (a run that times out is retried with 4x)
FOUND = Path(__file__).parent / "found"


@dataclass(frozen=True)
class PairSpec:
    table: str     # the private input that differs
    size: int      # rows of the smaller table
    seed: int      # which rows
    extra: int     # which row is added (an index into the candidate rows)
    add: bool      # True: A is the smaller table (B adds a row); False: A has the row, B not


@dataclass
class Case:
    program: Program
    pairs: list[PairSpec]
    depth_limit: int = DEPTH_LIMIT
    record: Optional[list[int]] = None  # the choices it was drawn from (the script's shrinker edits them)


def draw_case(ch: Chooser, depth_limit: int = DEPTH_LIMIT, n_pairs: int = 3) -> Case:
    program = generate(ch)
    pairs = [draw_pair(ch, program.tables, depth_limit) for _ in range(n_pairs)]
    return Case(program, pairs, depth_limit)


def draw_pair(ch: Chooser, tables: list[str], depth_limit: int) -> PairSpec:
    near = max(depth_limit - 3, 0)
    size = weighted(ch, [(3, ch.below(4)), (2, 4 + ch.below(9)), (3, near + ch.below(5)),
                         (1, depth_limit + 2 + ch.below(9))])
    table = pick(ch, tables)
    return PairSpec(table, size, ch.below(1000), ch.below(64), not coin(ch, 50))


# ---- tables ------------------------------------------------------------------------------------

_POOLS: dict[str, list[tuple]] = {}


def row_pool(schema: Any) -> list[tuple]:
    """Rows at the schema's edges (all low, middle, high, each column through its values) and a
    few random ones: fixed per schema."""
    key = repr(schema.columns)  # schemas of one name may differ between programs
    if key not in _POOLS:
        _POOLS[key] = candidate_rows(schema, [], np.random.default_rng(0))
    return _POOLS[key]


def base_rows(schema: Any, size: int, seed: int) -> list[tuple]:
    pool = row_pool(schema)
    rng = random.Random(seed)
    return [pool[rng.randrange(len(pool))] for _ in range(size)]


@dataclass
class Tables:
    """The rows of every private input for run A and run B."""

    a: dict[str, list[tuple]]
    b: dict[str, list[tuple]]
    changed: str

    def frames(self, schemas: dict[str, Any], side: str) -> dict[str, Any]:
        rows = self.a if side == "a" else self.b
        return {name: make_frame(schemas[name], r) for name, r in rows.items()}

    def describe(self, schemas: dict[str, Any]) -> str:
        out = []
        for side, rows in (("A", self.a), ("B", self.b)):
            for name, r in rows.items():
                cols = [c.name for c in schemas[name].columns]
                runs = []  # consecutive equal rows as one "k x row"
                for row in r:
                    if runs and runs[-1][1] == row:
                        runs[-1][0] += 1
                    else:
                        runs.append([1, row])
                shown = "; ".join((f"{k} x " if k > 1 else "") + "{" + ", ".join(
                    f"{c}={_cell(v)}" for c, v in zip(cols, row)) + "}" for k, row in runs)
                out.append(f"{side} {name} ({len(r)} rows): {shown or '(empty)'}")
        return "\n".join(out)


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def pair_tables(spec: PairSpec, schemas: dict[str, Any], inputs: list[str]) -> Tables:
    """A and B for one PairSpec: the other inputs hold the same few rows in both."""
    small: dict[str, list[tuple]] = {}
    for name in inputs:
        size = spec.size if name == spec.table else 2
        small[name] = base_rows(schemas[name], size, spec.seed + (0 if name == spec.table else 1))
    pool = row_pool(schemas[spec.table])
    big = dict(small)
    big[spec.table] = small[spec.table] + [pool[spec.extra % len(pool)]]
    return Tables(small, big, spec.table) if spec.add else Tables(big, small, spec.table)


def copies_tables(row: tuple, n: int, base: Tables, add: bool) -> Tables:
    """n copies of `row` against n + 1 (the other inputs as in `base`)."""
    small = {k: (list(v) if k != base.changed else [row] * n) for k, v in base.a.items()}
    big = dict(small)
    big[base.changed] = [row] * (n + 1)
    return Tables(small, big, base.changed) if add else Tables(big, small, base.changed)


# ---- running a case ------------------------------------------------------------------------------

@dataclass
class Finding:
    violation: Violation
    tables: Tables
    pair: PairResult


@dataclass
class CaseResult:
    status: str                          # "accepted" | "rejected" | "internal"
    codes: list[str] = field(default_factory=list)   # error codes of a rejected program
    message: str = ""
    pairs: int = 0
    timeouts: int = 0
    runtime_errors: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    epsilon: Any = None
    schemas: dict = field(default_factory=dict)


def run_case(case: Case, timeout: float = TIMEOUT) -> CaseResult:
    """Check the case's program with the lowered call-depth limit; if accepted, run every pair
    (and the pairs that straddle the limit) and collect the violations."""
    with call_depth(case.depth_limit):
        report = check_source(case.program.text, "gen.fz")
        codes = [d.code for d in report.diagnostics if d.severity == "error"]
        if "E0901" in codes:
            return CaseResult("internal", codes, report.diagnostics[0].message)
        if not report.ok:
            return CaseResult("rejected", codes)
        result = CaseResult("accepted", epsilon=report.epsilon)
        schemas = {inp.name: report.table_schema(inp) for inp in report.inputs}
        result.schemas = schemas
        eps = {inp.name: (inp.epsilon, inp.rho_gauss, inp.rho_pure) for inp in report.inputs}
        inputs = [inp.name for inp in report.inputs]
        done: list[tuple[Tables, PairResult]] = []
        for spec in case.pairs:
            tables = pair_tables(spec, schemas, inputs)
            done.append((tables, _audit(report, eps, schemas, tables, timeout, result)))
            if result.findings:
                return result
        for tables in straddling_tables(report, schemas, done, case.depth_limit, timeout):
            _audit(report, eps, schemas, tables, timeout, result)
            if result.findings:
                break
        return result


def _audit(report: Any, eps: dict, schemas: dict, tables: Tables, timeout: float, result: CaseResult) -> PairResult:
    epsilon, rho, rho_pure = eps[tables.changed]
    pr = audit_pair(report.entry_instance, epsilon, tables.frames(schemas, "a"),
                    tables.frames(schemas, "b"), timeout, rho, rho_pure)
    result.pairs += 1
    result.timeouts += (pr.a.status == "timeout") + (pr.b.status == "timeout")
    for o in (pr.a, pr.b):
        if o.status == "error":
            result.runtime_errors.append(f"{o.code}: {o.message}")
    result.findings += [Finding(v, tables, pr) for v in pr.violations]
    return pr


def straddling_tables(report: Any, schemas: dict, done: list[tuple[Tables, PairResult]], limit: int,
                      timeout: float, max_rows: int = 200) -> list[Tables]:
    """When one pair's runs nested calls to different depths, the depth follows the data: find
    the number of copies of the added row at which a run first fails, and return the pairs on
    both sides of it (in both directions)."""
    for tables, pr in done:
        if pr.a.max_depth == pr.b.max_depth or "timeout" in (pr.a.status, pr.b.status):
            continue
        bigger = tables.b if len(tables.b[tables.changed]) > len(tables.a[tables.changed]) else tables.a
        row = bigger[tables.changed][-1]

        def fails(n: int) -> bool:
            t = copies_tables(row, n, tables, True)
            return run_identity(report.entry_instance, t.frames(schemas, "a"), timeout=timeout).status != "ok"

        n = last_success(fails, max_rows)
        if n is not None:
            return [copies_tables(row, n, tables, True), copies_tables(row, n, tables, False)]
    return []


def last_success(fails: Callable[[int], bool], max_n: int) -> Optional[int]:
    """The n with fails(n + 1) but not fails(n), by doubling then bisection (assuming failure is
    monotone in n); None when fails(0), or when nothing up to max_n fails."""
    if fails(0):
        return None
    lo, hi = 0, 1
    while not fails(hi):
        if hi >= max_n:
            return None
        lo, hi = hi, min(hi * 2, max_n)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fails(mid) else (mid, hi)
    return lo


# ---- statistics and counterexamples -----------------------------------------------------------------

@dataclass
class Stats:
    generated: int = 0
    accepted: int = 0
    rejected: Counter = field(default_factory=Counter)   # first error code -> programs
    internal: list[str] = field(default_factory=list)    # programs with E0901
    pairs: int = 0
    timeouts: int = 0
    runtime_errors: list[tuple[str, str]] = field(default_factory=list)
    violations: Counter = field(default_factory=Counter)  # kind -> programs
    examples: list[tuple[Case, CaseResult]] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, case: Case, res: CaseResult) -> None:
        self.generated += 1
        if res.status == "internal":
            self.internal.append(case.program.text)
        elif res.status == "rejected":
            self.rejected[res.codes[0] if res.codes else "?"] += 1
        else:
            self.accepted += 1
            self.pairs += res.pairs
            self.timeouts += res.timeouts
            self.runtime_errors += [(e, case.program.text) for e in res.runtime_errors[:1]]
            kinds = {finding_kind(f) for f in res.findings}
            for k in kinds:
                self.violations[k] += 1
            if kinds:
                self.examples.append((case, res))

    def merge(self, other: "Stats") -> None:
        self.generated += other.generated
        self.accepted += other.accepted
        self.rejected.update(other.rejected)
        self.internal += other.internal
        self.pairs += other.pairs
        self.timeouts += other.timeouts
        self.runtime_errors += other.runtime_errors
        self.violations.update(other.violations)
        self.examples += other.examples


def finding_kind(f: Finding) -> str:
    """The violation's kind; a loss is told apart by whether some call's input moved more than
    its proven sensitivity (an understated sensitivity) or none did (calls charged too few times)."""
    if f.violation.kind != "loss":
        return f.violation.kind
    return "loss (a call over its sensitivity)" if f.violation.over else "loss (more calls than charged)"


def describe_finding(case: Case, res: CaseResult, finding: Optional[Finding] = None) -> str:
    """The violation, the program and the two tables, as a fuzzpy comment header + program."""
    f = finding or res.findings[0]
    head = [f"soundness oracle: {f.violation.kind}: {f.violation.detail}",
            f"proven epsilon {res.epsilon}; call-depth limit {case.depth_limit}; the table that differs: "
            f"{f.tables.changed}",
            f"run A: {_run_text(f.pair.a)}, {len(f.pair.a.calls)} mechanism call(s); "
            f"run B (replaying A's releases): {_run_text(f.pair.b)}, {len(f.pair.b.calls)} call(s)"]
    head += f.tables.describe(res.schemas).splitlines()
    return "\n".join("# " + line for line in head) + "\n" + case.program.text


def _run_text(o: Any) -> str:
    return o.status + (f" ({o.code})" if o.code else "")


def save_finding(case: Case, res: CaseResult, name: str, directory: Path = FOUND) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.fz"
    path.write_text(describe_finding(case, res))
    return path


SESSION_STATS = Stats()  # what the property test tried in this pytest session (conftest.py reports it)
