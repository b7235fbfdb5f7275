"""dpsgd_logistic and dpsgd_linear (stdlib/ml.fz): minibatch DP-SGD on Poisson batches.  Each step
is one Gaussian release on a fresh sample, counted in the channel of its rate and rho and
amplified at a delta; the count and the final loss are plain releases of rho / 36.  The library
call costs exactly what the same algorithm written in the program costs; a seeded run on a
planted model gets its signs, and the released loss tells a descent that has not moved."""

from __future__ import annotations

import math
from fractions import Fraction as F

from stdlib_support import FEATURES, IMPORTS, LABEL, ROW, TRUE_MODEL, errors, load_rows, planted_rows, rows, run

from fuzzpy.checking.program import check_source
from fuzzpy.pipeline.guarantee import guarantee, proven_loss

RET = "fuzzy (vec[3], num)"


def checked(body: str, extra: str = ""):
    src = ROW + IMPORTS + FEATURES + LABEL + extra + f"function main (db : bag Row) : {RET} {{ {body} }}\n"
    report = check_source(src, "dpsgd.fz")
    assert not errors(report), errors(report)
    return report


# The same algorithm written in the program: the library's steps, count and loss.
BY_HAND = """function descend (db : bag Row) (batch : num) (w : vec[3]) (t : int) : fuzzy vec[3] {
  if t <= 0 then return w else
  sample g = subsample 0.05 (fun s -> gaussian 0.1 (vsum 1 (fun r -> logistic_gradient_vec w (features r) (label r)) s)) db;
  descend db batch (vsub w (vscale (2 / batch) g)) (t - 1)
}
function by_hand (db : bag Row) : fuzzy (vec[3], num) {
  sample n = gaussian (0.1 / 36) (count db);
  sample w = descend db (max (0.05 * n) 1) (vec (0, 0, 0)) 60;
  sample l = gaussian (0.1 / 36) (sum (map (fun r -> clip 0 1 (logistic_loss_vec w (features r) (label r))) db));
  return (w, l / max n 1)
}
"""


def test_each_step_is_one_gaussian_release_counted_on_its_sample():
    report = checked("dpsgd_logistic 0.05 0.1 60 1 2 features label (vec (0, 0, 0)) db")
    inp = report.inputs[0]
    assert inp.subsampled == (("gauss", F(1, 20), F(1, 10), 60),)
    assert inp.rho_sampled == 6                    # the 60 steps
    assert inp.rho_gauss == 6 + 2 * F(1, 360)      # and the count and the loss, rho / 36 each
    got = sorted((m.name, m.sensitivity, m.extra["rho"], m.extra["dimension"]) for m in report.mechanisms)
    assert got == [("gaussian", 1, F(1, 360), 1)] * 2 + [("gaussian", 1, F(1, 10), 3)]


def test_the_library_costs_exactly_what_the_algorithm_written_in_the_program_costs():
    library = checked("dpsgd_logistic 0.05 0.1 60 1 2 features label (vec (0, 0, 0)) db")
    by_hand = checked("by_hand db", extra=BY_HAND)
    assert proven_loss(library) == proven_loss(by_hand)


def test_a_short_descent_is_amplified_at_a_delta_exactly_as_written_by_hand():
    delta = F(1, 10**6)
    library = guarantee(checked("dpsgd_logistic 0.05 0.1 3 1 2 features label (vec (0, 0, 0)) db"), delta)
    by_hand = guarantee(checked("by_hand db", extra=BY_HAND.replace("(vec (0, 0, 0)) 60", "(vec (0, 0, 0)) 3")),
                        delta)
    assert library.method == by_hand.method == "Poisson-subsampled PLD"
    assert library.epsilon == by_hand.epsilon


def test_params_and_arithmetic_give_the_same_cost_as_literals():
    params = "param q : num = 0.05;\nparam rho : num = 0.2;\n"
    literal = checked("dpsgd_linear 0.05 0.1 20 1 1 features label (vec (0, 0, 0)) db")
    computed = checked("dpsgd_linear q (rho / 2) (10 * 2) 1 1 features label (vec (0, 0, 0)) db", extra=params)
    assert proven_loss(literal) == proven_loss(computed)


def test_a_rate_the_data_decides_is_refused_naming_the_parameter():
    src = (ROW + IMPORTS + FEATURES + LABEL + f"function main (db : bag Row) : {RET} {{ "
           "sample n = laplace 1 (count db); dpsgd_logistic (clip 0.01 0.5 (10 / n)) 0.1 5 1 2 features label "
           "(vec (0, 0, 0)) db }\n")
    found = [(d.code, d.message) for d in check_source(src, "dpsgd.fz").diagnostics]
    assert any(c == "E0209" and "q is not" in m for c, m in found), found


def test_dpsgd_logistic_gets_the_signs_of_the_planted_model(tmp_path):
    table = load_rows(tmp_path, planted_rows())
    for seed in (0, 1, 2):
        _, result = run("dpsgd_logistic 0.2 1 60 1 2 features label (vec (0, 0, 0)) db", table, ret=RET,
                        extra=FEATURES + LABEL, seed=seed)
        w, loss = result.value
        assert [math.copysign(1, float(v)) for v in w] == [math.copysign(1, v) for v in TRUE_MODEL], w
        assert 0 < loss < 0.2, loss             # well below 1/4, the loss of w = 0
        assert len(result.releases) == 1 + 60 + 1


def test_the_released_loss_tells_a_descent_that_has_not_moved(tmp_path):
    table = load_rows(tmp_path, planted_rows())
    extra = FEATURES + LABEL
    _, stuck = run("dpsgd_logistic 0.2 1 1 1 (1 / 100) features label (vec (0, 0, 0)) db", table, ret=RET,
                   extra=extra, seed=3)
    _, converged = run("dpsgd_logistic 0.2 1 60 1 2 features label (vec (0, 0, 0)) db", table, ret=RET,
                       extra=extra, seed=3)
    assert abs(stuck.value[1] - 0.25) < 0.02, stuck.value     # about the loss of w = 0
    assert converged.value[1] < stuck.value[1] - 0.05, (converged.value, stuck.value)


def test_dpsgd_linear_recovers_a_slope_and_a_small_loss(tmp_path):
    # y = 100 - x (+- 5): on the centred feature x / 100 - 1/2 the slope is -1, the intercept 1/2.
    table = load_rows(tmp_path, rows(400))
    extra = ("function features2 (r : Row) : vec[2] { vec (1, r.x / 100 - 1 / 2) }\n"
             "function target (r : Row) : num { r.y / 100 }\n")
    _, result = run("dpsgd_linear 0.5 20 100 1 1 features2 target (vec (0, 0)) db", table,
                    ret="fuzzy (vec[2], num)", extra=FEATURES + LABEL + extra, seed=4)
    w, loss = result.value
    assert abs(w[0] - 0.5) < 0.1 and abs(w[1] + 1) < 0.2, w
    assert abs(loss) < 0.01, loss


def test_a_run_is_the_same_vectorised_and_row_by_row(tmp_path):
    # vsum reads the vectorised row function's columns as one matrix (vectorize.row_vectors);
    # the reference evaluates each row: the same coins and noise must give the same model
    from fuzzpy.runtime.interpreter import run_program
    from fuzzpy.runtime.samplers import RandomSource

    table = load_rows(tmp_path, planted_rows(300))
    report = checked("dpsgd_logistic 0.3 1 5 1 2 features label (vec (0, 0, 0)) db")
    fast, slow = (run_program(report.entry_instance, {"db": table}, RandomSource.seeded(5), vectorise=v).value
                  for v in (True, False))
    assert fast == slow
