"""`fuzzpy audit` on the command line: output formats, exit codes, refusals."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fuzzpy.audit import mechanisms
from fuzzpy.interfaces.cli import app

runner = CliRunner()

SCHEMA = 'schema T { x : num[0, 10], k : cat{"a", "b", "c"} }\n'


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_mechanism_audit_as_json():
    # randomized_response at epsilon 1/4, 20,000 fresh samples per side.
    res = invoke("audit", "--mechanism", "randomized_response", "--epsilon", "1/4", "--samples", "20000",
                 "--seed", "3", "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["claimed_epsilon_exact"] == "1/4" and out["violation"] is False
    assert out["verdict"] == "no violation found at this sample size"
    assert 0.1 < out["lower_bound"] <= 0.25
    w = out["witness"]
    assert w["input_a"] == "false" and w["input_b"] == "true"
    assert w["p1"]["n"] == 20_000 and w["p1"]["lower"] <= w["p1"]["estimate"] <= w["p1"]["upper"]
    assert out["seed"] == 3 and out["tests"] == len(out["tested"]) >= 1


def test_same_seed_same_report():
    args = ("audit", "--mechanism", "noisy_max", "--samples", "2000", "--seed", "9", "--format", "json")
    a, b = json.loads(invoke(*args).stdout), json.loads(invoke(*args).stdout)
    assert a["tested"] == b["tested"] and a["lower_bound"] == b["lower_bound"]


def test_a_violation_exits_with_5(monkeypatch):
    # Swap the laplace sampler for naive floating-point Laplace (test-only, never in the product).
    def naive(target, info, exact):
        return lambda x, n, rng: x + rng.laplace(0.0, 2.0, n)

    monkeypatch.setattr(mechanisms, "mechanism_sampler", naive)
    res = invoke("audit", "--mechanism", "laplace", "--samples", "5000", "--seed", "1")
    assert res.exit_code == 5, res.output
    assert "verdict: violation found" in res.stdout
    assert "lattice class" in res.stdout and "P[A in E]" in res.stdout


@pytest.mark.slow
def test_program_audit_text(tmp_path):
    prog = tmp_path / "count.fz"
    prog.write_text(SCHEMA + "param eps : num = 1;\n"
                    'function main (db : bag T) : fuzzy num { laplace eps (count (filter (fun r -> r.k == "b") db)) }\n')
    res = invoke("audit", str(prog), "--param", "eps=0.25", "--samples", "4000", "--seed", "2", "--max-pairs", "20")
    assert res.exit_code == 0, res.output
    assert "claimed epsilon:     1/4 (0.25)" in res.stdout
    assert "verdict: no violation found at this sample size" in res.stdout
    assert "witness" in res.stdout and "seed 2" in res.stdout
    assert "fuzzpy audit:" in res.stderr  # progress goes to stderr only


def test_ill_typed_programs_are_refused_with_their_diagnostics(tmp_path):
    prog = tmp_path / "leak.fz"
    prog.write_text(SCHEMA + "function main (db : bag T) : fuzzy num { return (count db) }\n")
    res = invoke("audit", str(prog))
    assert res.exit_code == 1
    assert "E0302" in res.stderr and "no claim to audit" in res.stderr
    assert res.stdout == ""


@pytest.mark.parametrize("args, text", [
    ((), "either a program"),
    (("x.fz", "--mechanism", "laplace"), "either a program"),
    (("--mechanism", "cauchy"), "--mechanism must be one of"),
    (("--mechanism", "laplace", "--epsilon", "-1"), "positive number"),
    (("--mechanism", "laplace", "--confidence", "1.5"), "--confidence"),
    (("--mechanism", "laplace", "--format", "xml"), "--format"),
    (("prog.fz", "--epsilon", "1"), "go with --mechanism"),
])
def test_usage_errors(args, text):
    res = invoke("audit", *args)
    assert res.exit_code == 2
    assert "E0701" in res.stderr and text in res.stderr


def test_gaussian_mechanism_audit_as_json():
    # rho 1/20 at delta 1e-6, 20,000 fresh samples per side (vectorised sampler).
    res = invoke("audit", "--mechanism", "gaussian", "--rho", "1/20", "--delta", "1e-6", "--samples", "20000",
                 "--seed", "3", "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["delta_exact"], out["rho_exact"], out["violation"]) == ("1/1000000", "1/20", False)
    # The accountant's certified epsilon (rho 0.05 at delta 1e-6: the continuous Gaussian's 1.3675714751
    # plus the discrete Gaussian's slack; the RDP conversion alone would claim 1.47159).
    assert 1.36757147 <= out["claimed_epsilon"] <= 1.36757147 * 1.01
    assert 0 < out["lower_bound"] < out["claimed_epsilon"]
    assert out["witness"]["delta"] == 1e-6 and out["witness"]["ratio"].startswith("(P[")


def small_search(monkeypatch):
    """The command's search without its climb and with 500 exploration draws per side (a smoke test
    of the command, not of the audit's power: tests/audit/test_gaussian.py measures that)."""
    from functools import partial

    from fuzzpy.audit import search

    monkeypatch.setattr(search, "AuditConfig", partial(search.AuditConfig, climb=0, explore=500))


