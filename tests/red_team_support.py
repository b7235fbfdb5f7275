"""What the red-team test files share: the schema the attacks run on, neighbouring tables built by
the real loader, and what an observer of a run sees."""

from __future__ import annotations

from fuzzpy.checking.program import check_source
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.interpreter import run_program
from fuzzpy.runtime.samplers import RandomSource

T = 'schema T { x : num[0, 10], k : cat{"a", "b", "c"}, flag : bool, n : int[0, 5] }\n'
HEADER = "x,k,flag,n\n"
ROW_A = "1,a,true,1\n"
ROW_B = "9,b,false,3\n"   # the individual whose presence the attacks try to learn


def check(src: str, **kw):
    return check_source(T + src, "t.fz", **kw)


def codes(report) -> set[str]:
    return {d.code for d in report.diagnostics}


def refused(src: str, code: str, words: str = "") -> list[str]:
    """The program is refused with `code` (and, if given, `words` in that code's message); the
    notes of those diagnostics."""
    r = check(src)
    assert not r.ok and code in codes(r), [(d.code, d.message) for d in r.diagnostics]
    diags = [d for d in r.diagnostics if d.code == code]
    if words:
        assert any(words in d.message for d in diags), [d.message for d in diags]
    return [n for d in diags for n in d.notes]


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


def run(report, db, seed: int = 0):
    return run_program(report.entry_instance, {"db": db}, RandomSource.seeded(seed)).value


def outcome(report, db, seed: int = 0):
    """What an observer of a run sees: the released value, or the fact that it failed."""
    try:
        return ("value", run(report, db, seed))
    except BaseException as exc:  # noqa: BLE001 - any failure is an observable outcome
        return ("failed", type(exc).__name__)


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
