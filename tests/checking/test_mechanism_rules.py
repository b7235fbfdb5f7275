"""Typing rules of the mechanisms: exact epsilon, sensitivity and scale in the report, programs
that must be rejected (with their error code and message), and broken programs in the style of
CheckDP's counterexamples that must be rejected or charged at least their true loss."""

from dataclasses import fields, is_dataclass
from fractions import Fraction as F

import pytest
from conftest import check, codes, eps, fn_type

from fuzzpy.primitives.registry import all_primitives
from fuzzpy.typesystem import ir as I

INF = float("inf")
T = 'schema T { x : num[0, 10], k : cat{"a", "b", "c"}, flag : bool }\n'


def main(ret: str, body: str) -> str:
    return T + f"function main (db : bag T) : fuzzy {ret} {{ {body} }}"


COUNT_SCORE = "(fun c -> count (filter (fun r -> r.x < c) db))"
SUM_SCORE = "(fun c -> sum (map (fun r -> clip 0 5 r.x) (filter (fun r -> r.x < c) db)))"  # S = 5


def assert_unbounded(report):
    """Rejected: the privacy loss in db is infinite."""
    assert report.epsilon == INF
    assert codes(report) == ["E0302"]
    assert report.diagnostics[0].message == "main is not differentially private in db: its privacy loss is unbounded"


def mech(report):
    (m,) = report.mechanisms
    return m.name, m.sensitivity, m.epsilon, m.scale


def prim_infos(report, name: str) -> list[dict]:
    """The `info` of every IPrim `name` in the entry point's IR: what the runtime will read."""
    found, seen = [], set()

    def walk(node):
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, I.IPrim) and node.name == name:
            found.append(node.info)
        if isinstance(node, I.Instance):
            walk(node.body)
        elif is_dataclass(node):
            for f in fields(node):
                walk(getattr(node, f.name))
        elif isinstance(node, (list, tuple)):
            for x in node:
                walk(x)

    walk(report.entry_instance.body)
    return found


# ---- exact calibration: count scores (S = 1) and clipped-sum scores (S = 5) ----------------------

# (program body, result type, mechanism, S, eps, reported scale)
CALIBRATED = [
    (f"exponential 0.5 [1, 2, 3] {COUNT_SCORE}", "num", "exponential", 1, F(1, 2), 4),
    (f"exponential 0.5 [1, 2, 3] {SUM_SCORE}", "num", "exponential", 5, F(1, 2), 20),
    (f"noisy_max 0.25 [1, 2, 3] {COUNT_SCORE}", "num", "noisy_max", 1, F(1, 4), 8),
    (f"noisy_max 0.25 [1, 2, 3] {SUM_SCORE}", "num", "noisy_max", 5, F(1, 4), 40),
    (f"above_threshold 1 2 10 [1, 2, 3] {COUNT_SCORE}", "(list bool)", "above_threshold", 1, 1, 2),
    (f"above_threshold 1 2 10 [1, 2, 3] {SUM_SCORE}", "(list bool)", "above_threshold", 5, 1, 10),
    ("laplace 0.1 (count db)", "num", "laplace", 1, F(1, 10), 10),
    ("laplace 0.5 (sum (map (fun r -> clip 0 5 r.x) db))", "num", "laplace", 5, F(1, 2), 10),
    ("randomized_response 0.75 (count db > 5)", "bool", "randomized_response", 1, F(3, 4), F(4, 3)),
]


@pytest.mark.parametrize("body, ret, name, sens, epsilon, scale", CALIBRATED)
def test_each_mechanism_checks_with_its_exact_epsilon_and_scale(body, ret, name, sens, epsilon, scale):
    r = check(main(ret, body))
    assert eps(r) == epsilon
    assert mech(r) == (name, sens, epsilon, scale)
    assert all(isinstance(v, (int, F)) for v in mech(r)[1:])  # exact, never floats


