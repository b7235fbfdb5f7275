"""Generated programs on the Dask engine against the pandas engine.

docs/soundness.md, rule Engines: an engine must compute the same values as the pandas engine.  For
each generated program the checker accepts and whose table primitives the Dask engine implements
(`unsupported_primitives` is empty), both sides of every pair of neighbouring tables are written as
CSV files: one whole file, loaded by the pandas engine's loader, and the same rows split into
partitions (two files when there are two rows or more), opened by the Dask engine on a running
cluster.  Both keep only the columns the program reads, as `fuzzpy run` does.  The program then
runs on each with the same seeded noise and every fast path on, and the runs must agree exactly
(runtime_diff.Run.same_as): the same status, releases and result.

A Dask run computes on the cluster at every table primitive that needs a value (count, sum, the
sizes of a groupby's parts), and some generated programs do that hundreds of times (a count per
level of a recursion): each run may make at most `COMPUTATIONS` of them, and a run past that
budget is not compared (counted with the timeouts), which keeps the time a comparison takes
bounded without depending on the machine's speed.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path
from typing import Any

from fuzzpy.audit.oracle import OracleTimeout, call_depth
from fuzzpy.checking.program import check_source
from fuzzpy.runtime.columns import columns_read
from fuzzpy.runtime.data import load_table
from fuzzpy.runtime.engines.dask_engine import DaskEngine, unsupported_primitives

from .runtime_diff import FAST, Difference, DiffResult, run_with
from .support import TIMEOUT, Case, pair_tables

COMPUTATIONS = 40  # cluster computations one Dask run may make


class BudgetSpent(OracleTimeout):
    """A Dask run made more cluster computations than its budget (a BaseException, like a
    timeout: it ends the run and the run is not compared)."""


class BudgetedDaskEngine(DaskEngine):
    """The Dask engine, counting the cluster computations of a run against a budget."""

    def __init__(self, client: Any, cluster: Any = None):
        super().__init__(client, cluster)
        self.left = COMPUTATIONS

    def allow(self, computations: int) -> None:
        self.left = computations

    def partials(self, frame: Any, fn: Any, *args: Any) -> list[Any]:
        if self.left <= 0:
            raise BudgetSpent()
        self.left -= 1
        return super().partials(frame, fn, *args)


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v) if isinstance(v, float) else str(v)


def write_csv(path: Path, columns: list[str], rows: list[tuple]) -> str:
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(columns)
        out.writerows([_cell(v) for v in row] for row in rows)
    return str(path)


def partitions(rows: list[tuple]) -> list[list[tuple]]:
    """The rows in two partitions (one when there are fewer than two rows), in order."""
    half = (len(rows) + 1) // 2
    return [rows[:half], rows[half:]] if len(rows) >= 2 else [rows]


_FOLDERS = itertools.count()


def engine_tables(rows: dict[str, list[tuple]], schemas: dict[str, Any], keep: Any, engine: BudgetedDaskEngine,
                  directory: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same rows as the pandas engine's tables (one file each) and as the Dask engine's (its
    partitions, one file each)."""
    pandas_tables, dask_tables = {}, {}
    engine.columns = keep
    for name, table_rows in rows.items():
        schema = schemas[name]
        columns = [c.name for c in schema.columns]
        folder = directory / f"t{next(_FOLDERS)}"
        folder.mkdir(parents=True)
        whole = write_csv(folder / "whole.csv", columns, table_rows)
        pandas_tables[name] = load_table(whole, schema, table=name, keep=keep)
        files = [write_csv(folder / f"part-{i}.csv", columns, part) for i, part in enumerate(partitions(table_rows))]
        dask_tables[name], _ = engine.open_table(files, schema, name)
    return pandas_tables, dask_tables


def dask_case(case: Case, engine: BudgetedDaskEngine, directory: Path, timeout: float = TIMEOUT,
              seed: int = 7, computations: int = COMPUTATIONS) -> DiffResult:
    """Check the case's program; if accepted and the Dask engine implements its table primitives,
    run both sides of every pair on both engines and compare."""
    with call_depth(case.depth_limit):
        report = check_source(case.program.text, "gen.fz")
        if not report.ok:
            return DiffResult("rejected", paths=dict(FAST))
        if unsupported_primitives(report.entry_instance):
            return DiffResult("unsupported", paths=dict(FAST))
        out = DiffResult("accepted", paths=dict(FAST))
        schemas = {inp.name: report.table_schema(inp) for inp in report.inputs}
        inputs = [inp.name for inp in report.inputs]
        keep = columns_read(report.entry_instance)
        for spec in case.pairs:
            tables = pair_tables(spec, schemas, inputs)
            for side in ("a", "b"):
                rows = tables.a if side == "a" else tables.b
                pandas_tables, dask_tables = engine_tables(rows, schemas, keep, engine, directory)
                pandas_run = run_with(report.entry_instance, pandas_tables, seed, timeout, **FAST)
                engine.allow(computations)
                dask_run = run_with(report.entry_instance, dask_tables, seed, timeout, **FAST)
                out.runs += 1
                if "timeout" in (pandas_run.status, dask_run.status):
                    out.timeouts += 1
                    continue
                out.errors += [f"{label}: {r.error}" for label, r in (("pandas", pandas_run), ("dask", dask_run))
                               if r.status == "error"]
                if not dask_run.same_as(pandas_run):
                    where = f"{tables.describe(schemas)} (side {side})"
                    out.differences.append(Difference(where, "Dask engine", dask_run, pandas_run, "pandas engine"))
                    return out
        return out
