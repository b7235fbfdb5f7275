"""Helpers for the standard library tests: check a probe that uses a stdlib function, read its
exact type and epsilon, and run programs on a small deterministic table with seeded noise."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

from fuzzpy.checking.program import CheckReport, check_source

ROOT = Path(__file__).resolve().parents[2]
STDLIB = ROOT / "stdlib"

# The schema every probe and run uses (docs/stdlib.md shows the same one).
ROW = ('schema Row { x : num[0, 100], y : num[0, 100], k : cat{"a", "b", "c", "d"}, flag : bool }\n'
       'schema Trip unit who { who : string, place : string, x : num[0, 100] }\n')  # a table with a privacy unit
IMPORTS = "".join(f'import "stdlib/{name}.fz"\n' for name in ("bags", "lists", "stats", "groups", "select", "ml", "adaptive", "units"))
DUMMY_MAIN = "function main (db : bag Row) : fuzzy num { laplace 1 (count db) }\n"


def errors(report: CheckReport) -> list[str]:
    return [f"{d.code} {d.message}" for d in report.diagnostics if d.severity == "error"]


def probe(params: str, expr: str, *, extra: str = "") -> CheckReport:
    """Check `function probe PARAMS { EXPR }` next to the whole library; the report has the
    probe's inferred type (and, if it returns a distribution, is checked as the entry point,
    so report.epsilon is its exact privacy loss)."""
    src = ROW + IMPORTS + extra + f"function probe {params} {{ {expr} }}\n"
    report = check_source(src, "probe.fz", entry="probe")
    if any(d.code == "E0202" and "must return a distribution" in d.message for d in report.diagnostics):
        report = check_source(src + DUMMY_MAIN, "probe.fz", entry="main")
    assert not errors(report), errors(report)
    return report


def probe_type(params: str, expr: str, **kw) -> str:
    report = probe(params, expr, **kw)
    (f,) = [f for f in report.functions if f.name == "probe"]
    return f.type


def mechanisms(report: CheckReport) -> list[tuple[str, Fraction, Fraction, Fraction]]:
    """(name, sensitivity, epsilon, scale) of every mechanism of the library the probe used."""
    return sorted({(m.name, m.sensitivity, m.epsilon, m.scale) for m in report.mechanisms})


# ---- running -------------------------------------------------------------------------------

def rows(n: int = 400, seed: int = 7) -> list[tuple[float, float, str, bool]]:
    """A deterministic table: x in [0, 100] roughly uniform, y = 100 - x plus jitter, k skewed
    towards "a", flag = x < 30."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x = round(rng.uniform(0, 100), 2)
        y = round(min(100.0, max(0.0, 100 - x + rng.uniform(-5, 5))), 2)
        k = "abcd"[min(3, int(rng.expovariate(1.2)))]
        out.append((x, y, k, x < 30))
    return out


def load_rows(tmp_path: Path, data) -> Any:
    from fuzzpy.runtime.data import load_table

    path = tmp_path / "rows.csv"
    lines = ["x,y,k,flag"] + [f"{x},{y},{k},{str(f).lower()}" for x, y, k, f in data]
    path.write_text("\n".join(lines) + "\n")
    schema = check_source(ROW + DUMMY_MAIN, "schema.fz").schemas["Row"]
    return load_table(path, schema, table="db")


def run(body: str, table, *, ret: str = "fuzzy num", extra: str = "", seed: int = 0, params=None):
    """Check `main (db : bag Row) : RET { BODY }` with the library and run it on `table` with
    seeded noise; returns (report, run result)."""
    from fuzzpy.runtime.interpreter import run_program
    from fuzzpy.runtime.samplers import RandomSource

    src = ROW + IMPORTS + extra + f"function main (db : bag Row) : {ret} {{ {body} }}\n"
    report = check_source(src, "run.fz", params=params)
    assert not errors(report), errors(report)
    result = run_program(report.entry_instance, {"db": table}, RandomSource.seeded(seed))
    return report, result


# A planted logistic model on Row-like points, shared by the fits' tests.
TRUE_MODEL = (-0.5, 3.0, -2.0)     # intercept, x / 50 - 1, y / 50 - 1
FEATURES = "function features (r : Row) : vec[3] { vec (1, r.x / 50 - 1, r.y / 50 - 1) }\n"
LABEL = "function label (r : Row) : num { if r.flag then 1 else 0 }\n"


def planted_rows(n: int = 2000, seed: int = 11) -> list[tuple[float, float, str, bool]]:
    """x, y uniform in [0, 100]; flag drawn with probability sigmoid(TRUE_MODEL . (1, x/50-1, y/50-1))."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x, y = round(rng.uniform(0, 100), 2), round(rng.uniform(0, 100), 2)
        z = TRUE_MODEL[0] + TRUE_MODEL[1] * (x / 50 - 1) + TRUE_MODEL[2] * (y / 50 - 1)
        out.append((x, y, "a", rng.random() < 1 / (1 + math.exp(-z))))
    return out