def test_svt_reports_the_query_noise_scale_4_c_s_over_eps():
    r = check(main("(list bool)", f"above_threshold 0.5 3 10 [1, 2, 3] {SUM_SCORE}"))
    (m,) = r.mechanisms
    assert (m.sensitivity, m.epsilon, m.scale) == (5, F(1, 2), 20)  # threshold: S / (eps/2)
    assert m.extra == {"cutoff": 3, "query_scale": 120}             # queries: 2cS / (eps/2)


def test_the_runtime_reads_the_checker_calibration_from_the_ir():
    r = check(main("(list bool)", f"above_threshold 0.5 3 7 [1, 2, 3] {SUM_SCORE}"))
    (info,) = prim_infos(r, "above_threshold")
    assert info == {"sensitivity": 5, "epsilon": F(1, 2), "scale": 20, "charged": F(1, 2),
                    "cutoff": 3, "threshold": 7, "query_scale": 120}
    r = check(main("string", 'exponential 0.5 ["a", "b"] (fun c -> count (filter (fun r -> r.k == c) db))'))
    (info,) = prim_infos(r, "exponential")
    assert info == {"sensitivity": 1, "epsilon": F(1, 2), "scale": 4, "charged": F(1, 2), "candidates": 2}


def test_selection_returns_the_candidate_type():
    r = check(main("string", 'noisy_max 1 ["a", "b", "c"] (fun c -> count (filter (fun r -> r.k == c) db))'))
    assert fn_type(r, "main") == "bag T -o fuzzy string"


def test_public_epsilon_and_candidates_from_params():
    src = (T + 'param cands : list string = ["a", "b"];\nparam e : num = 0.3;\n'
           "function main (db : bag T) : fuzzy string { exponential e cands "
           "(fun c -> count (filter (fun r -> r.k == c) db)) }")
    r = check(src)
    assert eps(r) == F(3, 10)
    assert mech(r) == ("exponential", 1, F(3, 10), F(20, 3))
    assert eps(check(src, params={"e": "0.6"})) == F(3, 5)


def test_a_score_capturing_a_private_value_twice_is_2_sensitive():
    for score in ("(fun c -> count db + count db)", "(fun c -> 2 * count db)"):
        r = check(main("num", f"exponential 1 [1, 2] {score}"))
        assert mech(r) == ("exponential", 2, 1, 4)
        assert eps(r) == 1


def test_a_score_that_ignores_private_data_is_free():
    r = check(main("num", "exponential 1 [1, 2] (fun c -> 100 * c)"))
    assert eps(r) == 0
    assert mech(r) == ("exponential", 0, 0, 0)


# ---- rejected programs -----------------------------------------------------------------------------

ALL = {
    "laplace": ("num", "laplace {e} (count db)"),
    "exponential": ("num", "exponential {e} [1, 2] " + COUNT_SCORE),
    "noisy_max": ("num", "noisy_max {e} [1, 2] " + COUNT_SCORE),
    "above_threshold": ("(list bool)", "above_threshold {e} 1 5 [1, 2] " + COUNT_SCORE),
    "randomized_response": ("bool", "randomized_response {e} (count db > 5)"),
}


@pytest.mark.parametrize("name", sorted(ALL))
def test_a_private_epsilon_is_rejected(name):
    ret, body = ALL[name]
    r = check(main(ret, body.format(e="(count db)")))
    assert codes(r) == ["E0209"]
    assert r.diagnostics[0].message.startswith("epsilon must be a public constant")


@pytest.mark.parametrize("name", sorted(ALL))
@pytest.mark.parametrize("bad, shown", [("0", "0"), ("(0 - 0.5)", "-1/2")])
def test_epsilon_must_be_positive(name, bad, shown):
    ret, body = ALL[name]
    r = check(main(ret, body.format(e=bad)))
    assert codes(r) == ["E0213"]
    assert r.diagnostics[0].message == f"epsilon must be positive, got {shown}"


