"""`fuzzpy run` end to end: releases within budget, refusals before reading data, the ledger,
seed mode, and failures that show nothing private."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fuzzpy.checking.program import check_file
from fuzzpy.interfaces.cli import app
from fuzzpy.ledger import Ledger, dataset_identity
from fuzzpy.runtime.data import load_table

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "data" / "adult_sample.csv"
ADULT = Path("/work/shared/data/adult/adult.data")
needs_adult = pytest.mark.skipif(not ADULT.exists(), reason="UCI Adult files not available")

SAMPLE_SCHEMA = """schema Adult {
  age : num[17, 90], workclass : string, education_num : int[1, 16], sex : cat{"Male", "Female"},
  hours_per_week : num[1, 99], income : cat{"<=50K", ">50K"}
}
param eps : num = 0.1;
"""
RACES = '"White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"'
ADULT_SCHEMA = f"""schema Adult {{
  age : int[17, 90], workclass : string, fnlwgt : num[0, 1500000], education : string, education_num : int[1, 16],
  marital_status : string, occupation : string, relationship : string, race : cat{{{RACES}}},
  sex : cat{{"Female", "Male"}}, capital_gain : num[0, 100000], capital_loss : num[0, 5000],
  hours_per_week : int[1, 99], native_country : string, income : cat{{"<=50K", ">50K"}}
}}
"""
COUNT = SAMPLE_SCHEMA + """function main (db : bag Adult) : fuzzy num {
  sample n = laplace eps (count (filter (fun r -> r.age >= 40) db));
  return n
}"""
MEAN = SAMPLE_SCHEMA + """function main (db : bag Adult) : fuzzy (num, num) {
  sample total = laplace eps (sum (map (fun r -> clip 0 80 r.hours_per_week) db));
  sample n = laplace eps (count db);
  return (n, total / n)
}"""
HISTOGRAM = ADULT_SCHEMA + f"""function main (db : bag Adult) : fuzzy (parts {{{RACES}}} num) {{
  each (fun g -> laplace 0.5 (count g)) (groupby (fun r -> r.race) db)
}}"""

runner = CliRunner()


def program(tmp_path: Path, text: str, name: str = "prog.fz") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def fz(*args: object):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def table(path: Path, schema_text: str, name: str = "Adult"):
    report = check_file(program(path.parent if path.is_file() else path, schema_text + "\nfunction main (db : bag "
                                f"{name}) : fuzzy num {{ return 0 }}", "schema_only.fz"))
    return report.schemas[name]


@pytest.fixture
def sample_rows(tmp_path):
    schema = table(tmp_path, SAMPLE_SCHEMA)
    return load_table(SAMPLE, schema, table="db")


# ---- releases within budget ---------------------------------------------------------------------------

def test_noisy_count_text_output(tmp_path, sample_rows):
    res = fz("run", program(tmp_path, COUNT), "--data", SAMPLE, "--budget", "1", "--seed", "5")
    assert res.exit_code == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith("n = "))
    assert "(epsilon 0.1; within +-29.96 with 95% probability)" in line
    value = float(line.split("=")[1].split()[0])
    assert abs(value - (sample_rows["age"] >= 40).sum()) < 80  # scale 10: 8 scales
    assert res.stdout.strip().splitlines()[-1].startswith("result: ")
    assert "NOT differentially private" in res.stderr


def test_clipped_mean_json(tmp_path, sample_rows):
    path = program(tmp_path, MEAN)
    res = fz("run", path, "--data", SAMPLE, "--budget", "100", "--seed", "1", "--format", "json", "--param", "eps=20")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["ok"] and out["seeded"] and out["ledger"] is None and out["epsilon_exact"] == "40"
    assert [r["name"] for r in out["releases"]] == ["total", "n"]
    assert [r["epsilon"] for r in out["releases"]] == [20, 20]
    assert out["releases"][0]["scale_exact"] == "4"  # sensitivity 80 / epsilon 20
    n, mean = out["result"]
    true_mean = sample_rows["hours_per_week"].clip(0, 80).mean()
    assert abs(n - len(sample_rows)) < 2 and abs(mean - true_mean) < 0.05
    assert out["releases"][1]["value"] == n


@needs_adult
def test_histogram_over_a_category_on_headerless_adult(tmp_path):
    path = program(tmp_path, HISTOGRAM)
    res = fz("run", path, "--data", ADULT, "--budget", "0.5", "--seed", "2", "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    truth = load_table(ADULT, check_file(path).schemas["Adult"], table="db")["race"].value_counts()
    keys = ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"]
    assert list(out["result"]) == keys
    for k in keys:
        assert abs(out["result"][k] - truth[k]) < 40  # scale 2
    assert [r["keys"] for r in out["releases"]] == [[k] for k in keys]
    assert all(r["epsilon"] == 0.5 for r in out["releases"]) and out["epsilon"] == 0.5  # parallel composition
    text = fz("run", path, "--data", ADULT, "--budget", "0.5", "--seed", "2").stdout
    assert 'laplace 0.5 (count g)[Black] = ' in text


def test_a_real_run_is_charged_on_the_ledger(tmp_path):
    book = tmp_path / "ledger.sqlite"
    res = fz("run", program(tmp_path, MEAN), "--data", SAMPLE, "--budget", "1", "--ledger", book)
    assert res.exit_code == 0, res.stderr
    assert "NOT differentially private" not in res.stderr
    entries = Ledger(book).entries()
    assert len(entries) == 1
    e = entries[0]
    assert (e.dataset, str(e.epsilon), e.status) == (dataset_identity(SAMPLE), "1/5", "released")
    assert f"charged on {SAMPLE}" in res.stdout and "sha256:" not in res.stdout  # no hash of private rows


def test_two_tables_are_charged_once_per_dataset(tmp_path):
    other = tmp_path / "copy.csv"
    other.write_bytes(SAMPLE.read_bytes() + b"\n")  # another dataset (other bytes)
    text = SAMPLE_SCHEMA + """function main (a : bag Adult) (b : bag Adult) : fuzzy num {
      laplace eps (count a + count b) }"""
    path = program(tmp_path, text)
    book = tmp_path / "l.sqlite"
    res = fz("run", path, "--data", f"a={SAMPLE}", "--data", f"b={other}", "--budget", "1", "--ledger", book)
    assert res.exit_code == 0, res.stderr
    assert sorted((e.dataset, str(e.epsilon)) for e in Ledger(book).entries()) == sorted(
        [(dataset_identity(SAMPLE), "1/5"), (dataset_identity(other), "1/5")])
    same = fz("run", path, "--data", f"a={SAMPLE}", "--data", f"b={SAMPLE}", "--budget", "1", "--ledger", book)
    assert same.exit_code == 0
    assert len(Ledger(book).entries()) == 3  # one more charge: the same dataset twice is one dataset
    missing = fz("run", path, "--data", f"a={SAMPLE}", "--budget", "1", "--ledger", book)
    assert missing.exit_code == 4 and "E0506" in missing.stderr
    unknown = fz("run", path, "--data", f"a={SAMPLE}", "--data", f"c={SAMPLE}", "--data", f"b={SAMPLE}",
                 "--budget", "1", "--ledger", book)
    assert unknown.exit_code == 4 and "E0507" in unknown.stderr
    assert len(Ledger(book).entries()) == 3


def test_a_ledger_cap_stops_the_run_before_anything_is_released(tmp_path):
    from fractions import Fraction

    book = tmp_path / "l.sqlite"
    with Ledger(book) as ledger:
        ledger.set_cap(dataset_identity(SAMPLE), Fraction(3, 10))
    prog = program(tmp_path, MEAN)  # epsilon 0.2
    first = fz("run", prog, "--data", SAMPLE, "--budget", "1", "--ledger", book, "--format", "json")
    assert first.exit_code == 0 and json.loads(first.stdout)["ok"]
    second = fz("run", prog, "--data", SAMPLE, "--budget", "1", "--ledger", book, "--format", "json")
    assert second.exit_code == 4 and "E0601" in second.stderr
    out = json.loads(second.stdout)
    assert out["stage"] == "ledger" and "releases" not in out
    assert [str(e.epsilon) for e in Ledger(book).entries()] == ["1/5"]


# ---- refusals ---------------------------------------------------------------------------------------------

def test_over_budget_is_refused_before_reading_data(tmp_path):
    unreadable = tmp_path / "data.csv"
    unreadable.write_bytes(b"\x00\x01binary\xff" * 10)
    book = tmp_path / "l.sqlite"
    res = fz("run", program(tmp_path, MEAN), "--data", unreadable, "--budget", "0.1", "--ledger", book)
    assert res.exit_code == 3
    assert "E0401" in res.stderr and "E05" not in res.stderr
    assert not book.exists()
    missing = fz("run", program(tmp_path, MEAN), "--data", tmp_path / "nope.csv", "--budget", "0.1", "--seed", "1")
    assert missing.exit_code == 3 and "E0501" not in missing.stderr


def test_program_errors_and_unbounded_programs_exit_1(tmp_path):
    bad = fz("run", program(tmp_path, SAMPLE_SCHEMA + "function main (db : bag Adult) : fuzzy num { retur 1 }"),
             "--data", SAMPLE, "--budget", "1", "--seed", "1")
    assert bad.exit_code == 1
    leak = fz("run", program(tmp_path, SAMPLE_SCHEMA + "function main (db : bag Adult) : fuzzy num { return (count db) }"),
              "--data", SAMPLE, "--budget", "1", "--seed", "1")
    assert leak.exit_code == 1 and "E0302" in leak.stderr


@pytest.mark.parametrize("content, code", [
    ("age,workclass,sex,hours_per_week,income\n40,Private,Male,40,<=50K\n", "E0505"),  # no education_num: no full header, and the field count differs
    ("\x89PNG\r\n\x1a\n\x00\x00binary", "E0502"),
    ("age,workclass,education_num,sex,hours_per_week,income\nforty,Private,9,Male,40,<=50K\n", "E0504"),
])
def test_bad_data_exits_4_and_charges_nothing(tmp_path, content, code):
    data = tmp_path / "bad.csv"
    data.write_bytes(content.encode("latin-1"))
    book = tmp_path / "l.sqlite"
    res = fz("run", program(tmp_path, COUNT), "--data", data, "--budget", "1", "--ledger", book)
    assert res.exit_code == 4
    assert code in res.stderr
    assert not book.exists() or Ledger(book).entries() == []


def test_a_loader_crash_shows_no_details_and_charges_nothing(tmp_path, monkeypatch):
    import fuzzpy.runtime.data as data

    def crash(*a, **kw):
        raise RuntimeError("cell 'SECRET' in row 9")

    monkeypatch.setattr(data, "load_identified", crash)
    book = tmp_path / "l.sqlite"
    res = fz("run", program(tmp_path, COUNT), "--data", SAMPLE, "--budget", "1", "--ledger", book)
    assert res.exit_code == 4 and "E0502" in res.stderr and "SECRET" not in res.stderr
    assert not book.exists() or Ledger(book).entries() == []


def test_usage_errors(tmp_path):
    prog = program(tmp_path, COUNT)
    both = fz("run", prog, "--data", SAMPLE, "--budget", "1", "--seed", "1", "--ledger", tmp_path / "l.sqlite")
    assert both.exit_code == 2 and "E0603" in both.stderr
    assert not (tmp_path / "l.sqlite").exists()
    no_budget = fz("run", prog, "--data", SAMPLE, "--seed", "1")
    assert no_budget.exit_code == 2 and "budget" in no_budget.stderr
    nonbag = program(tmp_path, SAMPLE_SCHEMA + "function main (db : bag Adult) (x : num) : fuzzy num "
                     "{ laplace eps (count db + clip 0 1 x) }", "nonbag.fz")
    res = fz("run", nonbag, "--data", SAMPLE, "--budget", "1", "--seed", "1")
    assert res.exit_code == 2 and "bag Schema" in res.stderr
    assert fz("run", prog, "--data", SAMPLE, "--budget", "1", "--format", "xml").exit_code == 2


# ---- seed mode ---------------------------------------------------------------------------------------------

def test_seed_is_reproducible_and_loudly_not_private(tmp_path):
    prog = program(tmp_path, MEAN)
    runs = [fz("run", prog, "--data", SAMPLE, "--budget", "1", "--seed", s) for s in (11, 11, 12)]
    assert all(r.exit_code == 0 for r in runs)
    assert runs[0].stdout == runs[1].stdout != runs[2].stdout
    assert all("NOT differentially private" in r.stderr and "No budget was charged" in r.stderr for r in runs)
    assert "nothing charged" in runs[0].stdout


# ---- failures during the run -------------------------------------------------------------------------------

def test_a_failing_run_keeps_its_charge_and_shows_no_data(tmp_path, monkeypatch):
    from fuzzpy.primitives.registry import REGISTRY

    def boom(ctx, b):
        raise ValueError("row 17 has SECRET value 123")

    prog = program(tmp_path, SAMPLE_SCHEMA + """function main (db : bag Adult) : fuzzy (num, num) {
      sample n = laplace eps (count db);
      sample s = laplace eps (sum (map (fun r -> r.age) db));
      return (n, s) }""")
    monkeypatch.setattr(REGISTRY["sum"], "run", boom)
    book = tmp_path / "l.sqlite"
    res = fz("run", prog, "--data", SAMPLE, "--budget", "1", "--ledger", book)
    assert res.exit_code == 4
    assert "E0604" in res.stderr and "SECRET" not in res.stderr + res.stdout and "17" not in res.stderr
    assert "released before the failure" in res.stdout and "n = " in res.stdout
    (entry,) = Ledger(book).entries()
    assert entry.status == "failed" and str(entry.epsilon) == "1/5"
    js = fz("run", prog, "--data", SAMPLE, "--budget", "1", "--ledger", book, "--format", "json")
    out = json.loads(js.stdout)
    assert js.exit_code == 4 and out["stage"] == "run" and [r["name"] for r in out["releases"]] == ["n"]
    assert [e.status for e in Ledger(book).entries()] == ["failed", "failed"]


def test_progress_indicator_on_slow_runs(tmp_path, monkeypatch):
    import time

    from fuzzpy.interfaces import run_command
    from fuzzpy.primitives.registry import REGISTRY

    real = REGISTRY["count"].run

    def slow(b):
        time.sleep(0.4)
        return real(b)

    monkeypatch.setattr(REGISTRY["count"], "run", slow)
    monkeypatch.setattr(run_command, "PROGRESS_AFTER_S", 0.1)
    res = fz("run", program(tmp_path, COUNT), "--data", SAMPLE, "--budget", "1", "--seed", "1")
    assert res.exit_code == 0
    assert "running main" in res.stderr
    monkeypatch.undo()
    fast = fz("run", program(tmp_path, COUNT), "--data", SAMPLE, "--budget", "1", "--seed", "1")
    assert "running main" not in fast.stderr  # the default threshold is 2 s


@pytest.mark.slow
def test_released_values_have_the_stated_accuracy(tmp_path, sample_rows):
    """Across seeds, about 95% of released counts fall within the printed +- bound."""
    prog = program(tmp_path, COUNT)
    truth = int((sample_rows["age"] >= 40).sum())
    hits = 0
    for seed in range(200):
        out = json.loads(fz("run", prog, "--data", SAMPLE, "--budget", "1", "--seed", seed, "--format", "json").stdout)
        rel = out["releases"][0]
        hits += abs(rel["value"] - truth) <= rel["accuracy"]["bound"]
    assert 0.88 <= hits / 200 <= 0.995
    assert math.isclose(rel["accuracy"]["bound"], 10 * math.log(20), rel_tol=1e-3)


def test_a_run_leaves_the_heap_frozen_while_it_runs_and_only_then(tmp_path, monkeypatch):
    """`fuzzpy run` keeps the objects alive at the start of the run out of the collector's full
    passes while the program runs (gc.freeze), gives them back after, also when the run fails;
    the curator service's runs do not freeze (several run at once)."""
    import gc

    from fuzzpy.pipeline.session import Session
    from fuzzpy.runtime import interpreter as IM

    seen = []
    real = IM.evaluate_entry

    def spy(*a, **kw):
        seen.append(gc.get_freeze_count())
        return real(*a, **kw)

    monkeypatch.setattr(IM, "evaluate_entry", spy)
    assert gc.get_freeze_count() == 0
    res = fz("run", program(tmp_path, COUNT), "--data", SAMPLE, "--budget", "1", "--seed", "5")
    assert res.exit_code == 0 and seen and seen[0] > 0 and gc.get_freeze_count() == 0
    from fuzzpy import limits

    monkeypatch.setattr(limits, "CALL_DEPTH", 50)  # the run fails at once
    fails = program(tmp_path, SAMPLE_SCHEMA + """function down (n : num) : num { if n <= 0 then 0 else 1 + down (n - 1) }
    function main (db : bag Adult) : fuzzy num { sample x = laplace 1 (count db); return (x + down 1000) }""",
                    "fails.fz")
    res = fz("run", fails, "--data", SAMPLE, "--budget", "1", "--seed", "5")
    assert res.exit_code != 0 and gc.get_freeze_count() == 0
    assert Session.freeze_heap is False  # the service's sessions keep the default
