"""The checker's answers, pinned: a regression guard for changes that must not change them.

    python -m tests.checking.report_guard write     # record the fixture (with the trusted code)
    python -m tests.checking.report_guard compare   # check every recorded input against it
    python -m tests.checking.report_guard add       # record new inputs only, if every recorded one is identical

A performance change to the checker (memoised hashes, integer fast paths, shared summaries) must
leave every checked result as it was: epsilon and rho, each input's releases, every function's
type and sensitivities, the mechanisms, the diagnostics with their order and text. This module
checks a fixed set of inputs (every example, the benchmark's generated program, and generated
programs of the soundness oracle's generator, from fixed seeds) and reduces each report (and the
parsed file) to a digest of everything it states; the fixture `report_guard.json` holds those digests as the
trusted code produced them, with the leading figures in clear so that a mismatch can be read,
and a hash of each input's text (a changed generator or example shows as a changed input, not
as a changed checker: then re-record the fixture with the trusted code).

Timings, LP solve counts and the number of instances checked are the work done, not the
answer, and are left out.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).with_name("report_guard.json")
SEEDS = range(300)  # generated programs: oracle generator, RandomChooser(seed)


def inputs() -> Iterator[tuple[str, str, str]]:
    """(name, file name the check is given, source text) of every guarded input, in order."""
    for path in sorted((ROOT / "examples").rglob("*.fz")):
        rel = path.relative_to(ROOT).as_posix()
        yield rel, str(path), path.read_text()
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.check_speed import program
    finally:
        sys.path.pop(0)
    yield "benchmark-1000", "bench.fz", program(1000)
    from tests.oracle.choices import RandomChooser
    from tests.oracle.generator import generate

    for seed in SEEDS:
        yield f"oracle-{seed}", "gen.fz", generate(RandomChooser(seed)).text


def answer(report: Any) -> dict:
    """Everything the report states, as plain data (work statistics left out)."""
    from fuzzpy.render.report import report_json

    data = report_json(report)
    data.pop("timings_ms", None)
    data.pop("lp_solves", None)
    data["inputs_detail"] = [[repr(i.epsilon), repr(i.rho_gauss), repr(i.rho_pure), repr(i.laplace),
                              repr(i.semantic)] for i in report.inputs]
    data["functions_detail"] = [[f.name, repr(f.coefs), repr(f.rhos), repr(f.param_names)]
                                for f in report.functions]
    data["mechanisms_detail"] = [repr(m) for m in report.mechanisms]
    data["entry_type"] = repr(report.entry_type)
    data["growth"] = repr(report.growth)
    data["param_types"] = {k: repr(v) for k, v in report.param_types.items()}
    data["schemas"] = {k: repr(v) for k, v in report.schemas.items()}
    return data


def syntax(x: Any) -> Any:
    """The parsed file as plain data: every node's class and fields, spans included."""
    from dataclasses import fields, is_dataclass
    from fractions import Fraction

    if is_dataclass(x) and not isinstance(x, type):
        return [type(x).__name__] + [[f.name, syntax(getattr(x, f.name))] for f in fields(x)]
    if isinstance(x, (list, tuple)):
        return [syntax(v) for v in x]
    if isinstance(x, Fraction):
        return f"{x.numerator}/{x.denominator}"
    return repr(x)


def digest(name: str, file: str, text: str) -> dict:
    import fuzzpy
    from fuzzpy.checking.program import check_source
    from fuzzpy.syntax.parser import parse_module

    report = check_source(text, file)
    data = json.dumps(answer(report), sort_keys=True, default=repr)
    parsed = json.dumps(syntax(parse_module(text, file)))
    for root in (str(Path(fuzzpy.__file__).resolve().parents[1]), str(ROOT)):  # the stdlib's folder too
        data, parsed = data.replace(root, "<root>"), parsed.replace(root, "<root>")  # spans name the file
    return {"source_sha256": hashlib.sha256(text.encode()).hexdigest()[:16], "ok": report.ok,
            "syntax_sha256": hashlib.sha256(parsed.encode()).hexdigest()[:32], "epsilon": str(report.epsilon) if report.ok and report.entry else None,
            "codes": [d.code for d in report.diagnostics],
            "sha256": hashlib.sha256(data.encode()).hexdigest()}


def compute(names: set[str] | None = None) -> dict[str, dict]:
    """The digest of every guarded input (of those named, if `names` is given)."""
    return {name: digest(name, file, text) for name, file, text in inputs() if names is None or name in names}


def main(argv: list[str]) -> int:
    if argv[:1] == ["add"]:  # new inputs only: every recorded one must still be identical
        expected = json.loads(FIXTURE.read_text())
        got = compute()
        bad = [k for k in expected if got.get(k) != expected[k]]
        if bad:
            print(f"{len(bad)} recorded reports differ; nothing added (first: {bad[0]})")
            return 1
        new = sorted(set(got) - set(expected))
        expected.update({k: got[k] for k in new})
        rows = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(expected.items())]
        FIXTURE.write_text("{\n" + ",\n".join(rows) + "\n}\n")
        print(f"added {len(new)} new inputs: {', '.join(new)}")
        return 0
    if argv[:1] == ["write"]:
        rows = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(compute().items())]
        FIXTURE.write_text("{\n" + ",\n".join(rows) + "\n}\n")
        return 0
    expected = json.loads(FIXTURE.read_text())
    got = compute()
    bad = [k for k in expected if got.get(k) != expected[k]]
    for k in bad:
        print(f"{k}: expected {expected[k]}, got {got.get(k)}")
    print(f"{len(expected) - len(bad)} of {len(expected)} reports identical")
    return 1 if bad or set(got) != set(expected) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