@pytest.mark.parametrize("body, ret, what", [
    (f"exponential 1 [count db, 2] {COUNT_SCORE}", "num", "the candidates of exponential"),
    (f"noisy_max 1 (1 :: [count db]) {COUNT_SCORE}", "num", "the candidates of noisy_max"),
    (f"above_threshold 1 1 5 [count db] {COUNT_SCORE}", "(list bool)", "the queries of above_threshold"),
])
def test_non_constant_lists_are_rejected(body, ret, what):
    r = check(main(ret, body))
    assert codes(r) == ["E0209"]
    assert r.diagnostics[0].message == f"{what} must be public (constants or released values)"


@pytest.mark.parametrize("body, ret, message", [
    (f"exponential 1 [] {COUNT_SCORE}", "num", "exponential needs at least one element in its list of candidates"),
    (f"noisy_max 1 [] {COUNT_SCORE}", "num", "noisy_max needs at least one element in its list of candidates"),
    (f"above_threshold 1 1 5 [] {COUNT_SCORE}", "(list bool)",
     "above_threshold needs at least one element in its list of queries"),
])
def test_empty_lists_are_rejected(body, ret, message):
    r = check(main(ret, body))
    assert codes(r) == ["E0213"]
    assert r.diagnostics[0].message == message


@pytest.mark.parametrize("cutoff, code, message", [
    ("0", "E0213", "the cutoff of above_threshold must be a positive whole number, got 0"),
    ("1.5", "E0213", "the cutoff of above_threshold must be a positive whole number, got 3/2"),
    ("(0 - 2)", "E0213", "the cutoff of above_threshold must be a positive whole number, got -2"),
    ("(count db)", "E0209", "the cutoff of above_threshold must be a public constant (a literal or a param)"),
    ('"two"', "E0202", "the cutoff of above_threshold must be a number, but this is string"),
])
def test_svt_cutoff_must_be_a_public_positive_integer(cutoff, code, message):
    r = check(main("(list bool)", f"above_threshold 1 {cutoff} 5 [1, 2] {COUNT_SCORE}"))
    assert codes(r) == [code]
    assert r.diagnostics[0].message == message


def test_svt_threshold_must_be_public():
    r = check(main("(list bool)", f"above_threshold 1 1 (count db) [1, 2] {COUNT_SCORE}"))
    assert codes(r) == ["E0209"]
    assert r.diagnostics[0].message == ("the threshold of above_threshold must be a public constant "
                                        "(a literal or a param)")


@pytest.mark.parametrize("body, code, message", [
    ("exponential 1 5 (fun c -> count db)", "E0202", "exponential expects a list of candidates, but this is int[5, 5]"),
    ("exponential 1 [1] 5", "E0203", "expected a function here, but this is int[5, 5]"),
    ("noisy_max 1 [1] (fun c -> c > 0)", "E0202",
     "the score function of noisy_max must return a number, but it returns bool"),
    ("randomized_response 1 (count db)", "E0202", "randomized_response expects a bool, but this is int[0, inf]"),
])
def test_ill_typed_mechanism_arguments_are_rejected(body, code, message):
    r = check(main("num" if "randomized" not in body else "bool", body))
    assert codes(r) == [code]
    assert r.diagnostics[0].message == message


@pytest.mark.parametrize("score", [
    "(fun c -> if count db > 3 then 1 else 0)",                  # branches on private data
    "(fun c -> count (filter (fun r -> r.x < count db) db))",    # private data read once per row
])
def test_a_score_of_unbounded_sensitivity_is_rejected(score):
    r = check(main("num", f"noisy_max 1 [1, 2] {score}"))
    assert codes(r) == ["E0305"]
    assert r.diagnostics[0].message == "the argument of this mechanism has unbounded sensitivity in db"


# ---- composition ------------------------------------------------------------------------------------

