"""Random join programs for the soundness oracle (rules Public tables, Truncate and Table join).

A case is a program joining a private table F with a public table P (declared `at most M per
value`), with a second private table Q, or with a copy of F itself (renamed, maybe filtered: a
self-join), each private side truncated to k rows per key; then a count or a clipped sum of the
join, maybe per group of a public column.  Its tables are drawn with few key values (many matches
per key), the public one within its declared bound, and its neighbour adds or removes one row of
F or of Q.  Kept apart from generator.py so that the programs the report guard pins stay as they
were; only small integers are drawn, from the chooser, so a case replays from its seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .choices import Chooser, coin, pick

KEYS = ["a", "b", "c"]


@dataclass
class JoinCase:
    text: str
    tables: dict[str, list[tuple]]  # table -> rows
    neighbour: dict[str, list[tuple]] = field(default_factory=dict)  # the changed table's rows
    changed: str = "f"
    secret: int = 0


def _schemas(most: int) -> str:
    return ("schema F { k : string, x : int[0, 10] }\n"
            "schema Q { k2 : string, y : int[0, 10] }\n"
            f'public schema P {{ k3 : string at most {most} per value, z : int[0, 10], g : cat{{"u", "v"}} }}\n')


def _right(ch: Chooser, kb: int) -> tuple[str, str]:
    """The second table of a private join and the name of its key: Q, or F again (a self-join)."""
    shape = pick(ch, ["q", "self", "filtered"])
    if shape == "q":
        return f'truncate {kb} "k2" q', "k2"
    copy = f'truncate {kb} "k2" (map (fun r -> {{k2 = r.k, y = r.x}}) f)'
    if shape == "filtered":
        copy = f"filter (fun r -> r.y > {pick(ch, [2, 5])}) ({copy})"
    return copy, "k2"


def _release(ch: Chooser, joined: str, public: bool) -> str:
    value = pick(ch, ["count", "x", "other"])
    if value == "count":
        body = "count t"
    else:
        col = "x" if value == "x" else ("z" if public else "y")
        body = f"sum (map (fun r -> clip 0 10 r.{col}) t)"
    eps = pick(ch, ["1", "0.5"])
    if public and coin(ch, 40):  # per group of a public column: parallel composition
        return f"each (fun t -> laplace {eps} ({body})) (groupby (fun r -> r.g) ({joined}))"
    return f"let t = {joined}; laplace {eps} ({body})"


def _rows(ch: Chooser, n: int, per_key: int | None = None) -> list[tuple]:
    rows, seen = [], {k: 0 for k in KEYS}
    for _ in range(n):
        key = pick(ch, KEYS)
        if per_key is not None and seen[key] >= per_key:
            continue
        seen[key] += 1
        rows.append((key, pick(ch, [0, 3, 6, 10])))
    return rows


def generate_join(ch: Chooser) -> JoinCase:
    most = pick(ch, [1, 2, 3])
    ka = pick(ch, [1, 2, 3])
    left = f'truncate {ka} "k" f'
    if coin(ch, 30):
        left = f"filter (fun r -> r.x > 4) ({left})"
    public = coin(ch, 40)
    if public:
        joined = f'join_public "k" "k3" ({left}) p'
    else:
        right, key = _right(ch, pick(ch, [1, 2, 3]))
        joined = f'join_private "k" "{key}" ({left}) ({right})'
    main = "function main (f : bag F) (q : bag Q) (p : bag P) { " + _release(ch, joined, public) + " }\n"
    f, q = _rows(ch, pick(ch, [0, 3, 6, 9])), _rows(ch, pick(ch, [0, 3, 6]))
    p = [(k, z, pick(ch, ["u", "v"])) for k, z in _rows(ch, 7, most)]
    changed = pick(ch, ["f", "q"])
    base = f if changed == "f" else q
    if base and coin(ch, 30):
        gone = pick(ch, list(range(len(base))))
        neighbour = base[:gone] + base[gone + 1:]
    else:
        at = pick(ch, list(range(len(base) + 1)))
        neighbour = base[:at] + [(pick(ch, KEYS), pick(ch, [0, 5, 10]))] + base[at:]
    secret = pick(ch, [0, 1, 7, 2 ** 63 + 5, 2 ** 64 - 1])
    return JoinCase(_schemas(most) + main, {"f": f, "q": q, "p": p}, {changed: neighbour}, changed, secret)
