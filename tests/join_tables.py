"""What the tests of joins and public tables share (rules Public tables, Truncate and Table join,
docs/soundness.md): a private table F of flights, a public table P of planes, another private
table Q, frames for them, and a run of a pair of neighbouring tables through the soundness oracle
(mechanisms replaced by the identity, both runs with the same truncation secret)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Optional

import pandas as pd

from fuzzpy.audit.oracle import audit_pair
from fuzzpy.checking.program import check_source
from fuzzpy.runtime.data import load_frame

SCHEMAS = """schema F { tail : string, carrier : string, delay : num[0, 10] }
public schema P { tail : string unique, seats : int[0, 10], maker : cat{"A", "B"} }
public schema Models { maker : cat{"A", "B"} at most 3 per value, model : string }
schema Q { tail : string, year : int[1990, 2020] }
"""


def check(src: str):
    return check_source(SCHEMAS + src, "j.fz")


def codes(report) -> list[str]:
    return [d.code for d in report.diagnostics]


def refused(src: str, code: str, words: str = "") -> Any:
    """The program is refused with `code` (and `words` in one of its messages or notes)."""
    r = check(src)
    assert not r.ok and code in codes(r), [(d.code, d.message) for d in r.diagnostics]
    if words:
        text = [d.message + " " + " ".join(d.notes) for d in r.diagnostics if d.code == code]
        assert any(words in t for t in text), text
    return r


def accepted(src: str) -> Any:
    r = check(src)
    assert r.ok, [(d.code, d.message, d.notes) for d in r.diagnostics]
    return r


def frame(report: Any, schema: str, rows: list[tuple], table: str) -> pd.DataFrame:
    """Rows conformed by the real loader (the dtypes of a real run)."""
    s = report.schemas[schema]
    raw = pd.DataFrame([[str(v) for v in row] for row in rows], columns=[c.name for c in s.columns], dtype=object)
    return load_frame(raw, s, table=table)


def loss_violations(report: Any, a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame],
                    changed: str, secret: int = 0, public: Optional[dict[str, pd.DataFrame]] = None) -> list:
    """The oracle's violations on the pair (A, B), which differ in table `changed`, in both
    directions; public tables are the same in both."""
    inp = next(i for i in report.inputs if i.name == changed)
    out = []
    for x, y in ((a, b), (b, a)):
        pr = audit_pair(report.entry_instance, inp.epsilon, {**x, **(public or {})}, {**y, **(public or {})},
                        rho=inp.rho_gauss, rho_pure=inp.rho_pure, secret=secret)
        assert pr.a.status == "ok" and pr.b.status == "ok", (pr.a, pr.b)
        out += pr.violations
    return out


def moved(report: Any, a: dict, b: dict, secret: int = 0, public: Optional[dict] = None) -> Fraction:
    """How far the single released number moved between A and B (identity mechanism)."""
    from fuzzpy.audit.oracle import run_identity

    ra = run_identity(report.entry_instance, {**a, **(public or {})}, secret=secret)
    rb = run_identity(report.entry_instance, {**b, **(public or {})}, secret=secret)
    assert ra.status == rb.status == "ok", (ra, rb)
    return abs(Fraction(ra.calls[0].observed) - Fraction(rb.calls[0].observed))