def test_sequential_uses_add():
    r = check(main("num", f"sample a = exponential 0.5 [1, 2] {COUNT_SCORE}; "
                          f"sample b = noisy_max 0.25 [1, 2] {SUM_SCORE}; "
                          f"sample c = above_threshold 0.125 1 5 [1, 2] {COUNT_SCORE}; "
                          "sample d = randomized_response 0.0625 (count db > 5); return a"))
    assert eps(r) == F(15, 16)
    assert [m.name for m in r.mechanisms] == ["exponential", "noisy_max", "above_threshold", "randomized_response"]


GROUPS = 'groupby (fun r -> r.k) db'


@pytest.mark.parametrize("inner, ret", [
    ("exponential 0.5 [1, 2, 3] (fun c -> count (filter (fun r -> r.x < c) g))", "num"),
    ("noisy_max 0.5 [1, 2, 3] (fun c -> count (filter (fun r -> r.x < c) g))", "num"),
    ("above_threshold 0.5 1 3 [1, 2, 3] (fun c -> count (filter (fun r -> r.x < c) g))", "(list bool)"),
    ("randomized_response 0.5 (count g > 3)", "bool"),
])
def test_each_over_a_groupby_composes_in_parallel(inner, ret):
    r = check(T + f'function main (db : bag T) : fuzzy (parts {{"a", "b", "c"}} {ret}) '
                  f'{{ each (fun g -> {inner}) ({GROUPS}) }}')
    assert eps(r) == F(1, 2)  # not 3 * 0.5: the groups are disjoint


def test_the_same_selections_on_overlapping_filters_add_up():
    parts = "; ".join(f'sample {v} = noisy_max 0.5 [1, 2] (fun c -> count (filter (fun r -> r.k == "{k}") db))'
                      for v, k in (("a", "a"), ("b", "b"), ("c", "c")))
    r = check(main("num", parts + "; return a"))
    assert eps(r) == F(3, 2)  # filter gives no parallel composition: each use is charged


# ---- CheckDP-style broken programs: rejected, or charged at least their true loss -------------------

def test_noisy_max_releases_only_a_candidate_never_its_noisy_score():
    prim = all_primitives()["noisy_max"]
    assert prim.params == ("eps", "candidates", "score")
    r = check(main("string", 'noisy_max 1 ["a", "b"] (fun c -> count (filter (fun r -> r.k == c) db))'))
    assert r.entry_type is not None and str(r.entry_type) == "fuzzy string"  # the candidate type, no score
    # No other primitive hands out a noisy maximum; releasing the winner's score takes a second,
    # charged mechanism.
    assert not [n for n, p in all_primitives().items() if "max" in n and p.is_mechanism and n != "noisy_max"]
    r = check(main("num", f"sample best = noisy_max 1 [1, 2, 3] {COUNT_SCORE}; "
                          "laplace 1 (count (filter (fun r -> r.x < best) db))"))
    assert eps(r) == 2


def test_hand_written_svt_without_noise_is_infinite():
    r = check(T + "function svt (b : bag T) (qs : list num) : fuzzy (list bool) {\n"
                  "  case qs of { [] => return [] | q :: t =>\n"
                  "    if count (filter (fun r -> r.x < q) b) > 5 then return [true]\n"
                  "    else (sample rest = svt b t; return (false :: rest)) } }\n"
                  "function main (db : bag T) : fuzzy (list bool) { svt db [1, 2, 3] }")
    assert_unbounded(r)


def test_svt_with_noise_on_the_threshold_only_is_infinite():
    # A noisy threshold alone does not hide the comparison with an exact private count.
    r = check(main("bool", "sample t = laplace 1 5; if count db > t then return true else return false"))
    assert_unbounded(r)


def test_noise_on_a_public_constant_is_no_noise():
    r = check(main("num", "laplace 1 5"))
    assert mech(r) == ("laplace", 0, 0, 0) and eps(r) == 0


def test_releasing_a_bool_without_randomized_response_is_infinite():
    assert_unbounded(check(main("bool", "return (count db > 5)")))
    assert eps(check(main("bool", "randomized_response 1 (count db > 5)"))) == 1


