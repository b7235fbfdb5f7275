"""Random programs over a table with a privacy unit, for the soundness oracle (rules Units, Bound
rows, Bounded groups, Released keys, Partition selection).

A case is one table `t : bag U` whose schema declares the unit `u`, a `main` made of samples
(releases) over it, and two neighbouring tables: the second removes all the rows of one unit of
the first, or adds a unit with one to four rows.  Each release takes the table as it was loaded,
or after a filter, a map or a union with a filter of itself, then bounds what a unit contributes
(`bound_rows k`, `bound_groups m c`, `bound_groups_in` over a constant or released list of keys,
`groupby_in` over released keys after `bound_rows`), and releases counts, clipped sums or a
histogram (Laplace or Gaussian per part); `select_keys` and `select_keys_optimal` release the
keys (a string or an int column) that enough units have.  Kept apart from generator.py so that
the programs the report guard pins stay as they were; only small integers are drawn, from the
chooser, so a case replays from its seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .choices import Chooser, coin, pick, weighted

SCHEMA = 'schema U unit u { u : string, city : string, g : cat{"a", "b", "c"}, x : int[0, 10], ok : bool }\n'
COLUMNS = ["u", "city", "g", "x", "ok"]
UNITS = ["p", "q", "r", "s", "w"]
CITIES = ["BOS", "LAX", "SFO", "ORD"]
EPSILONS = ["1", "0.5", "2"]
DELTAS = ["0.000001", "0.001", "0.1"]
SELECTIONS = ["select_keys", "select_keys_optimal"]
FILTERS = ["r.x > 2", "r.ok", 'r.g == "a"']


@dataclass
class UnitCase:
    text: str
    rows: list[tuple]                  # the table of run A
    neighbour: list[tuple] = field(default_factory=list)  # its neighbour: one unit's rows removed or added
    selects: bool = False              # the program calls a partition selection


class UnitProgram:
    def __init__(self, ch: Chooser):
        self.ch = ch
        self.n = 0
        self.released_keys: list[str] = []  # names bound to released lists of keys
        self.selects = False

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def eps(self) -> str:
        return pick(self.ch, EPSILONS)

    def bound(self) -> str:
        return pick(self.ch, ["1", "2", "3"])

    def source(self) -> str:
        """The table with its unit, as loaded or after row operations that keep the unit."""
        kind = weighted(self.ch, [(5, "t"), (2, "filter"), (1, "map"), (1, "union")])
        if kind == "filter":
            return f"(filter (fun r -> {pick(self.ch, FILTERS)}) t)"
        if kind == "map":
            return '(map (fun r -> {u = r.u, city = r.city, g = r.g, x = clip 0 5 r.x, ok = r.ok}) t)'
        if kind == "union":
            return "(union t (filter (fun r -> r.x > 2) t))"
        return "t"

    def key(self, declared: bool) -> str:
        """A key function: of the declared category g, or of a string or int column."""
        if declared:
            return "(fun r -> r.g)"
        return pick(self.ch, ["(fun r -> r.city)", "(fun r -> r.city)", "(fun r -> r.x)"])

    def per_part(self) -> str:
        """What each part of a partition releases."""
        kind = pick(self.ch, ["count", "sum", "gauss"])
        if kind == "sum":
            return f"fun p -> laplace {self.eps()} (sum (map (fun r -> clip 0 10 r.x) p))"
        if kind == "gauss":
            return f"fun p -> gaussian {pick(self.ch, ['1', '0.5'])} (count p)"
        return f"fun p -> laplace {self.eps()} (count p)"

    def release(self) -> str:
        """One release (a distribution) over the table."""
        ch = self.ch
        kind = weighted(ch, [(2, "rows"), (2, "groups"), (2, "groups_in"), (1, "groupby_in"), (2, "select")])
        src = self.source()
        if kind == "select" or (kind in ("groups_in", "groupby_in") and not self.released_keys and coin(ch, 50)):
            return self.selection(src)
        if kind == "rows":
            bounded = f"bound_rows {self.bound()} {src}"
            if coin(ch, 50):
                return f"laplace {self.eps()} (count ({bounded}))"
            return f"laplace {self.eps()} (sum (map (fun r -> clip 0 10 r.x) ({bounded})))"
        if kind == "groups":
            parts = f"bound_groups {self.bound()} {self.bound()} {self.key(True)} {src}"
            return f"each ({self.per_part()}) ({parts})"
        keys = pick(ch, self.released_keys) if self.released_keys else '["BOS", "SFO", "1", "3"]'
        if kind == "groupby_in":
            parts = f"groupby_in {keys} {self.key(False)} (bound_rows {self.bound()} {src})"
        else:
            parts = f"bound_groups_in {keys} {self.bound()} {self.bound()} {self.key(False)} {src}"
        return f"each ({self.per_part()}) ({parts})"

    def selection(self, src: str) -> str:
        self.selects = True
        prim = pick(self.ch, SELECTIONS)
        return f"{prim} {self.eps()} {pick(self.ch, DELTAS)} {self.bound()} {self.key(False)} {src}"

    def main(self) -> str:
        lines, names = [], []
        for _ in range(weighted(self.ch, [(3, 1), (3, 2), (2, 3)])):
            name = self.fresh("s")
            stmt = self.release()
            if stmt.startswith("select_keys"):
                self.released_keys.append(name)
            lines.append(f"  sample {name} = {stmt};")
            names.append(name)
        result = names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
        return "function main (t : bag U) {\n" + "\n".join(lines) + f"\n  return {result}\n}}\n"


def _rows(ch: Chooser, units: list[str], most: int) -> list[tuple]:
    rows = []
    for unit in units:
        for _ in range(1 + ch.below(most)):
            rows.append((unit, pick(ch, CITIES), pick(ch, ["a", "b", "c"]), pick(ch, [0, 1, 3, 10]),
                         pick(ch, ["true", "false"])))
    return rows


def _neighbour(ch: Chooser, rows: list[tuple]) -> list[tuple]:
    """All the rows of one unit removed, or a new unit with one to four rows (some in keys no other
    unit has), inserted at a random place."""
    present = sorted({r[0] for r in rows})
    if present and coin(ch, 45):
        gone = pick(ch, present)
        return [r for r in rows if r[0] != gone]
    extra = [("z", pick(ch, CITIES + ["NEW", "DEN"]), pick(ch, ["a", "b", "c"]), pick(ch, [0, 1, 3, 7, 10]),
              pick(ch, ["true", "false"])) for _ in range(1 + ch.below(4))]
    at = ch.below(len(rows) + 1)
    return rows[:at] + extra + rows[at:]


def generate_unit_case(ch: Chooser) -> UnitCase:
    gen = UnitProgram(ch)
    text = SCHEMA + gen.main()
    units = UNITS[:ch.below(len(UNITS) + 1)]
    rows = _rows(ch, units, pick(ch, [1, 3, 6]))
    order = list(range(len(rows)))
    for i in range(len(order) - 1, 0, -1):  # interleave the units' rows
        j = ch.below(i + 1)
        order[i], order[j] = order[j], order[i]
    rows = [rows[i] for i in order]
    return UnitCase(text, rows, _neighbour(ch, rows), gen.selects)
