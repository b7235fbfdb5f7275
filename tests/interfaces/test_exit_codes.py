"""The command line's exit codes for every documented case, and usage errors (bad flags, budgets,
params, table names, unreadable programs) reported before any file is read or anything charged:
`fuzzpy check` exits 0, 1 (errors), 3 (over budget) or 2 (usage); `fuzzpy run` checks, then
budgets, then reads data (4 for data and ledger errors)."""

from __future__ import annotations

import subprocess

import pytest
from check_and_run import ROW_A, T
from cli_runs import cli_subprocess, data, fz, prog, write

ONE_COLUMN = 'schema T { x : num[0, 1] }\n'
GOOD = ONE_COLUMN + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n"
LEAK = ONE_COLUMN + "function main (db : bag T) : fuzzy num { return (count db) }\n"
OVER = "# fuzzpy: budget 0.5\n" + GOOD


@pytest.fixture(autouse=True)
def _never_the_default_ledger(tmp_path, monkeypatch):
    """Belt and braces: a run that forgot --ledger books into tmp_path, never ~/.fuzzpy."""
    monkeypatch.setenv("FUZZPY_LEDGER", str(tmp_path / "env-ledger.sqlite"))


def test_check_exit_codes(tmp_path):
    """Fourth review round (the command line's exit codes), handled."""
    good, leak, over = write(tmp_path / "g.fz", GOOD), write(tmp_path / "l.fz", LEAK), write(tmp_path / "o.fz", OVER)
    empty = tmp_path / "empty"
    empty.mkdir()
    got = {
        "ok": fz("check", good, catch=True).exit_code,
        "errors": fz("check", leak, catch=True).exit_code,
        "pragma": fz("check", over, catch=True).exit_code,
        "budget-flag": fz("check", good, "--budget", "0.5", catch=True).exit_code,
        "bad-format": fz("check", good, "--format", "xml", catch=True).exit_code,
        "bad-param": fz("check", good, "--param", "eps", catch=True).exit_code,
        "no-files": fz("check", empty, catch=True).exit_code,
        "missing-file": fz("check", tmp_path / "none.fz", catch=True).exit_code,
    }
    assert got == {"ok": 0, "errors": 1, "pragma": 3, "budget-flag": 3, "bad-format": 2, "bad-param": 2,
                   "no-files": 2, "missing-file": 1}


def test_run_exit_codes_and_the_order_of_operations(tmp_path):
    """Fourth review round, handled: a run refuses before any file is read, and nothing above ever
    reaches the ledger."""
    good, over = write(tmp_path / "g.fz", GOOD), write(tmp_path / "o.fz", OVER)
    data_file = write(tmp_path / "d.csv", "x\n1\n")
    nonbag = write(tmp_path / "n.fz", ONE_COLUMN + "function main (x : num) : fuzzy num { laplace 1 x }\n")
    ledger = tmp_path / "l.sqlite"
    missing = tmp_path / "missing.csv"

    res = fz("run", good, "--data", data_file, "--ledger", ledger, catch=True)                   # no budget anywhere
    assert (res.exit_code, "needs a budget" in res.stderr) == (2, True)
    res = fz("run", over, "--data", missing, "--ledger", ledger, catch=True)                     # over budget: before any file
    assert (res.exit_code, "E0401" in res.stderr, "E0501" in res.stderr) == (3, True, False)
    res = fz("run", good, "--data", data_file, "--budget", "1", "--seed", "1", "--ledger", ledger, catch=True)
    assert (res.exit_code, "E0603" in res.stderr) == (2, True)
    res = fz("run", good, "--data", missing, "--budget", "1", "--ledger", ledger, catch=True)
    assert (res.exit_code, "E0501" in res.stderr) == (4, True)
    res = fz("run", nonbag, "--data", data_file, "--budget", "1", "--seed", "1", catch=True)
    assert (res.exit_code, "E0701" in res.stderr) == (2, True)
    assert not ledger.exists()  # nothing above ever reached the ledger


def test_ledger_set_cap_on_a_missing_file_exits_2(tmp_path):
    """Fourth review round, handled."""
    res = fz("ledger", "set-cap", "--data", tmp_path / "missing.csv", "--cap", "1", "--ledger", tmp_path / "l.sqlite",
             catch=True)
    assert (res.exit_code, "E0501" in res.stderr) == (2, True)
    assert not (tmp_path / "l.sqlite").exists()


def test_the_cli_refuses_absurd_and_negative_budgets_at_once(tmp_path):
    """Fourth review round, finding 6 (numbers read without the bounded reader), the CLI side: an
    absurd or negative budget is a usage error at once."""
    program = write(tmp_path / "p.fz", GOOD)
    for value in ("1e99999999", "-0.5"):
        res = fz("check", program, "--budget", value, catch=True)
        assert (res.exit_code, "E0701" in res.stderr) == (2, True)