def test_randomized_response_twice_on_the_same_bit_adds():
    r = check(main("bool", "sample a = randomized_response 1 (count db > 5); "
                           "sample b = randomized_response 1 (count db > 5); return a"))
    assert eps(r) == 2


def test_randomized_response_behind_a_bool_parameter_is_charged_conservatively():
    # A bool parameter is infinitely far from its flip (Fuzz's metric), so the call is charged infinity.
    r = check(T + "function f (b : bool) : fuzzy bool { randomized_response 1 b }\n"
                  "function main (db : bag T) : fuzzy bool { f (count db > 2) }")
    assert_unbounded(r)


def test_randomized_response_on_a_fractionally_moving_input_is_charged_its_true_loss():
    # count db moves by 1, x = count db / 2 by 1/2, and x > 0 can flip (0 rows vs 1 row): true loss 1.
    r = check(T + "function f (x : num) : fuzzy bool { randomized_response 1 (x > 0) }\n"
                  "function main (db : bag T) : fuzzy bool { f (count db / 2) }")
    assert r.epsilon >= 1


def test_every_mechanism_is_declared_once_with_runtime_and_reference():
    from fuzzpy.runtime import kernels  # noqa: F401 - registers the evaluators (`p.run`)

    mechs = {n: p for n, p in all_primitives().items() if p.is_mechanism}
    assert set(mechs) == {"laplace", "exponential", "noisy_max", "above_threshold", "randomized_response",
                          "gaussian", "select_keys", "select_keys_optimal"}
    for p in mechs.values():
        assert p.run is not None and p.needs_context and p.category == "mechanism"
        assert any(str(year) in p.justification for year in (1965, 2006, 2007, 2014, 2016, 2017, 2020, 2021, 2022))


def test_randomized_response_charges_infinity_on_fractional_symbols():
    from fuzzpy.primitives.mechanisms import rr_cost

    class Ctx:
        @staticmethod
        def integral(sym):
            return sym == "db"

    dist = {"db": INF, "x": INF, "b": F(1)}
    assert rr_cost(Ctx(), dist, F(1, 2)) == {"db": F(1, 2), "x": INF, "b": F(1, 2)}


def test_sparse_vector_on_a_fractionally_moving_input_is_refused():
    # The sparse vector rounds to the nearest grid point (its proof needs whole-step shifts): an
    # input that moves by a fraction of a unit could cross a rounding boundary. A num parameter of
    # a helper can do that (count db / 3), so it is charged infinity; an int parameter cannot.
    helpers = ("function f (y : num) : fuzzy (list bool) { above_threshold 1 1 5 [1, 2] (fun q -> y) }\n"
               "function g (y : int) : fuzzy (list bool) { above_threshold 1 1 5 [1, 2] (fun q -> y) }\n")
    r = check(T + helpers + "function main (db : bag T) : fuzzy (list bool) { f (count db / 3) }")
    assert r.epsilon == INF and [d.code for d in r.diagnostics] == ["E0302"]
    r = check(T + helpers + "function main (db : bag T) : fuzzy (list bool) { g (count db) }")
    assert r.ok and r.epsilon == 1


def test_sparse_vector_charges_the_rounding_step_when_a_unit_move_is_not_whole_steps():
    from fuzzpy.runtime.grid import grid_bits

    # two inputs with different coefficients: S = 1 (from db1); db2 moves the score by 1/3
    src = ("schema T { x : num[0, 10] }\n"
           "function main (a : bag T) (b : bag T) : fuzzy (list bool) {\n"
           "  above_threshold 1 1 5 [1, 2] (fun q -> count a + count b / 3) }")
    r = check(src)
    per_a, per_b = (i.epsilon for i in r.inputs)
    assert per_a == 1
    assert per_b == F(1, 3) + F(1, 2 ** grid_bits(F(1)))
