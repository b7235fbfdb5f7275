"""The `# fuzzpy: budget B` pragma: a budget written in the program itself, which `fuzzpy check`,
`fuzzpy run` and the editor enforce whatever budget the command line gives.  Every line that looks
like a pragma counts (the smallest wins), and a malformed or near-miss one is an error, never
silently an ordinary comment."""

from __future__ import annotations

from fractions import Fraction as F

import pytest
from check_and_run import T
from cli_runs import fz, write

from fuzzpy.checking.program import check_source

ONE_COLUMN = 'schema T { x : num[0, 1] }\n'


def cli_full(report) -> set[str]:
    """The diagnostics `fuzzpy check` reports for the same text (budget rules applied)."""
    from fuzzpy.pipeline import budget as R

    R.apply_budget(report, None)
    return {d.code for d in report.diagnostics}


PRAGMA_BYPASSES = {
    "second-stricter-pragma": "# fuzzpy: budget 5\n# fuzzpy: budget 0.1\n",
    "exponent-notation": "# fuzzpy: budget 1e-1\n",
    "leading-dot": "# fuzzpy: budget .5\n",
    "trailing-comment": "# fuzzpy: budget 0.5  # reviewed by the DPO\n",
}


@pytest.mark.parametrize("name", sorted(PRAGMA_BYPASSES))
def test_the_programs_own_budget_cannot_be_bypassed(name, tmp_path):
    """Second review round (the runtime), finding R6 (medium): the pragma was read with re.search:
    only the first matching line counted, so a stricter pragma added further down (what a reviewer
    sees in a diff) was ignored.  And a pragma the regex did not accept (`1e-1`, `.5`, a trailing
    comment) was silently not a pragma at all, so `--budget 10` applied: the program ran with a
    budget far above the one written in it.  Suggested fix (checking/program.py pragma_budget):
    collect every line that starts like a pragma (`#\\s*fuzzpy:`), take the minimum, and make a
    malformed one an error (any syntax Fraction accepts, validated, with a location)."""
    path = write(tmp_path / "p.fz", PRAGMA_BYPASSES[name] + T
                 + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n")  # epsilon 1
    res = fz("check", path, "--budget", "10")
    assert res.exit_code != 0  # E0401 (over the pragma's budget) or an error about the pragma itself


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_zero_denominator_budget_pragma_is_a_diagnostic(tmp_path):
    """Second review round, finding R8 (low): `# fuzzpy: budget 1/0` matched the pragma regex and
    Fraction("1/0") raised ZeroDivisionError while checking.  At first a Python traceback
    (KeyError('report') from check_source); then check_source's catch-all turned it into E0901
    "internal error in the checker (ZeroDivisionError); this is a bug in fuzzpy", pointing at line 1
    column 1: a user's typo reported as a fuzzpy bug, without saying what is wrong.  Suggested fix
    (checking/program.py pragma_budget): parse the pragma's amount in a try and report a diagnostic
    of its own (with the pragma's line), as for R6."""
    path = write(tmp_path / "p.fz", "# fuzzpy: budget 1/0\n" + T
                 + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n")
    res = fz("check", path, catch=True)
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert res.exit_code == 1 and "error[E" in res.stderr
    assert "E0901" not in res.stderr and "internal error" not in res.stderr


@pytest.mark.parametrize("line", ["# fuzzpy: Budget 0.1", "# fuzzpy budget 0.1", "# FUZZPY: budget 0.1"])
def test_a_near_miss_pragma_is_enforced_or_reported(line):
    """Fourth review round, finding 8 (low): a near-miss budget pragma was silently not a pragma.
    read_pragmas (checking/program.py) promises "a malformed one is an error (E0103) rather than
    silently not a pragma", but the regex `^\\s*#\\s*fuzzpy:\\s*budget\\b` was case-sensitive and
    needed the colon after "fuzzpy": `# fuzzpy: Budget 0.1` or `# fuzzpy budget 0.1` was an
    ordinary comment, so a reviewer saw a budget of 0.1 that nothing enforced (the program below,
    epsilon 1, was accepted with exit 0).  Suggested fix: match `#\\s*fuzzpy\\b.*budget`
    case-insensitively and report E0103 for anything that is not exactly the documented form."""
    r = check_source(line + "\n" + ONE_COLUMN + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n",
                     "t.fz")
    assert cli_full(r) & {"E0401", "E0103"}


@pytest.mark.parametrize("line", ["# fuzzpy: budget 0.1", "  #fuzzpy:budget 1/10", "# fuzzpy: budget 0.1  # why",
                                  "# fuzzpy: budget 5\n# fuzzpy: budget 0.1"])
def test_well_formed_pragmas_are_enforced_and_the_smallest_wins(line):
    """Fourth review round, finding 8, the control."""
    r = check_source(line + "\n" + ONE_COLUMN + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n",
                     "t.fz")
    assert cli_full(r) == {"E0401"} and r.budget == F(1, 10)