def test_an_absurd_budget_is_refused_at_once(tmp_path):
    """Second review round (the runtime), finding R9 (low): `--budget 1e99999999` (and `ledger
    set-cap --cap`, and an amount stored in a tampered ledger) was parsed with Fraction(text), which
    computes 10**99999999 exactly: the command hung for minutes instead of answering with a usage
    error.  Suggested fix: reject amounts whose exponent or digit count is absurd (say |exponent| >
    400) before calling Fraction."""
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 1 (count db) }")
    try:
        res = cli_subprocess(["run", program, "--data", data(tmp_path, ROW_A), "--budget", "1e99999999",
                              "--seed", "1"], timeout=300, cpu_seconds=30)
    except subprocess.TimeoutExpired:
        pytest.fail("fuzzpy run --budget 1e99999999 did not finish in 300 s")
    assert res.returncode >= 0, "fuzzpy run --budget 1e99999999 computed for more than 30 s of CPU"
    assert res.returncode in (0, 2)


@pytest.mark.parametrize("value", ["(", "1/0", "count db", "fun (x : num) -> x", '"s"', "laplace 1 1", "-1"])
def test_junk_params_are_diagnostics(value, tmp_path):
    """Second review round (the runtime), handled."""
    program = write(tmp_path / "p.fz", T + "param eps : num = 0.5;\n"
                    "function main (db : bag T) : fuzzy num { laplace eps (count db) }\n")
    res = fz("run", program, "--data", tmp_path / "missing.csv", "--budget", "1", "--param", f"eps={value}",
             "--ledger", tmp_path / "l.sqlite", catch=True)
    # A value that is not a constant of the parameter's type is a malformed argument (E0702, a
    # usage error, exit 2); "-1" is a number, refused by laplace's rule (exit 1).
    assert isinstance(res.exception, SystemExit) and res.exit_code == (1 if value == "-1" else 2)
    assert ("error[E0702]" in res.stderr) == (value != "-1")
    assert "error[E0" in res.stderr and "E0501" not in res.stderr
    assert not (tmp_path / "l.sqlite").exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1/0", "abc", "", "0x10"])
def test_junk_budgets_are_usage_errors(value, tmp_path):
    """Second review round (the runtime), handled."""
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 1 (count db) }")
    res = fz("run", program, "--data", tmp_path / "missing.csv", "--budget", value, "--ledger", tmp_path / "l.sqlite",
             catch=True)
    assert isinstance(res.exception, SystemExit) and res.exit_code == 2
    assert "E0701" in res.stderr and not (tmp_path / "l.sqlite").exists()


def test_unknown_table_names_are_reported_before_any_file_is_opened(tmp_path):
    """Second review round (the runtime), handled."""
    program = prog(tmp_path, "function main (db : bag T) : fuzzy num { laplace 1 (count db) }")
    res = fz("run", program, "--data", f"nope={tmp_path / 'missing.csv'}", "--budget", "1",
             "--ledger", tmp_path / "l.sqlite")
    assert res.exit_code == 4 and "E0507" in res.stderr and "E0506" in res.stderr and "E0501" not in res.stderr
    assert not (tmp_path / "l.sqlite").exists()


@pytest.mark.parametrize("kind", ["folder", "binary", "missing"])
def test_unreadable_programs_are_diagnostics(kind, tmp_path):
    """Second review round (the runtime), handled."""
    path = {"folder": tmp_path, "binary": tmp_path / "p.fz", "missing": tmp_path / "none.fz"}[kind]
    if kind == "binary":
        path.write_bytes(b"\xff\xfe\x00binary")
    res = fz("run", path, "--data", data(tmp_path, ROW_A), "--budget", "1", "--ledger", tmp_path / "l.sqlite",
             catch=True)
    assert isinstance(res.exception, SystemExit) and res.exit_code == 1 and "E0104" in res.stderr


def test_an_unknown_param_is_a_usage_error(tmp_path):
    """Issue 38: `--param NAME=V` for a parameter the program does not declare exits 2 (usage), as
    a malformed --param does, in `check` and in `run` (before any data is read); a program whose
    own error is E0211 alongside others still exits 1."""
    good = write(tmp_path / "g.fz", "param eps : num = 1;\n" + GOOD)
    assert fz("check", good, "--param", "epz=2", catch=True).exit_code == 2
    res = fz("run", good, "--data", tmp_path / "absent.csv", "--budget", "1", "--param", "epz=2", catch=True)
    assert res.exit_code == 2 and "E0211" in res.output and "did you mean eps?" in res.output
    leak = write(tmp_path / "l.fz", LEAK)
    assert fz("check", leak, "--param", "nope=1", catch=True).exit_code == 1
