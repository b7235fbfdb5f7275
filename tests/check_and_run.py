"""Checking small programs on one schema and running them on neighbouring tables.

What the tests by rule (tests/checking/test_rule_*.py and their neighbours) share: the schema T the
programs are written against, neighbouring tables built by the real loader, what an observer of a
run sees, assertions on the checker's verdict, and runs of a pair of neighbouring tables through
the soundness oracle (`fuzzpy.audit.oracle.audit_pair`: mechanisms replaced by the identity, B
replays A's releases)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from fuzzpy.audit.oracle import audit_pair, call_depth
from fuzzpy.checking.program import check_source
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.samplers import RandomSource

T = 'schema T { x : num[0, 10], k : cat{"a", "b", "c"}, flag : bool, n : int[0, 5] }\n'
HEADER = "x,k,flag,n\n"
ROW_A = "1,a,true,1\n"
ROW_B = "9,b,false,3\n"   # the individual whose presence the attacks try to learn
# Neighbouring tables (one row added); `violations` audits both directions.
PAIRS = [("", ROW_A), (ROW_A, ROW_A + ROW_B), (ROW_A * 3, ROW_A * 3 + ROW_B)]


def check(src: str, **kw):
    return check_source(T + src, "t.fz", **kw)


def codes(report) -> set[str]:
    return {d.code for d in report.diagnostics}


def diags(report) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in report.diagnostics]


def refused(src: str, code: str, words: str = "") -> list[str]:
    """The program is refused with `code` (and, if given, `words` in that code's message); the
    notes of those diagnostics."""
    r = check(src)
    assert not r.ok and code in codes(r), [(d.code, d.message) for d in r.diagnostics]
    matching = [d for d in r.diagnostics if d.code == code]
    if words:
        assert any(words in d.message for d in matching), [d.message for d in matching]
    return [n for d in matching for n in d.notes]


def refused_report(src: str, code: str):
    """The program is refused with `code`; its report.  Only plain values enter the assertion:
    pytest would otherwise print the report, whose IR repr is a tree (exponential for a program
    with many shared instances, such as `fib`)."""
    r = check(src)
    ok, found = r.ok, [(d.code, d.message) for d in r.diagnostics]
    assert not ok and code in [c for c, _ in found], found
    return r


def exactly(src: str, epsilon, sensitivities=None, **kw):
    """The program is accepted with exactly this epsilon (and these mechanism sensitivities)."""
    r = check(src, **kw)
    assert r.ok, diags(r)
    assert r.epsilon == epsilon
    if sensitivities is not None:
        assert [m.sensitivity for m in r.mechanisms] == sensitivities
    return r


def assert_rejected(code: str, src: str) -> None:
    """The attack is refused, with this error code among the diagnostics."""
    r = check(src)
    assert not r.ok
    assert code in codes(r), [(d.code, d.message) for d in r.diagnostics]


def assert_accepted_exactly(src: str, epsilon, sensitivities: list) -> None:
    """The program is accepted with exactly this epsilon and these mechanism sensitivities."""
    r = check(src)
    assert r.ok, [(d.code, d.message) for d in r.diagnostics]
    assert r.epsilon == epsilon
    assert [m.sensitivity for m in r.mechanisms] == sensitivities


def make_tables(tmp_path):
    """load(rows, report=None, schema="T", header=HEADER) -> a table conformed by the real loader
    (the same dtypes as a real run)."""
    counter = [0]

    def load(rows: str, report=None, schema: str = "T", header: str = HEADER):
        report = report or check("function main (db : bag T) : fuzzy num { return 0 }")
        counter[0] += 1
        path = tmp_path / f"t{counter[0]}.csv"
        path.write_text(header + rows)
        return load_table(path, report.schemas[schema], table="db")

    return load


def run_result(report, db, seed: int = 0, vectorise: bool = True):
    """The whole result of a seeded run on `db` (value, releases), row functions vectorised or not."""
    return run_program(report.entry_instance, {"db": db}, RandomSource.seeded(seed), vectorise=vectorise)


def run(report, db, seed: int = 0):
    return run_program(report.entry_instance, {"db": db}, RandomSource.seeded(seed)).value


def outcome(report, db, seed: int = 0):
    """What an observer of a run sees: the released value, or the fact that it failed."""
    try:
        return ("value", run(report, db, seed))
    except BaseException as exc:  # noqa: BLE001 - any failure is an observable outcome
        return ("failed", type(exc).__name__)


def moved(report, db, neighbour, seed: int = 5) -> Fraction:
    """How far the (only) Laplace release moved between two tables, same seed, same noise.  A
    value on the noise grid (an integer here) consumes no rounding coin, so the difference of two
    Laplace releases is exactly the difference of the values the mechanism was handed."""
    return abs(Fraction(run(report, neighbour, seed)) - Fraction(run(report, db, seed)))


def same_release(a, b) -> bool:
    """Equal released values, NaN included (NaN != NaN, but it is the same observation)."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same_release(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_release(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return a == b


def violations(report, tables, pairs=PAIRS) -> list[tuple[str, str]]:
    """Every oracle violation of an accepted program on the given neighbouring tables (both
    directions of each pair)."""
    assert report.ok, diags(report)
    out = []
    for a, b in pairs:
        for x, y in ((a, b), (b, a)):
            pr = audit_pair(report.entry_instance, report.epsilon, {"db": tables(x)}, {"db": tables(y)})
            out += [(v.kind, v.detail) for v in pr.violations]
    return out


def audit(src: str, tables, rows_a: str, rows_b: str, depth: int | None = None, timeout: float = 5.0):
    """Check `src` and run it on the two tables with the oracle (with the shared call-depth limit
    lowered to `depth`, for the checker and the runtime alike).  Returns (report, PairResult); a
    program refused before its entry point was built skips the test."""
    def go():
        r = check(src)
        if r.entry_instance is None:
            pytest.skip("refused before the entry point was built: nothing to run")
        eps = r.epsilon if r.ok else Fraction(1)
        return r, audit_pair(r.entry_instance, eps, {"db": tables(rows_a)}, {"db": tables(rows_b)}, timeout)

    if depth is None:
        return go()
    with call_depth(depth):
        return go()


def kinds(pair) -> list[str]:
    """The kinds of an audited pair's violations."""
    return [v.kind for v in pair.violations]
