"""The Python API (fuzzpy.check / fuzzpy.run): the command line's rules, on DataFrames."""

from __future__ import annotations

from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fuzzpy
from fuzzpy.ledger import open_ledger

ROOT = Path(__file__).resolve().parents[2]
QUICK = ROOT / "examples" / "quickstart.fz"
PROG = '''
schema T { x : num[0, 10], k : cat{"a", "b"} }
function main (db : bag T) {
  sample n = laplace 0.5 (count db);
  sample s = laplace 0.25 (sum (map (fun r -> r.x) db));
  return (n, s)
}
'''


@pytest.fixture
def df():
    return pd.DataFrame({"x": [1.0, 2.0, 3.0, 50.0], "k": ["a", "b", "a", "b"], "other": ["p", "q", "r", "s"]})


def spent(ledger: Path) -> list[F]:
    book = open_ledger(ledger)
    try:
        return [book.spent(d) for d in book.datasets()]
    finally:
        book.close()


def test_check_a_file_and_a_string():
    r = fuzzpy.check(QUICK)
    assert r.ok and r.epsilon == F(1, 5) and r.per_input == {"db": F(1, 5)}
    assert [(m.name, m.epsilon, m.location) for m in r.mechanisms] == [
        ("laplace", F(1, 10), f"{QUICK}:17:14"), ("laplace", F(1, 10), f"{QUICK}:18:18")]
    s = fuzzpy.check(PROG, budget="1")
    assert s.ok and s.epsilon == F(3, 4) and s.functions["main"].startswith("bag T -o[0.75]")
    assert "privacy: epsilon = 0.75" in s.text and "budget: 1" in s.text


def test_check_reports_errors_as_objects():
    r = fuzzpy.check(PROG.replace("laplace 0.5 (count db)", "return (count db)"))
    assert not r.ok and [d.code for d in r.errors] == ["E0302"]
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        r.raise_for_errors()
    assert exc.value.codes == ["E0302"] and "error[E0302]" in str(exc.value)


def test_run_releases_with_accuracy_and_charges_first(df, tmp_path):
    ledger = tmp_path / "l.sqlite"
    res = fuzzpy.run(PROG, df, budget=1, ledger=ledger)
    assert [r.label for r in res.releases] == ["n", "s"]
    assert [r.epsilon for r in res.releases] == [F(1, 2), F(1, 4)]
    n = res.releases[0]
    assert n.accuracy.interval == pytest.approx((n.value - n.accuracy.bound, n.value + n.accuracy.bound))
    assert n.location == "<cell>:4:14"
    assert res.value == (res.releases[0].value, res.releases[1].value)
    assert spent(ledger) == [F(3, 4)]
    assert [(s.dataset, s.spent, s.cap, s.notion, s.default_cap) for s in res.spending] == \
        [("db", F(3, 4), F(10), "pure epsilon", True)]  # the default cap, set by this first run
    frame = res.to_frame()
    assert list(frame["label"]) == ["n", "s"] and list(frame["epsilon"]) == [0.5, 0.25]


def test_over_budget_is_refused_before_reading_or_charging(df, tmp_path):
    ledger = tmp_path / "l.sqlite"
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy.run(PROG, {"db": df}, budget="0.5", ledger=ledger)
    assert exc.value.codes == ["E0401"]
    assert not ledger.exists() or spent(ledger) == []


def test_the_dataset_cap_holds_across_programs(df, tmp_path):
    ledger = tmp_path / "l.sqlite"
    fuzzpy.run(PROG, df, budget=1, ledger=ledger)
    book = open_ledger(ledger)
    (dataset,) = book.datasets()
    book.set_cap(dataset, F(1))
    book.close()
    other = PROG.replace("(count db)", "(count (filter (fun r -> r.k == \"a\") db))")  # another program
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy.run(other, df, budget=1, ledger=ledger)
    assert exc.value.codes == ["E0601"]
    assert spent(ledger) == [F(3, 4)]


def test_missing_column_names_column_and_schema_without_data(df, tmp_path):
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy.run(PROG, df.drop(columns=["k"]), budget=1, ledger=tmp_path / "l.sqlite")
    assert exc.value.codes == ["E0503"]
    assert "'k'" in str(exc.value) and "schema T" in str(exc.value)
    assert not (tmp_path / "l.sqlite").exists() or spent(tmp_path / "l.sqlite") == []


def test_bad_cells_are_not_quoted(tmp_path):
    secret = pd.DataFrame({"x": ["1", "SECRET-4711"], "k": ["a", "b"]})
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy.run(PROG, secret, budget=1, ledger=tmp_path / "l.sqlite")
    assert exc.value.codes == ["E0504"] and "SECRET" not in str(exc.value) and "4711" not in str(exc.value)


