"""`fuzzpy check --formula text|latex`: the formula next to the exact number in text, JSON fields
(strict json.loads on the whole stdout of a real process) and LaTeX; no formula and a reason when
there is none; sympy is never imported by a check without --formula."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from fuzzpy.interfaces.cli import app

ROOT = Path(__file__).resolve().parents[2]
KMEANS = ROOT / "examples" / "kmeans.fz"
runner = CliRunner()


def fz(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_text_shows_the_formula_next_to_the_number():
    res = fz("check", KMEANS, "--formula", "text", "--param", "T=4")
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "privacy: epsilon = 0.6, delta = 0  (main; per input: db 0.6)" in lines
    line = next(x for x in lines if x.startswith("formula: "))
    assert line.startswith("formula: epsilon = 3*T*eps  (= 0.6 at k = 3, T = 4, eps = 0.05; matches the checker at ")
    assert "a fit, not a proof for other values" in line
    assert "  step: sensitivity in db = 3*eps  (= 0.15; " in res.stdout


def test_latex_and_no_formula_without_the_option():
    res = fz("check", KMEANS, "--formula", "latex")
    assert res.exit_code == 0
    assert "formula: epsilon = 3 T eps  (= 0.75 at k = 3, T = 5, eps = 0.05;" in res.stdout
    plain = fz("check", KMEANS)
    assert plain.exit_code == 0 and "formula:" not in plain.stdout and "formulas:" not in plain.stdout


def test_bad_formula_option_is_a_usage_error():
    res = fz("check", KMEANS, "--formula", "mathml")
    assert res.exit_code == 2 and "--formula must be text or latex, got 'mathml'" in res.stderr
    res = fz("check", KMEANS, "--formula", "text", "--server", "http://127.0.0.1:9", "--dataset", "adult")
    assert res.exit_code == 2 and "--formula works on local checks only, not with --server" in res.stderr


def test_no_formula_for_a_piecewise_cost(tmp_path: Path):
    prog = tmp_path / "max.fz"
    prog.write_text(textwrap.dedent("""\
        schema R { x : num[0, 100] }
        param eps : num = 0.05;
        function main (db : bag R) : fuzzy num { laplace (max eps 0.1) (count db) }
        """))
    res = fz("check", prog, "--formula", "text")
    assert res.exit_code == 0
    assert "privacy: epsilon = 0.1, delta = 0" in res.stdout
    assert "formula: no formula for epsilon: not one polynomial in the parameters" in res.stdout
    data = json.loads(fz("check", prog, "--formula", "text", "--format", "json").stdout)
    assert data["epsilon_formula"] is None and data["epsilon_latex"] is None and data["epsilon_exact"] == "1/10"
    cost = next(c for c in data["formulas"]["costs"] if c["name"] == "epsilon")
    assert cost["status"] == "none" and "eps = 0.15" in cost["reason"]


def test_no_formula_for_a_program_that_does_not_check(tmp_path: Path):
    prog = tmp_path / "bad.fz"
    prog.write_text("schema R { x : num }\nparam eps : num = 1;\nfunction main (db : bag R) : fuzzy num "
                    "{ return (count db) }\n")
    res = fz("check", prog, "--formula", "text", "--format", "json")
    data = json.loads(res.stdout)
    assert res.exit_code == 1 and data["ok"] is False
    assert data["epsilon_formula"] is None and data["formulas"]["note"] == "the program does not check"


TREE = textwrap.dedent("""\
    schema R { a : cat{"x", "y"} }
    param eps : num = 0.1;
    param depth : int = 2;
    function grow (db : bag R) (d : int) : fuzzy num {
      sample n = laplace eps (count db);
      if d <= 0 then return n
      else
        sample c = laplace eps (count db);
        sample subs = each (fun g -> grow g (d - 1)) (groupby (fun r -> r.a) db);
        return (n + c)
    }
    function main (db : bag R) : fuzzy num { grow db depth }
    """)


def test_json_fields_in_a_real_process_and_sympy_only_when_asked(tmp_path: Path):
    prog = tmp_path / "tree.fz"
    prog.write_text(TREE)
    # One process: a plain check first (its text kept off stdout) must not import sympy; then
    # the JSON with formulas is the whole stdout.
    script = ("import contextlib, io, sys; from fuzzpy.interfaces.cli import run_app\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              "    assert run_app(['check', %r]) == 0\n"
              "print('sympy' in sys.modules, file=sys.stderr)\n"
              "sys.exit(run_app(['check', %r, '--format', 'json', '--formula', 'latex', '--param', 'depth=3']))"
              ) % (str(prog), str(prog))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "False" in out.stderr.splitlines() and "True" not in out.stderr.splitlines(), out.stderr
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)  # the whole stdout: nothing else is printed there
    assert data["epsilon_exact"] == "7/10"
    assert data["epsilon_formula"] == "eps*(2*depth + 1)"
    assert data["epsilon_latex"] == r"eps \left(2 depth + 1\right)"
    assert data["rho_formula"] is None and data["rho_latex"] is None
    assert data["formulas"]["params"] == {"eps": 0.1, "depth": 3}
    costs = {c["name"]: c for c in data["formulas"]["costs"]}
    assert costs["epsilon"]["status"] == "checked" and costs["epsilon"]["value_exact"] == "7/10"
    assert costs["main.db"]["formula"] == "eps*(2*depth + 1)" and data["formulas"]["points"] >= 6

