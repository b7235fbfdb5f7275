"""Tables with a privacy unit at run time (rule Units, docs/soundness.md).

On the pandas engine a table whose schema declares a unit is a `UnitRows`: its rows (any bag:
a DataFrame, a Series, a MaskedBag) and, beside them in the same order, the unit of each row.
`filter`, `map` and `union` keep each row with its unit (runtime/kernels/bags.py), so a `map`
that turns rows into numbers still knows whose numbers they are; the bounding primitives
(runtime/kernels/units.py) read the units and give plain bags.  On the Dask engine the unit
stays a column of the table (`DaskBag.unit` names it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .values import MaskedBag, materialise, restrict


class UnitRows:
    """The rows of a table with a privacy unit, and each row's unit (`units`, aligned with the
    rows: a numpy array or pandas array).  Never printed with content."""

    __slots__ = ("rows", "units")

    def __init__(self, rows: Any, units: Any):
        self.rows, self.units = rows, units

    def __len__(self) -> int:
        return len(self.units)

    def __repr__(self) -> str:
        return "<bag>"

    def keep(self, mask: np.ndarray) -> "UnitRows":
        """The rows where `mask` holds, with their units."""
        return UnitRows(restrict(self.rows, mask), self.units[mask])

    def with_rows(self, rows: Any) -> "UnitRows":
        """Rows computed one to one from these (a map): the same units."""
        return UnitRows(rows, self.units)


def unit_values(frame: Any, column: str) -> Any:
    """A table's unit column, as an array aligned with its rows."""
    col = frame[column] if not isinstance(frame, MaskedBag) else frame.column(column)
    return col.array if isinstance(col, pd.Series) else np.asarray(col)


# rule Units: every table of a schema with a unit runs with its units beside its rows
def attach_units(tables: dict[str, Any], units: dict[str, str]) -> dict[str, Any]:
    """The entry point's tables, those with a privacy unit given their units: a UnitRows on
    pandas; a Dask table names its unit column (`DaskBag.unit`)."""
    if not units:
        return tables
    out = dict(tables)
    for name, column in units.items():
        table = out.get(name)
        if table is None or isinstance(table, UnitRows):
            continue
        if hasattr(table, "unit") and hasattr(table, "frame"):  # a table of another engine (Dask)
            table.unit = column
            continue
        out[name] = UnitRows(table, unit_values(table, column))
    return out


def union_units(a: UnitRows, b: UnitRows, rows: Any) -> UnitRows:
    """The union of two tables with the same unit, whose rows are `rows` (a's then b's)."""
    ua, ub = a.units, b.units
    try:
        units = pd.concat([pd.Series(ua), pd.Series(ub)], ignore_index=True).array
    except (TypeError, ValueError):  # pragma: no cover - differently stored units
        units = np.concatenate([np.asarray(ua, dtype=object), np.asarray(ub, dtype=object)])
    return UnitRows(rows, units)


def plain_rows(v: Any) -> Any:
    """The rows of a UnitRows (anything else as it is), materialised."""
    return materialise(v.rows if isinstance(v, UnitRows) else v)


__all__ = ["UnitRows", "attach_units", "plain_rows", "union_units", "unit_values"]
