"""No traceback ever reaches a user, and a run that checked never fails after its charge.

Public numbers (noise scales, epsilons, budgets, post-processed results) can be far beyond the
float range; the output stage formats every one of them by total functions, and a noise scale
no run could release is refused by the check (E0312), before any data is read or charged.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from fractions import Fraction as F
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuzzpy.interfaces.cli import app, run_app
from fuzzpy.ledger import Ledger
from fuzzpy.render import numbers as N

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SAMPLE = EXAMPLES / "data" / "adult_sample.csv"
QUICKSTART = EXAMPLES / "quickstart.fz"
CLI = [sys.executable, "-m", "fuzzpy.interfaces.cli"]
HANG_GUARD = 180

runner = CliRunner()
SCHEMA = 'schema Adult { age : num[17, 90], sex : cat{"Male", "Female"} }\n'


def fz(*args: object):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def _refuse(constant: str):
    raise ValueError(f"non-standard JSON constant {constant}")


def strict(text: str):
    """The whole text as one standard JSON value (no NaN, Infinity)."""
    return json.loads(text, parse_constant=_refuse)


def program(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "prog.fz"
    path.write_text(SCHEMA + body)
    return path


# ---- the top level catches everything -----------------------------------------------------------------


def test_an_uncaught_exception_is_a_coded_error_without_details(monkeypatch, capsys):
    from fuzzpy.pipeline import budget as report

    def boom(*args, **kwargs):
        secret_row = {"age": 42, "name": "SECRET-PERSON"}  # a local a rich traceback would show
        raise RuntimeError(f"cannot handle {secret_row}")

    monkeypatch.setattr(report, "check_with_budget", boom)
    code = run_app(["check", str(QUICKSTART)])
    out, err = capsys.readouterr()
    assert code == 1
    assert "error[E0901]: internal error in fuzzpy (RuntimeError)" in err
    assert "SECRET" not in out + err and "Traceback" not in out + err


@pytest.mark.parametrize("exc, code, text", [(KeyboardInterrupt, 130, ""), (MemoryError, 1, "E0901")])
def test_interrupts_and_base_exceptions_end_cleanly(monkeypatch, capsys, exc, code, text):
    from fuzzpy.pipeline import budget as report

    def raise_it(*args, **kwargs):
        raise exc()

    monkeypatch.setattr(report, "check_with_budget", raise_it)
    assert run_app(["check", str(QUICKSTART)]) == code
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err


def test_usage_errors_and_help_keep_their_exit_codes(capsys):
    assert run_app(["check", str(QUICKSTART), "--format", "xml"]) == 2
    assert run_app(["--help"]) == 0
    assert run_app(["no-such-command"]) == 2
    assert run_app(["check", str(QUICKSTART)]) == 0


def test_the_console_entry_point_shows_no_traceback_and_no_locals(tmp_path):
    code = ("import sys\n"
            "from fuzzpy.pipeline import budget as report\n"
            "def boom(*a, **k):\n"
            "    private_rows = ['SECRET-ROW-1', 'SECRET-ROW-2']\n"
            "    raise ValueError('bad ' + private_rows[0])\n"
            "report.check_with_budget = boom\n"
            "from fuzzpy.interfaces.cli import main\n"
            "sys.argv = ['fuzzpy', 'check', sys.argv[1]]\n"
            "main()\n")
    done = subprocess.run([sys.executable, "-c", code, str(QUICKSTART)], capture_output=True, text=True,
                          timeout=HANG_GUARD, cwd=ROOT)
    assert done.returncode == 1
    assert "E0901" in done.stderr and "ValueError" in done.stderr
    assert "SECRET" not in done.stderr + done.stdout and "Traceback" not in done.stderr


def test_typer_would_never_print_locals():
    assert app.pretty_exceptions_enable is False and app.pretty_exceptions_show_locals is False


def test_a_closed_pipe_is_quiet():
    proc = subprocess.Popen([*CLI, "check", str(EXAMPLES), "--format", "json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.read(10)
    proc.stdout.close()  # like `| head -c 10`
    err = proc.stderr.read().decode()
    proc.wait(HANG_GUARD)
    assert "Traceback" not in err and "Exception ignored" not in err


# ---- noise scales no run can release: refused before the charge --------------------------------------


@pytest.mark.parametrize("eps", ["1e-307", "1e-308", "3e-301"])
def test_a_noise_scale_beyond_the_float_range_is_refused_before_anything_is_charged(tmp_path, eps):
    book = tmp_path / "ledger.sqlite"
    res = fz("run", QUICKSTART, "--data", SAMPLE, "--budget", "1", "--param", f"eps={eps}", "--ledger", book)
    assert res.exit_code == 1
    assert "error[E0312]: the noise scale of this laplace is" in res.stderr
    assert "at most 1e300" in res.stderr and "examples/quickstart.fz:18:18" in res.stderr
    assert "raise epsilon" in res.stderr
    assert not book.exists() and "2 error(s)" in res.stdout


def test_the_check_reports_it_in_text_json_and_sarif(tmp_path):
    text = fz("check", QUICKSTART, "--param", "eps=3e-307")
    assert text.exit_code == 1 and text.stderr.count("E0312") == 2 and "3.333e+306" in text.stderr
    out = strict(fz("check", QUICKSTART, "--param", "eps=3e-307", "--format", "json").stdout)
    assert [d["code"] for d in out["diagnostics"]] == ["E0312", "E0312"]
    scales = {m["scale_exact"]: m["scale"] for m in out["mechanisms"]}
    assert scales[str(F(10**307, 3))] == pytest.approx(10**307 / 3)
    assert scales[str(F(9 * 10**308, 3))] is None  # no finite double: null, the exact text stays
    sarif = strict(fz("check", QUICKSTART, "--param", "eps=3e-307", "--format", "sarif").stdout)
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} >= {"E0312"}


def test_scales_up_to_the_limit_run_and_print(tmp_path):
    res = fz("run", QUICKSTART, "--data", SAMPLE, "--budget", "1", "--param", "eps=1e-297", "--seed", "1",
             "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = strict(res.stdout)
    bounds = [r["accuracy"]["bound"] for r in out["releases"]]
    assert bounds[0] == pytest.approx(2.9957e297, rel=1e-3) and math.isfinite(bounds[1])


def test_sparse_vector_query_scale_is_checked_too(tmp_path):
    prog = program(tmp_path, "function main (db : bag Adult) : fuzzy (list bool) {\n"
                             "  above_threshold 1e-290 1000000000000 10 [1, 2] (fun q -> count db)\n}")
    res = fz("check", prog)
    assert res.exit_code == 1 and "E0312" in res.stderr and "above_threshold" in res.stderr


def test_randomized_response_with_a_tiny_epsilon_is_fine(tmp_path):
    prog = program(tmp_path, "function main (db : bag Adult) : fuzzy bool {\n"
                             "  randomized_response 1e-305 (count db > 10)\n}")
    res = fz("run", prog, "--data", SAMPLE, "--budget", "1", "--seed", "3")
    assert res.exit_code == 0, res.stderr


# ---- the output stage is total -------------------------------------------------------------------------


def test_post_processed_results_beyond_the_float_range_print(tmp_path):
    prog = program(tmp_path, "function main (db : bag Adult) : fuzzy (num, num, num) {\n"
                             "  sample n = laplace 0.5 (count db);\n"
                             "  return (n * 1e300 * 1e300, 0 - n * 1e300 * 1e300 / 3, n)\n}")
    text = fz("run", prog, "--data", SAMPLE, "--budget", "1", "--seed", "1")
    assert text.exit_code == 0, text.stderr
    assert "result: (inf, -inf, " in text.stdout
    out = strict(fz("run", prog, "--data", SAMPLE, "--budget", "1", "--seed", "1", "--format", "json").stdout)
    assert out["result"][:2] == ["inf", "-inf"]


def test_an_epsilon_and_a_budget_beyond_the_float_range_print(tmp_path):
    prog = program(tmp_path, "function main (db : bag Adult) : fuzzy num {\n"
                             "  laplace (1e300 * 1e99) (count db)\n}")
    res = fz("run", prog, "--data", SAMPLE, "--budget", "1e400", "--seed", "1")
    assert res.exit_code == 0, res.stderr
    assert f"epsilon {10**399} of budget {10**400}" in res.stdout
    res = fz("run", prog, "--data", SAMPLE, "--budget", "1e400", "--seed", "1", "--format", "json")
    out = strict(res.stdout)
    assert out["epsilon"] is None and out["epsilon_exact"] == str(10**399)
    assert out["budget"] is None and out["budget_exact"] == str(10**400)
    assert out["releases"][0]["epsilon"] is None and math.isfinite(out["releases"][0]["value"])


def test_a_formatting_bug_after_the_release_still_shows_the_values(tmp_path, monkeypatch):
    from fuzzpy.pipeline import output

    def broken(shown, outcome, fmt):
        raise OverflowError("formatting")

    monkeypatch.setattr(output, "_success", broken)
    book = tmp_path / "ledger.sqlite"
    res = fz("run", QUICKSTART, "--data", SAMPLE, "--budget", "1", "--ledger", book)
    assert res.exit_code == 4
    assert "E0901" in res.stderr and "n = " in res.stdout and "total = " in res.stdout
    assert [e.status for e in Ledger(book).entries()] == ["released"]


def test_release_accuracy_is_exact_for_any_grid_scale():
    from fuzzpy.runtime.noise import Release

    huge = Release(0.0, F(10**600), F(1), F(10**600) + F(1, 2))
    assert huge.accuracy(F(1, 20)) > F(29, 10) * 10**600
    small = Release(0.0, F(10), F(10, 4096), F(4096, 1) + F(1, 2))
    assert float(small.accuracy(F(1, 20))) == pytest.approx(29.96, abs=0.01)


@pytest.mark.parametrize("value, as_float, as_json, text", [
    (F(1, 3), 1 / 3, 1 / 3, "1/3"),
    (F(10**400, 3), math.inf, None, "3.333e+399"),
    (-F(10**400, 7), -math.inf, None, "-1.429e+399"),
    (10**400, math.inf, None, str(10**400)),
    (F(1, 10**400), 0.0, 0.0, f"1/{10**400}"),
])
def test_numbers_are_converted_by_total_functions(value, as_float, as_json, text):
    assert N.to_float(value) == as_float
    assert N.json_number(value) == as_json
    assert N.show(value) == text


def test_dumps_never_writes_nan_or_infinity():
    out = N.dumps({"a": [math.inf, -math.inf, math.nan, 1.5], "b": (math.inf,)})
    assert strict(out) == {"a": ["inf", "-inf", "nan", 1.5], "b": ["inf"]}
