"""The `exp` primitive (fuzzpy/primitives/library.py), used by stdlib/ml.fz (logistic function)
and by MWEM: infinitely sensitive in private inputs, public on public ones, total at run time."""

import math
from fractions import Fraction as F

import numpy as np
from conftest import check, codes
from stdlib_support import load_rows, mechanisms, probe, probe_type, run

from fuzzpy.primitives.registry import lookup
from fuzzpy.runtime.kernels.library import exp as _exp_run


def test_exp_is_unbounded_in_private_inputs_and_positive():
    assert probe_type("(x : num)", "exp x") == "num -> num[0, inf]"
    assert probe_type("(x : num)", "exp (clip 0 1 x)") == "num -> num[0, inf]"


def test_exp_of_public_values_is_public():
    r = probe("(db : bag Row)", "sample n = laplace 1 (count db); laplace 1 (exp (n / 1000))")
    assert r.epsilon == 1
    assert ("laplace", 0, 0, 0) in mechanisms(r)  # exp of a released value: nothing to hide


def test_exp_in_a_row_function_then_clipped_is_fine():
    r = probe("(db : bag Row)", "laplace (1 / 2) (sum (map (fun r -> clip 0 3 (exp (r.x / 100))) db))")
    assert r.epsilon == F(1, 2)
    assert mechanisms(r) == [("laplace", 3, F(1, 2), 6)]


def test_exp_of_a_private_number_cannot_be_released():
    r = check('schema T { x : num[0, 10] }\nfunction main (db : bag T) : fuzzy num { laplace 1 (exp (count db)) }')
    assert codes(r) == ["E0305"]
    assert r.diagnostics[0].message == "the argument of this mechanism has unbounded sensitivity in db"


def test_exp_needs_a_number():
    r = check('schema T { x : num[0, 10] }\nfunction main (db : bag T) : fuzzy num { laplace 1 (exp "a") }')
    assert codes(r) == ["E0202"]
    assert r.diagnostics[0].message == "exp expects a number, but this is string"


def test_exp_is_declared_once_with_doc_and_justification():
    p = lookup("exp")
    assert p.category == "numeric" and p.vectorised and not p.is_mechanism
    assert "infinity" in p.justification and p.doc.startswith("exp x:")


def test_exp_runtime_is_total():
    assert _exp_run(0.0) == 1.0 and isinstance(_exp_run(1.0), float)
    assert math.isclose(_exp_run(1.0), math.e)
    assert _exp_run(1e6) == math.inf and _exp_run(-1e6) == 0.0
    assert math.isnan(_exp_run(float("nan")))
    out = _exp_run(np.array([0.0, 1.0, 800.0]))
    assert out[0] == 1.0 and math.isclose(out[1], math.e) and out[2] == math.inf


def test_exp_runs_on_columns(tmp_path):
    data = [(10.0 * i, 0.0, "a", False) for i in range(11)]
    table = load_rows(tmp_path, data)
    _, result = run("laplace 100000 (sum (map (fun r -> clip 0 3 (exp (r.x / 100))) db))", table)
    assert math.isclose(result.value, sum(min(3.0, math.exp(x / 100)) for x, _, _, _ in data), abs_tol=0.01)
