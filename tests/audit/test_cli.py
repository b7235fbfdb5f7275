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
