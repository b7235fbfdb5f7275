"""Rule Let (docs/soundness.md): the interpreter evaluates a bound expression even when its name is
unused, so its failure risk counts, used or not; only its distance depends on the uses.

Attacks found by the review rounds and pinned as regression tests.  Neighbouring tables differ by
one row (unbounded DP); runs use RandomSource.seeded (tests only).
"""

from __future__ import annotations

import pytest
from check_and_run import HEADER, ROW_A, T, check, codes, make_tables, outcome


@pytest.fixture
def tables(tmp_path):
    return make_tables(tmp_path)


FAILING_UNUSED = {
    "unused-let": "let z = down (count db * 100000);\n  laplace 1 (count db)",
    "times-zero": "return (down (count db * 100000) * 0)",
}


@pytest.mark.parametrize("name", sorted(FAILING_UNUSED))
def test_a_discarded_private_recursion_does_not_decide_the_runs_outcome(name, tables):
    """Third review round, finding 4 (high, runtime): private values the checker proved irrelevant
    were still computed, and their computation could fail.

    The interpreter is eager: `let z = e; body` evaluates e even if z is unused, and `e * 0`
    evaluates e (the fold returns 0 afterwards).  The checker charged nothing for either (z is
    unused; d_scale(0, .) drops even infinite entries).  A recursion whose depth is a private
    number (`down (count db * 100000)`) then raised RecursionError in the main interpreter when the
    table has a row, and returned when it is empty: the run failed (E0604, exit 4) or succeeded
    depending on the data, at epsilon 0 for the second program.  (Exact arithmetic opens the same
    channel through time and memory: squaring a private count k times under `* 0` costs 2^k-bit
    integers when count >= 2 and nothing when it is 0 or 1.)  Suggested fix (checker): a call of a
    recursive function whose recursion is controlled by a private argument makes termination
    depend on private data: charge it for those inputs whatever is done with the result.  Fixed
    by the failure effect: E0309."""
    r = check("function down (x : num) : num { if x > 0 then down (x - 1) else 0 }\n"
              f"function main (db : bag T) : fuzzy num {{\n  {FAILING_UNUSED[name]} }}")
    if not r.ok:
        assert "E0309" in codes(r)  # the failure effect: whether the run completes depends on db
        return
    assert outcome(r, tables(""))[0] == outcome(r, tables(ROW_A))[0]


def test_the_cli_shows_no_detail_of_such_a_failure(tmp_path):
    """Third review round, finding 4, what is handled: the program is now refused by the checker
    (E0309: computing the discarded value may fail depending on the data), and a run failure would
    reach the user only as the generic E0604, never a traceback or the exception's text."""
    from typer.testing import CliRunner

    from fuzzpy.interfaces.cli import app

    prog = tmp_path / "p.fz"
    prog.write_text(T + "function down (x : num) : num { if x > 0 then down (x - 1) else 0 }\n"
                    "function main (db : bag T) : fuzzy num { return (down (count db * 100000) * 0) }\n")
    data = tmp_path / "d.csv"
    data.write_text(HEADER + ROW_A)
    res = CliRunner().invoke(app, ["run", str(prog), "--data", str(data), "--budget", "0", "--seed", "1"],
                             catch_exceptions=False)
    assert (res.exit_code, "E0309") == (1, "E0309" if "E0309" in res.stderr else None)
    assert "Traceback" not in res.stderr + res.stdout and "Recursion" not in res.stderr + res.stdout