def test_tables_are_matched_by_name(df, tmp_path):
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy.run(PROG, {"table": df}, budget=1, ledger=tmp_path / "l.sqlite")
    assert sorted(exc.value.codes) == ["E0506", "E0507"]
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy.run(PROG, {"db": [1, 2]}, budget=1, ledger=tmp_path / "l.sqlite")
    assert exc.value.codes == ["E0502"]


def test_seeded_run_charges_nothing_and_budget_is_required(df, tmp_path):
    res = fuzzpy.run(PROG, df, budget=1, seed=4, ledger=tmp_path / "l.sqlite")
    assert res.seeded and res.spending == [] and not (tmp_path / "l.sqlite").exists()
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy.run(PROG, df, budget=None, seed=4)
    assert exc.value.codes == ["E0701"]
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy.check(PROG, budget="lots")
    assert exc.value.codes == ["E0701"]


def test_tabular_results_are_dataframes(df):
    prog = '''import "stdlib/groups.fz"
schema T { x : num[0, 10], k : cat{"a", "b"} }
function main (db : bag T) { sample m = group_mean 1 (fun r -> r.k) (fun r -> r.x) 0 10 db; return m }
'''
    res = fuzzpy.run(prog, df, budget=1, seed=1)
    table = res.table
    assert list(table["key"]) == ["a", "b"] and table["value"].between(0, 10).all()
    # the sum and the count of each group are released; the mean is an estimate computed from them
    assert [r.label for r in res.releases] == ["m.sum[a]", "m.count[a]", "m.sum[b]", "m.count[b]"]
    assert [e.label for e in res.estimates] == ["m[a]", "m[b]"]
    assert [e.value for e in res.estimates] == list(table["value"])
    assert all(e.interval[0] <= e.value <= e.interval[1] and e.sources == [f"m.sum[{k}]", f"m.count[{k}]"]
               for e, k in zip(res.estimates, "ab"))
    html = res._repr_html_()
    assert "<table>" in html and "m[a]" in html and "m.count[b]" in html and "NOT private" in html


def test_gaussian_releases_need_a_delta_and_are_charged_at_it(tmp_path):
    import pandas as pd

    import fuzzpy

    src = ('schema T { x : num[0, 10] }\n'
           'function main (db : bag T) : fuzzy num { gaussian 0.5 (count db) }')
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0]})
    with pytest.raises(fuzzpy.FuzzpyError) as exc:
        fuzzpy.run(src, df, budget=10, ledger=tmp_path / "l.sqlite", seed=1)
    assert "E0314" in exc.value.codes
    report = fuzzpy.check(src, delta="1e-5")
    assert report.rho == F(1, 2) and report.delta == F(1, 10**5) and 4.3 < report.epsilon < 4.5
    result = fuzzpy.run(src, df, budget=10, delta=1e-5, ledger=tmp_path / "l.sqlite")
    assert result.epsilon == report.epsilon and result.releases[0].mechanism == "gaussian"


@pytest.mark.parametrize("data", [pd.Series([1, 2, 3]), np.array([[1, 2], [3, 4]]), [[41, 2]], "adult.csv", 7,
                                  {41: pd.DataFrame()}])
def test_data_that_is_no_dataframe_is_refused_by_type_without_quoting_it(data, tmp_path):
    """`fuzzpy.run` given a Series or a numpy array raised a raw ValueError, and `[[1, 2]]` was
    taken as a mapping whose cell 1 was echoed as a table name."""
    with pytest.raises(fuzzpy.FuzzpyError) as refused:
        fuzzpy.run(PROG, data, budget=1, ledger=tmp_path / "l.sqlite")
    assert refused.value.codes[0] in ("E0502", "E0506", "E0507")
    assert "41" not in str(refused.value) and "[1" not in str(refused.value)
    assert not (tmp_path / "l.sqlite").exists()  # refused before the ledger is opened


def test_docs_python_md_gives_the_signatures_of_check_and_run():
    """Issue 38: docs/python.md's signatures of `check` and `run` name every parameter, with its
    default, as the functions have them (`delta`, `rho`, `allow_empty` included)."""
    import inspect
    import re
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text().split())
    for fn in (fuzzpy.check, fuzzpy.run):
        [doc] = re.findall(rf"\* `{fn.__name__}\((.*?)\) -> \w+`", text)
        documented = [p.strip() for p in doc.split(",") if p.strip() != "*"]
        actual = [p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}".replace("'", '"')
                  for p in inspect.signature(fn).parameters.values()]
        assert documented == actual, fn.__name__
