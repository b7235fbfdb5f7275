"""Attacks on the curator's caps (rule Notion, docs/serve.md "Who decides the privacy notion"):
every request field and pragma an analyst controls, against every kind of cap, on both stores.

The finding that started this file: a served run of a Gaussian program with `"delta": "0.9"`
was stated at epsilon 0 and booked as a pure epsilon of 0 on pure-epsilon caps, so an analyst
whose cap was exhausted could release counts with sigma 0.5 again and again.  The service had a
charge path of its own that dropped the run's delta, rho and loss.  Now every run is charged
through `fuzzpy.pipeline.charge` with its whole loss, and each cap is checked against its
composed history by `fuzzpy.ledger.caps.check_charge`, in the cap's notion.

Each case runs the real `Service` (the code behind `POST /v1/run`) over a real store: the
SQLite ledger, and a throwaway PostgreSQL server started by the test.  A refused request must
leave no ledger row on either account; an admitted one books both accounts with its whole loss.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from fuzzpy.accounting import EpsilonCap, RhoCap
from fuzzpy.serve.registry import add_analyst, register_dataset
from fuzzpy.serve.service import ProgramRequest, RequestError, Service
from fuzzpy.serve.store import SqliteStore, analyst_key, dataset_key

from .helpers import ADULT_CSV

SCHEMA = "schema A { age : num[17, 90] }"
LAPLACE = f"{SCHEMA}\nfunction main (db : bag A) : fuzzy num {{ laplace 1 (count db) }}\n"
GAUSS = f"{SCHEMA}\nfunction main (db : bag A) : fuzzy num {{ gaussian 2 (count db) }}\n"
GAUSS_PRAGMA = f"# fuzzpy: delta 0.9\n{GAUSS}"
BIG = Fraction(1000)
NOTIONS = {"pure": EpsilonCap(BIG, Fraction(0)), "delta": EpsilonCap(BIG, Fraction(1, 10**6)), "rho": RhoCap(BIG)}
DELTAS = [None, "0.9", "9/10", "1e-6", "1e-7", "5e-7", "1e-300"]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        made = SqliteStore(tmp_path / "ledger.sqlite")
    else:
        from fuzzpy.serve.pgstore import PostgresStore

        made = PostgresStore(request.getfixturevalue("postgres"))
        made.transaction(lambda cur: cur.execute("TRUNCATE fuzzpy_caps, fuzzpy_charges, fuzzpy_serve_datasets, "
                                                 "fuzzpy_serve_analysts"))
    yield made
    made.close()


@pytest.fixture
def service(store, tmp_path):
    schema = tmp_path / "a.fz"
    schema.write_text(SCHEMA + "\n")
    for notion, cap in NOTIONS.items():
        register_dataset(store, notion, ADULT_CSV, schema, cap)
    add_analyst(store, "mallory", token_hash="0" * 64, caps={n: BIG for n in NOTIONS})
    return Service(store)


def mallory(service):
    return next(a for a in service.store.analysts() if a.name == "mallory")


def rows(service, dataset):
    return (service.store.entries(dataset_key(dataset)), service.store.entries(analyst_key("mallory", dataset)))


def served(service, program, dataset, delta=None, **kw):
    req = ProgramRequest(program, "attack.fz", [dataset], {}, "main", kw.pop("budget", "1000"), "json", delta)
    return service.run(mallory(service), req)


def codes(answer) -> list[str]:
    return [d["code"] for d in answer["result"]["diagnostics"]] if answer["result"] else []


def expected(notion: str, program: str, delta) -> str | None:
    """The code a request must be refused with (None: admitted)."""
    gaussian = program is not LAPLACE
    asked = None if delta is None else Fraction(delta)
    if notion == "pure":
        return "E0606" if gaussian or asked is not None else None
    if notion == "delta":
        return "E0606" if asked is not None and asked > Fraction(1, 10**6) else None
    return "E0314" if gaussian and asked is None and program is GAUSS else None  # rho: a delta states it


@pytest.mark.parametrize("notion", NOTIONS)
@pytest.mark.parametrize("program", [LAPLACE, GAUSS, GAUSS_PRAGMA], ids=["laplace", "gaussian", "gaussian-pragma-0.9"])
@pytest.mark.parametrize("delta", DELTAS)
def test_every_delta_an_analyst_can_send_is_charged_in_the_datasets_notion_or_refused(service, notion, program,
                                                                                     delta):
    answer = served(service, program, notion, delta)
    refusal = expected(notion, program, delta)
    mine, total = rows(service, notion)
    if refusal is not None:
        assert answer["exit_code"] != 0 and refusal in codes(answer), answer["stderr"]
        assert mine == [] and total == [], "a refused run must charge nothing"
        return
    assert answer["exit_code"] == 0, answer["stderr"]
    (mine,), (total,) = mine, total
    for entry in (mine, total):
        assert entry.loss is not None, "every charge records the run's whole loss"
        assert entry.loss.is_pure() == (program is LAPLACE)
        if program is not LAPLACE:
            assert entry.rho == Fraction(2)  # gaussian 2: rho 2, recorded as such
    stated = Fraction(answer["result"]["delta_exact"])
    if notion == "delta" and program is not LAPLACE:  # at the dataset's delta, or the smaller one asked for
        assert stated == min(Fraction(1, 10**6), Fraction(delta) if delta else Fraction(1)) == mine.delta
    if notion == "delta" and program is LAPLACE:  # a pure run stays pure (or is stated at a smaller delta)
        assert stated <= Fraction(1, 10**6)
    if notion == "pure":
        assert stated == 0 and mine.delta == 0


@pytest.mark.parametrize("notion", ["pure", "delta"])
def test_an_exhausted_analyst_cannot_release_more_by_choosing_a_delta(service, notion):
    """The reproducer: the analyst's cap is spent by a Laplace run; every Gaussian variant after
    it is refused (its notion, or its composed cost), and nothing more is charged."""
    service.store.set_cap(analyst_key("mallory", notion), EpsilonCap(Fraction(1), NOTIONS[notion].delta))
    assert served(service, LAPLACE, notion)["exit_code"] == 0
    spent = rows(service, notion)
    assert codes(served(service, LAPLACE, notion)) == ["E1014"]
    for program, delta in [(GAUSS, "0.9"), (GAUSS, "9/10"), (GAUSS_PRAGMA, None), (GAUSS, "1e-6"),
                           (GAUSS, "1e-300"), (GAUSS_PRAGMA, "1e-7")]:
        answer = served(service, program, notion, delta)
        assert answer["exit_code"] != 0 and {"E0606", "E1014"} & set(codes(answer)), (program, delta, answer["stderr"])
        assert rows(service, notion) == spent


def test_the_dataset_cap_holds_against_analysts_together_without_telling_its_numbers(service):
    # rho 2 per run at delta 1e-6: one run spends epsilon about 12.5, two about 18.9, three about 24.2
    service.store.set_cap(dataset_key("delta"), EpsilonCap(Fraction(20), Fraction(1, 10**6)))
    answers = [served(service, GAUSS, "delta") for _ in range(6)]
    admitted = [a for a in answers if a["exit_code"] == 0]
    refused = [a for a in answers if a["exit_code"] != 0]
    assert admitted and refused and all(codes(a) == ["E1013"] for a in refused)
    assert all("remains" not in a["stderr"] for a in refused), "E1013 must not show the dataset's numbers"
    use = service.store.usage(dataset_key("delta"))
    assert len(admitted) == 2 and use.spent <= 20
    assert len(service.store.entries(dataset_key("delta"))) == len(admitted)


@pytest.mark.parametrize("field,value", [
    ("delta", "0"), ("delta", "1"), ("delta", "-1e-6"), ("delta", "nan"), ("delta", "inf"), ("delta", "1e400"),
    ("delta", "1/0"), ("delta", "abc"), ("delta", ""), ("delta", "1" * 5000), ("delta", "\ud800"),
    ("budget", "-1"), ("budget", "nan"), ("budget", "inf"), ("budget", "1/0"), ("budget", "x"), ("budget", ""),
])
def test_malformed_delta_and_budget_fields_are_refused_before_anything_runs(service, field, value):
    req = ProgramRequest(GAUSS, "attack.fz", ["delta"], {}, "main", "1000", "json", None)
    setattr(req, field, value)
    with pytest.raises(RequestError) as refused:
        service.run(mallory(service), req)
    assert refused.value.status == 400 and refused.value.diagnostic.code == "E1006"
    assert rows(service, "delta") == ([], [])


def test_a_check_shows_the_notion_refusal_before_any_run(service):
    """`POST /v1/check` tells the analyst the refusal a run would get, charging nothing."""
    req = ProgramRequest(GAUSS, "attack.fz", ["pure"], {}, "main", None, "json", "0.9")
    checked = service.check(mallory(service), req)
    refusals = [d for d in checked["result"]["diagnostics"] if d["code"] == "E0606"]
    assert checked["exit_code"] == 4 and refusals and "budgeted in pure epsilon" in refusals[0]["message"]


def test_the_curator_may_lower_a_datasets_delta_but_not_raise_it_once_spent(service, tmp_path):
    from fuzzpy.diagnostics import FuzzError

    schema = tmp_path / "a.fz"
    assert served(service, GAUSS, "delta")["exit_code"] == 0
    register_dataset(service.store, "delta", ADULT_CSV, schema, EpsilonCap(BIG, Fraction(1, 10**7)))
    assert service.store.cap_of(analyst_key("mallory", "delta")).delta == Fraction(1, 10**7)  # analysts follow
    for looser in (EpsilonCap(BIG, Fraction(1, 10**5)), RhoCap(BIG)):
        with pytest.raises(FuzzError) as refused:
            register_dataset(service.store, "delta", ADULT_CSV, schema, looser)
        assert refused.value.diagnostics[0].code == "E1017" and "only be tightened" in refused.value.diagnostics[0].message
    assert service.store.cap_of(dataset_key("delta")).delta == Fraction(1, 10**7)
    register_dataset(service.store, "delta", ADULT_CSV, schema, EpsilonCap(BIG, Fraction(0)))  # down to pure: tighter
    assert "E0606" in codes(served(service, GAUSS, "delta", "1e-7"))


# ---- the same attack locally: the command line and the Python API refuse it the same way -------------

def test_the_reproducer_is_refused_the_same_way_by_the_command_line_and_the_python_api(tmp_path):
    import pandas as pd

    import fuzzpy
    from fuzzpy.ledger import Ledger, dataset_identity

    from .helpers import fuzzpy_cli

    program = tmp_path / "g.fz"
    program.write_text(GAUSS)
    for cap in (EpsilonCap(Fraction(1), Fraction(0)), EpsilonCap(Fraction(100), Fraction(1, 10**6))):
        ledger = tmp_path / f"ledger-{cap.delta.denominator}.sqlite"
        with Ledger(ledger) as book:
            book.set_cap(dataset_identity(ADULT_CSV), cap)
        res = fuzzpy_cli("run", str(program), "--data", str(ADULT_CSV), "--budget", "1", "--delta", "0.9",
                         "--ledger", str(ledger))
        assert res.returncode == 4 and "E0606" in res.stderr and "released" not in res.stdout
        frame = pd.read_csv(ADULT_CSV)
        book_df = tmp_path / f"api-{cap.delta.denominator}.sqlite"
        from fuzzpy.pipeline.local import frame_identity

        with Ledger(book_df) as book:
            book.set_cap(frame_identity(frame), cap)
        with pytest.raises(fuzzpy.FuzzpyError) as refused:
            fuzzpy.run(GAUSS, frame, budget=1, delta="0.9", ledger=book_df)
        assert refused.value.codes == ["E0606"]
        for path in (ledger, book_df):
            with Ledger(Path(path)) as book:
                assert book.entries() == []


def test_each_datasets_notion_is_published_with_its_schema(service):
    published = {d["dataset"]: d["privacy"] for d in service.schemas(mallory(service))["datasets"]}
    assert published == {"delta": {"notion": "epsilon at delta 0.000001", "delta": "0.000001"},
                         "pure": {"notion": "pure epsilon", "delta": "0.0"},
                         "rho": {"notion": "zCDP rho", "delta": None}}
