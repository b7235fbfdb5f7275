"""The oracle's own machinery: identity releases and replay, the comparison of two runs, the
timeout, the search for the size where a run starts failing, and the shrinker's replay."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from fuzzpy.audit.oracle import Call, Outcome, audit_pair, call_depth, compare, distance, first_trues, run_identity
from fuzzpy.checking.program import check_file, check_source

from .choices import RandomChooser, ReplayChooser
from .generator import generate
from .support import PairSpec, base_rows, copies_tables, last_success, make_frame, pair_tables

HEADER = "schema P { age : num[0, 100], sex : cat{\"M\", \"F\"}, ok : bool, n : int[0, 5] }\n"


def checked(body: str, helpers: str = ""):
    report = check_source(HEADER + helpers + "\nfunction main (db : bag P) " + body, "m.fz")
    assert report.ok, [(d.code, d.message) for d in report.diagnostics]
    return report


def frames(report, n_a: int, n_b: int):
    schemas = {"db": report.table_schema(report.inputs[0])}
    base = pair_tables(PairSpec("db", 0, 0, 0, True), schemas, ["db"])
    row = base.b["db"][-1]
    a = copies_tables(row, n_a, base, True).frames(schemas, "a")
    b = copies_tables(row, n_b, base, True).frames(schemas, "a")
    return a, b


def test_identity_releases_the_exact_input_and_the_replay_reuses_it():
    report = checked("{ sample c = laplace 1 (count db); sample d = laplace 1 (count db + c); return (c, d) }")
    a, b = frames(report, 3, 4)
    ra = run_identity(report.entry_instance, a)
    assert ra.status == "ok" and ra.result == (Fraction(3), Fraction(6))
    assert [c.observed for c in ra.calls] == [3, 6]
    rb = run_identity(report.entry_instance, b, replay=ra.calls)
    # B's second input is its own count plus A's released first value.
    assert rb.result == ra.result and [c.observed for c in rb.calls] == [4, 7]
    assert compare(ra, rb, report.epsilon) == []


def test_no_objection_when_a_helper_is_charged_for_a_farther_argument():
    """The site's sensitivity is 1 while its input moves by 2: the charge, not the site's S,
    accounts for the distance of the argument, so only the total loss is a criterion."""
    report = checked("{ nc (union db db) }", "function nc (b : bag P) : fuzzy num { laplace 1 (count b) }")
    a, b = frames(report, 3, 4)
    pr = audit_pair(report.entry_instance, report.epsilon, a, b)
    assert pr.a.calls[0].sensitivity == 1 and distance("laplace", pr.a.calls[0].observed, pr.b.calls[0].observed) == 2
    assert pr.violations == []


def test_an_understated_sensitivity_is_a_loss_over_epsilon():
    report = checked("{ laplace 1 (count db) }")
    prim = report.entry_instance.body
    prim.info = dict(prim.info, sensitivity=Fraction(1, 2))  # as if the checker had proven 1/2
    a, b = frames(report, 3, 4)
    found = audit_pair(report.entry_instance, report.epsilon, a, b).violations
    assert [(v.kind, v.over) for v in found] == [("loss", 1)]


def test_selection_and_sparse_vector_inputs_are_their_scores():
    report = checked("{ sample w = noisy_max 1 [1, 2, 3] (fun c -> c * count db); "
                     "sample t = above_threshold 1 1 5 [1, 2] (fun q -> q * count db); return (w, t) }")
    a, b = frames(report, 3, 4)
    pr = audit_pair(report.entry_instance, report.epsilon, a, b)
    assert pr.a.calls[0].observed == (3, 6, 9) and pr.a.calls[0].released == 3
    assert pr.a.calls[1].released == (False, True)
    # A sound calibration: noisy_max's scores move by 3 with S = 3, the sparse vector's by 2.
    assert [c.sensitivity for c in pr.a.calls] == [3, 2] and pr.violations == []


def test_gaussian_inputs_are_compared_in_squared_l2_against_the_proven_rho():
    # The helper's noise is calibrated to S = 1 while its input moves by 2: 2^2 * 1/2 = 2 observed.
    report = checked("{ g (union db db) }", "function g (b : bag P) : fuzzy num { gaussian 0.5 (count b) }")
    a, b = frames(report, 3, 4)
    rho = report.inputs[0].rho_gauss
    pr = audit_pair(report.entry_instance, report.epsilon, a, b, rho=rho)
    assert rho == 2 and pr.a.calls[0].rho == Fraction(1, 2) and pr.violations == []
    # A linear group factor (2 * 1/2 = 1) would be an understatement, and the oracle says so.
    found = audit_pair(report.entry_instance, report.epsilon, a, b, rho=Fraction(1)).violations
    assert [v.kind for v in found] == ["rho"]


def test_a_gaussian_tuple_moves_in_l2():
    report = checked("{ gaussian 1 (count db, count db) }")
    a, b = frames(report, 3, 4)
    pr = audit_pair(report.entry_instance, report.epsilon, a, b, rho=report.inputs[0].rho_gauss)
    # Proven: S = 2 (the L1 move), rho 1; observed: L2^2 = 2, so 1 * 2 / 4 = 1/2.
    assert pr.a.calls[0].sensitivity == 2 and pr.violations == []
    assert audit_pair(report.entry_instance, report.epsilon, a, b, rho=Fraction(1, 4)).violations[0].kind == "rho"


def test_first_trues_stops_after_the_cutoff():
    assert first_trues((Fraction(1), Fraction(5), Fraction(6), Fraction(7)), Fraction(5), 2) == (False, True, True)


def _outcome(status: str, calls: list[Call], result=None, code=None) -> Outcome:
    return Outcome(status, result=result, code=code, calls=calls)


def _call(site: int, observed, sens=1, charged=1) -> Call:
    return Call(site, "m.fz:1:1", "laplace", observed, observed, Fraction(sens), Fraction(charged))


def test_compare_objects_to_each_broken_promise():
    ok = _outcome("ok", [_call(1, Fraction(3))], result=1)
    assert compare(ok, _outcome("ok", [_call(1, Fraction(4))], result=1), Fraction(1)) == []
    kinds = lambda a, b, eps=Fraction(1): [v.kind for v in compare(a, b, eps)]  # noqa: E731
    assert kinds(ok, _outcome("failed", [_call(1, Fraction(4))], code="E0604")) == ["outcome"]
    assert kinds(ok, _outcome("ok", [_call(1, Fraction(4)), _call(1, Fraction(0))], result=1)) == ["calls"]
    assert kinds(ok, _outcome("ok", [_call(1, Fraction(4))], result=2)) == ["result"]
    assert kinds(ok, _outcome("ok", [_call(1, Fraction(5))], result=1)) == ["loss"]
    zero = _outcome("ok", [_call(1, Fraction(3), sens=0, charged=0)], result=1)
    assert kinds(zero, _outcome("ok", [_call(1, Fraction(4), sens=0, charged=0)], result=1)) == \
        ["zero-sensitivity", "loss"]
    failed = _outcome("failed", [], code="E0604")
    assert kinds(failed, _outcome("diverged", [_call(1, Fraction(4))])) == ["outcome"]


def test_distance_is_l1_for_laplace_and_max_for_scores():
    a, b = (Fraction(1), Fraction(2)), (Fraction(2), Fraction(5))
    assert distance("laplace", a, b) == 4 and distance("exponential", a, b) == 3
    assert distance("randomized_response", True, False) == 1
    assert distance("laplace", float("inf"), float("inf")) == 0


def test_a_run_past_its_deadline_is_a_timeout():
    report = checked("{ sample k = laplace 1 100000000; loop (fun u -> laplace 1 0) k }",
                     "function loop f (n : num) : fuzzy num { if n <= 0 then return 0 else (sample u = f 0; loop f (n - 1)) }")
    a, _ = frames(report, 1, 2)
    out = run_identity(report.entry_instance, a, timeout=0.3)
    # 10^8 iterations would take many minutes; the bound is loose because a 2-core machine
    # shared with a full suite once took 6 s to deliver a 0.3 s timeout.
    assert out.status == "timeout" and out.seconds < 30


def test_an_interrupt_python_dropped_is_sent_again():
    """Python prints and drops an exception raised while a thread runs a weakref callback or a
    destructor: the worker sends the timeout again until the run stops."""
    import time

    from fuzzpy.audit.oracle import OracleTimeout, _BigStackWorker

    dropped = []

    def stubborn() -> None:
        try:
            while True:
                time.sleep(0.01)
        except OracleTimeout:
            dropped.append(True)  # as if it had been raised inside a weakref callback
        while True:
            time.sleep(0.01)

    # Without the second interrupt the worker would wait out its grace period and abandon the thread.
    assert _BigStackWorker().run(stubborn, 0.1) is True and dropped == [True]


def test_an_interrupt_that_comes_after_its_run_never_reaches_the_next_run():
    """An interrupt sent as a run ended waits in the idle worker until it runs Python code again:
    the next run must not lose its job to it (seen once in the suite: the run after a timeout
    'could not be stopped')."""
    from fuzzpy.audit.oracle import _BigStackWorker, _interrupt

    worker, ran = _BigStackWorker(), []
    assert worker.run(lambda: None, 1) is True
    _interrupt(worker.thread)  # late: the worker waits for its next job
    assert worker.run(lambda: ran.append(True), 1) is True and ran == [True]


def test_the_depth_limit_is_shared_and_restored():
    from fuzzpy import limits

    before = limits.CALL_DEPTH
    report = checked("{ return (deep 40) }", "function deep (n : num) : num { if n <= 0 then 0 else 1 + deep (n - 1) }")
    a, _ = frames(report, 1, 2)
    with call_depth(30):
        assert run_identity(report.entry_instance, a).code == "E0604"
    assert limits.CALL_DEPTH == before and run_identity(report.entry_instance, a).status == "ok"


@pytest.mark.parametrize("threshold", [0, 1, 7, 64, 150])
def test_last_success_finds_where_failure_starts(threshold):
    calls = []

    def fails(n: int) -> bool:
        calls.append(n)
        return n > threshold

    got = last_success(fails, 200)
    assert got == (threshold if threshold < 200 else None)
    assert len(calls) <= 20


def test_last_success_gives_up_when_nothing_fails():
    assert last_success(lambda n: False, 50) is None and last_success(lambda n: True, 50) is None


def test_replaying_a_recorded_choice_sequence_gives_the_same_program():
    ch = RandomChooser(12345)
    text = generate(ch).text
    assert generate(ReplayChooser(ch.record)).text == text
    assert generate(ReplayChooser([])).text.count("function") >= 1  # all zeros: the simplest program


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def public_frames(report) -> dict:
    """A few rows for each public table of the entry point, within what its schema declares."""
    out = {}
    for name, schema in report.public_tables.items():
        rows, seen = [], {}
        columns = [c.name for c in schema.columns]
        for row in base_rows(schema, 8, 3):
            keys = [(c, row[columns.index(c)]) for c, _ in schema.per_key]
            if all(seen.get(k, 0) < most for k, (_, most) in zip(keys, schema.per_key)):
                rows.append(row)
                for k in keys:
                    seen[k] = seen.get(k, 0) + 1
        out[name] = make_frame(schema, rows)
    return out


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.fz")), ids=lambda p: p.name)
def test_no_objection_to_the_shipped_examples(path):
    """Programs whose bounds are known to be right: the oracle must not object (it has no false
    alarms on them), and their mechanisms are really exercised."""
    report = check_file(path)
    assert report.ok
    schemas = {i.name: report.table_schema(i) for i in report.inputs}
    inputs = list(schemas)
    eps = {i.name: i.epsilon for i in report.inputs}
    rho = {i.name: i.rho_gauss for i in report.inputs}  # the zCDP examples' Gaussian releases
    calls = 0
    for k, size in enumerate([0, 1, 4, 9]):
        for add in (True, False):
            t = pair_tables(PairSpec(inputs[k % len(inputs)], size, k, 7 * k, add), schemas, inputs)
            public = public_frames(report)  # the same in both runs: public data
            pr = audit_pair(report.entry_instance, eps[t.changed], {**t.frames(schemas, "a"), **public},
                            {**t.frames(schemas, "b"), **public}, rho=rho[t.changed])
            assert pr.violations == [], (size, add, pr.violations)
            assert pr.a.status == "ok"
            calls += len(pr.a.calls)
    assert calls > 0