def test_gaussian_program_audit_text(tmp_path, monkeypatch):
    small_search(monkeypatch)
    prog = tmp_path / "g.fz"
    prog.write_text(SCHEMA + "function main (db : bag T) : fuzzy num {\n"
                    '  gaussian 0.5 (count (filter (fun r -> r.k == "b") db)) }\n')
    # 1,000 fresh samples per side for each of the 3 pairs (no screening).
    args = ("audit", str(prog), "--samples", "1000", "--seed", "2", "--max-pairs", "3")
    res = invoke(*args, "--delta", "1e-5")
    assert res.exit_code == 0, res.output
    assert "claimed epsilon:     4.37718 (rounded up) at delta 1e-05 (from rho 1/2 (0.5) zCDP)" in res.stdout
    assert "on epsilon at delta 1e-05" in res.stdout and "verdict: no violation found" in res.stdout
    # Without a delta: a usage error that says why, before anything is sampled.
    res = invoke(*args)
    assert res.exit_code == 2 and res.stdout == ""
    assert "E0701" in res.stderr and "makes Gaussian releases" in res.stderr and "--delta" in res.stderr


def test_a_pure_program_given_a_delta_is_audited_at_delta_0(tmp_path, monkeypatch):
    small_search(monkeypatch)
    prog = tmp_path / "p.fz"
    prog.write_text(SCHEMA + "function main (db : bag T) : fuzzy num { laplace 0.5 (count db) }\n")
    res = invoke("audit", str(prog), "--delta", "1e-5", "--samples", "1000", "--seed", "2", "--max-pairs", "3",
                 "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["delta"] == 0 and out["rho"] is None and out["claimed_epsilon_exact"] == "1/2"
    assert out["search"]["climb_evaluations"] == 0
    assert any("audited at delta 0" in n for n in out["notes"])


@pytest.mark.parametrize("args, text", [
    (("--mechanism", "gaussian"), "needs --rho"),
    (("--mechanism", "gaussian", "--rho", "0"), "--rho expects a positive number"),
    (("--mechanism", "gaussian", "--rho", "1/20", "--epsilon", "1"), "takes --rho (zCDP), not --epsilon"),
    (("--mechanism", "laplace", "--rho", "1/20"), "--rho goes with --mechanism gaussian"),
    (("prog.fz", "--rho", "1/20"), "--rho goes with --mechanism gaussian"),
    (("--mechanism", "gaussian", "--rho", "1/20", "--delta", "0"), "strictly between 0 and 1"),
    (("--mechanism", "gaussian", "--rho", "1/20", "--delta", "1"), "strictly between 0 and 1"),
    (("--mechanism", "gaussian", "--rho", "1/20", "--delta", "-1e-5"), "strictly between 0 and 1"),
    (("--mechanism", "gaussian", "--rho", "1/20", "--delta", "tiny"), "strictly between 0 and 1"),
])
def test_gaussian_usage_errors(args, text):
    res = invoke("audit", *args)
    assert res.exit_code == 2, res.output
    assert "E0701" in res.stderr and text in res.stderr and res.stdout == ""


def test_the_audit_keeps_freed_memory_for_its_next_arrays(monkeypatch):
    """`fuzzpy audit` raises glibc's thresholds before sampling (interfaces/memory.py), once."""
    from fuzzpy.interfaces import audit_command

    asked = []
    monkeypatch.setattr(audit_command, "keep_freed_memory", lambda: asked.append(True) or True)
    res = invoke("audit", "--mechanism", "laplace", "--samples", "2000", "--seed", "1", "--format", "json")
    assert res.exit_code == 0, res.output
    assert asked == [True] and json.loads(res.stdout)["violation"] is False


@pytest.mark.parametrize("user_set", [None, "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"])
def test_the_memory_policy_changes_glibc_only_where_the_user_did_not(user_set):
    """In a fresh process (the setting is process-wide): on Linux with glibc the two thresholds
    are raised (mallopt accepts them); a user's own glibc variable wins, and nothing is changed."""
    import os
    import platform
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")}
    if user_set:
        env[user_set] = "glibc.malloc.trim_threshold=1048576" if user_set == "GLIBC_TUNABLES" else "1048576"
    code = "from fuzzpy.interfaces.memory import keep_freed_memory; print(keep_freed_memory())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert out.strip() == str(glibc and user_set is None)


# ---- odd but well-formed options: diagnostics, never a traceback ---------------------------------------

ONE_COLUMN = 'schema T { x : num[0, 1] }\n'
LAPLACE_COUNT = ONE_COLUMN + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n"


def _audit(program, args: list[str], *extra: str):
    """`fuzzpy audit ARGS EXTRA` with "PROGRAM" in ARGS standing for the program's path."""
    return invoke("audit", *[str(program) if a == "PROGRAM" else a for a in args], *extra)


AUDIT_CRASHES = {
    "negative-seed": (["--mechanism", "laplace", "--seed", "-1"], 2),
    "zero-max-pairs": (["PROGRAM", "--max-pairs", "0"], 2),
    "negative-max-pairs": (["PROGRAM", "--max-pairs", "-3"], 2),
    "laplace-tiny-epsilon": (["--mechanism", "laplace", "--epsilon", "1e-30", "--seed", "1"], 1),
    # fixed at the root (rr_flip_upper no longer overflows): the audit now simply runs
    "randomized-response-huge-epsilon": (["--mechanism", "randomized_response", "--epsilon", "800", "--seed", "1"], 0),
}


@pytest.mark.parametrize("name", sorted(AUDIT_CRASHES))
def test_audit_options_are_diagnostics_not_tracebacks(name, tmp_path):
    """Fourth review round, finding 5 (low, audit): odd but well-formed options ended in a Python
    traceback.

    docs/audit.md: exit 2 for a usage error (E0701), 1 for a program that cannot be audited
    (E0801), and never a traceback.  Then: `--seed -1` reached numpy's SeedSequence (ValueError
    "expected non-negative integer"); `--max-pairs 0` raised ValueError("no pairs to audit") from
    the search, while `--max-pairs -3` was silently taken as "all pairs but the last three";
    `--mechanism laplace --epsilon 1e-30` raised ValueError("scale too large for the batch
    sampler"); `--mechanism randomized_response --epsilon 800` raised OverflowError (the same
    round's finding 4, tests/checking/test_rule_mechanisms.py).  Each exited 1 with the exception,
    which the console entry printed as a traceback.  Suggested fix: validate --seed >= 0 and
    --max-pairs >= 1 (E0701); catch the sampler's ValueError/OverflowError and report E0801
    ("cannot audit at this epsilon")."""
    program = tmp_path / "p.fz"
    program.write_text(LAPLACE_COUNT)
    args, code = AUDIT_CRASHES[name]
    res = _audit(program, args, "--samples", "100")
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert res.exit_code == code and (code == 0 or "error[E0" in res.stderr)
    assert "Traceback" not in res.stderr + res.stdout


AUDIT_USAGE = {
    "nothing-to-audit": ([], "E0701"),
    "program-and-mechanism": (["PROGRAM", "--mechanism", "laplace"], "E0701"),
    "too-few-samples": (["PROGRAM", "--samples", "99"], "E0701"),
    "confidence-one": (["PROGRAM", "--confidence", "1"], "E0701"),
    "format-xml": (["PROGRAM", "--format", "xml"], "E0701"),
    "unknown-mechanism": (["--mechanism", "cauchy"], "E0701"),
    "zero-epsilon": (["--mechanism", "laplace", "--epsilon", "0"], "E0701"),
    "epsilon-with-a-program": (["PROGRAM", "--epsilon", "0.5"], "E0701"),
    "param-with-a-mechanism": (["--mechanism", "laplace", "--param", "e=1"], "E0701"),
}


@pytest.mark.parametrize("name", sorted(AUDIT_USAGE))
def test_audit_usage_errors_exit_2(name, tmp_path):
    """Fourth review round, handled: every documented usage error is E0701, exit 2."""
    program = tmp_path / "p.fz"
    program.write_text(LAPLACE_COUNT)
    args, code = AUDIT_USAGE[name]
    res = _audit(program, args)
    assert (res.exit_code, code in res.stderr, "Traceback" in res.stderr + res.stdout) == (2, True, False)


AUDIT_UNAUDITABLE = {
    # parse error, no entry point, an entry parameter that is not a table: diagnostics, exit 1, nothing sampled
    "parse-error": ("function main (db : bag T) : fuzzy num { laplace 1 (count db) ", "E0102"),
    "no-main": (ONE_COLUMN + "function f (db : bag T) : fuzzy num { laplace 1 (count db) }\n", "E0207"),
    "non-bag-entry": (ONE_COLUMN + "function main (x : num) : fuzzy num { laplace 1 x }\n", "E0801"),
    "mixed-entry": (ONE_COLUMN + "function main (db : bag T) (x : num) : fuzzy num { laplace 1 (count db + x) }\n",
                    "E0801"),
    "not-private": (ONE_COLUMN + "function main (db : bag T) : fuzzy num { return (count db) }\n", "E0302"),
}


@pytest.mark.parametrize("name", sorted(AUDIT_UNAUDITABLE))
def test_audit_refuses_what_it_cannot_audit_with_one_diagnostic(name, tmp_path):
    """Fourth review round, handled: a program that cannot be audited is one diagnostic, exit 1,
    nothing sampled."""
    text, code = AUDIT_UNAUDITABLE[name]
    program = tmp_path / "p.fz"
    program.write_text(text)
    res = invoke("audit", str(program), "--samples", "100", "--seed", "1")
    assert (res.exit_code, code in res.stderr) == (1, True)
    assert res.stdout == "" and "Traceback" not in res.stderr


def test_an_absurd_audit_epsilon_is_a_usage_error():
    """Fourth review round, finding 6 (low): `fuzzpy audit --epsilon` (_parse_epsilon) called
    Fraction(text) directly and hung on "1e99999999", bypassing the bounded reader fuzzpy/exact.py
    (the same finding for the language server's options: tests/interfaces/
    test_editor_agrees_with_check.py).  Suggested fix: read it with fuzzpy.exact.parse_exact."""
    from cpu_limited import finishes

    res = finishes(["-m", "fuzzpy.interfaces.cli", "audit", "--mechanism", "laplace", "--epsilon", "1e99999999",
                    "--samples", "100"])
    assert res is not None and res.returncode == 2 and "E0701" in res.stderr
