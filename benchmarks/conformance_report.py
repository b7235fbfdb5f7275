"""Print the conformance table: each published program, its source, the bound the source states,
the bound fuzzpy proves, and the verdict.

    python benchmarks/conformance_report.py            # a Markdown table (as in docs/conformance.md)
    python benchmarks/conformance_report.py --source Spar

The cases (programs, expected bounds, parameters) are those of the test suite,
tests/conformance/conformance_cases.py; the exit code is 1 if any case does not conform.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "conformance"))

from conformance_cases import CASES, evaluate, show  # noqa: E402


def expected_cell(case) -> str:
    if case.kind == "rejected":
        return f"rejected ({case.expected}): {case.stated}"
    if case.kind == "sound":
        return case.stated
    value = show(case.expected)
    return case.stated if value.split(" (")[0] in case.stated else f"{value}: {case.stated}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", help="only the programs of this source (DFuzz, Spar, ...)")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if args.source is None or c.source.lower() == args.source.lower()]
    start = time.perf_counter()
    rows, failures = [], 0
    for case in cases:
        outcome = evaluate(case)
        failures += not outcome.ok
        where = case.file + (f" ({case.entry})" if case.entry != "main" else "")
        if case.function:
            where = f"{case.file} ({case.function})"
        bound = "-" if outcome.bound is None else show(outcome.bound)
        verdict = outcome.verdict + ("" if outcome.ok else "  <-- DOES NOT CONFORM")
        rows.append((case.id, case.source, expected_cell(case), bound, verdict, where))
    header = ("program", "source", "expected (as stated)", "fuzzpy's bound", "verdict", "file")
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" for _ in header) + " |")
    for row in rows:
        print("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    print(f"\n{len(rows)} programs, {len(rows) - failures} conform, {failures} do not "
          f"({time.perf_counter() - start:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
