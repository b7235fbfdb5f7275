"""Every primitive's evaluators are registered on its declaration, from one module per family
(fuzzpy/runtime/kernels/): a reference, a batched evaluator or PER_LANE, and a Dask evaluator or
what stands in for one (NO_TABLE, PASSES_TABLES), or a documented refusal.  The Dask engine's
refusals (E2101) are exactly the registered ones."""

from __future__ import annotations

from fractions import Fraction

import pytest

from fuzzpy.checking.program import check_source
from fuzzpy.primitives.registry import (
    NO_TABLE,
    PASSES_TABLES,
    PER_LANE,
    Refused,
    StandIn,
    all_primitives,
    kernel,
    lookup,
    without_kernels,
)
from fuzzpy.runtime import batch, kernels  # noqa: F401 - registers every primitive's evaluators
from fuzzpy.runtime.engines import dask_engine

PRIMITIVES = sorted(all_primitives())


def _takes_a_table(name: str) -> bool:
    """From the declared signature, for people: a bag, a sorted table or a partition."""
    signature = lookup(name).signature
    return "bag" in signature or "parts" in signature


def test_every_declared_primitive_has_kernels():
    assert without_kernels() == []


@pytest.mark.parametrize("name", PRIMITIVES)
def test_each_primitive_has_every_evaluator_or_a_documented_stand_in(name):
    prim = lookup(name)
    assert callable(prim.run)
    assert callable(prim.batched) or prim.batched is PER_LANE
    assert callable(prim.dask) or prim.dask in (NO_TABLE, PASSES_TABLES) or (
        isinstance(prim.dask, Refused) and prim.dask.reason.strip())


@pytest.mark.parametrize("name", PRIMITIVES)
def test_a_primitive_is_evaluated_in_the_kernels_module_named_as_its_declarations(name):
    prim = lookup(name)
    family = prim.rule.__module__.rsplit(".", 1)[1]  # fuzzpy.primitives.<family> declares it
    assert prim.kernels_from == f"fuzzpy.runtime.kernels.{family}"
    for evaluator in (prim.run, prim.batched, prim.dask):
        module = getattr(evaluator, "__module__", "") if callable(evaluator) else ""  # not a stand-in
        if module.startswith("fuzzpy."):  # not operator.add
            assert module in (prim.kernels_from, "fuzzpy.runtime.batch"), (name, evaluator)


def test_every_mechanism_is_evaluated_on_lanes_by_the_auditors_per_run_draws():
    mechanisms = [p for p in all_primitives().values() if p.is_mechanism]
    assert len(mechanisms) == 8  # with select_keys and select_keys_optimal (partition selection)
    assert all(p.batched is batch.mechanism_on_lanes and p.needs_context for p in mechanisms)
    assert [n for n, p in all_primitives().items() if p.batched is batch.mechanism_on_lanes and not p.is_mechanism] == []


def test_the_stand_ins_say_what_runs_in_their_place():
    for stand_in in (PER_LANE, NO_TABLE, PASSES_TABLES):
        assert isinstance(stand_in, StandIn) and stand_in.meaning.strip() and repr(stand_in) == stand_in.name


@pytest.mark.parametrize("name", PRIMITIVES)
def test_only_a_primitive_that_takes_a_table_has_a_dask_evaluator_or_refuses_one(name):
    dask = lookup(name).dask
    if _takes_a_table(name):
        assert dask is not NO_TABLE
    else:
        assert dask is NO_TABLE


def test_the_dask_refusals_are_the_registered_ones_and_the_tables_the_engine_had():
    refused = {n for n, p in all_primitives().items() if isinstance(p.dask, Refused)}
    assert dask_engine.refused_primitives() == refused == {"sort_by", "head", "tail", "slice", "subsample"}
    # what the engine's tables said before the kernels: table primitives, less those it implemented
    # and those that only pass parts around
    implemented = {"count", "filter", "map", "sum", "split", "groupby", "vsum", "union", "bound_rows", "select_keys",
                   "select_keys_optimal", "truncate", "join_public", "join_private", "bound_groups",
                   "bound_groups_in", "groupby_in"}
    passed_on = {"part", "pmap", "each", "values", "keys", "values_of"}
    assert {n for n, p in all_primitives().items() if callable(p.dask)} == implemented
    assert {n for n, p in all_primitives().items() if p.dask is PASSES_TABLES} == passed_on
    assert {n for n in PRIMITIVES if _takes_a_table(n)} - implemented - passed_on == refused


def test_a_program_calling_a_refused_primitive_is_refused_before_the_charge_by_name():
    report = check_source("""schema A { age : num[17, 90] }
function main (db : bag A) : fuzzy num {
  laplace 1 (count (head 3 (sort_by (fun r -> r.age) (filter (fun r -> r.age > 30) db)))) }""", "t.fz")
    assert report.ok, report.diagnostics
    assert dask_engine.unsupported_primitives(report.entry_instance) == ["head", "sort_by"]


def _never(*args):  # pragma: no cover - registrations below must fail before any call
    raise AssertionError("called")


@pytest.mark.parametrize("wrong, message", [
    (dict(name="no_such_primitive"), "not a declared primitive"),
    (dict(name="count"), "registered twice"),
])
def test_registering_for_an_unknown_primitive_or_twice_is_an_error(wrong, message):
    before = lookup("count").run
    with pytest.raises(ValueError, match=message):
        kernel(wrong["name"], reference=_never, batched=PER_LANE, dask=NO_TABLE)
    assert lookup("count").run is before


@pytest.mark.parametrize("batched, dask", [(None, NO_TABLE), (PER_LANE, None), (PER_LANE, "refused"),
                                           (NO_TABLE, NO_TABLE)])
def test_registering_an_evaluator_of_the_wrong_kind_is_an_error(batched, dask, monkeypatch):
    from fuzzpy.primitives import registry

    monkeypatch.setattr(registry, "_KERNELS", registry._KERNELS - {"abs"})  # as if abs were not registered yet
    with pytest.raises(ValueError, match="evaluator of abs"):
        kernel("abs", reference=_never, batched=batched, dask=dask)
    assert lookup("abs").run is not _never


def test_the_registered_evaluators_compute_what_the_folds_and_the_tables_say():
    """A smoke test of the registrations themselves (the runtime's tests check them in depth)."""
    import numpy as np
    import pandas as pd

    assert lookup("count").run(pd.Series([1.0, 2.0, 3.0])) == 3
    assert float(lookup("clip").run(0, 4, 7.5)) == 4.0
    assert lookup("sum").run(type("Ctx", (), {"info": {"bound": Fraction(10)}})(), pd.Series([1.0, 2.5])) == Fraction(7, 2)
    assert np.array_equal(lookup("mul").run(np.array([0.0, 2.0]), np.array([np.inf, 3.0])), [0.0, 6.0])


def test_the_soundness_oracle_models_every_registered_mechanism_without_noise():
    """The oracle (fuzzpy/audit/oracle.py) does not call a mechanism's evaluators, which draw
    noise: it keeps its own noise-free model of each, which a new mechanism must be given."""
    from fuzzpy.audit.oracle import IDENTITY

    assert set(IDENTITY) == {n for n, p in all_primitives().items() if p.is_mechanism}
