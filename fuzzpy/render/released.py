"""Released values as people and tools read them: each value with its cost and accuracy, in
text and JSON, in fuzzpy's notation; the estimates computed from them.  Total: every number
is bounded before it is formatted, since output runs after the budget was charged."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any, Optional

from .labels import estimate_keys
from .numbers import show, to_float
from .report import exact, number


def source_text(span: Any, sources: dict[str, str], limit: int = 60) -> str:
    text = sources.get(span.file) if span is not None else None
    if text is None:
        return "?"
    lines = text.splitlines()
    if not 1 <= span.line <= len(lines):
        return "?"
    line = lines[span.line - 1]
    end = span.end_col - 1 if span.end_line == span.line else len(line)
    out = line[span.col - 1:end].strip()
    out += ")" * max(0, out.count("(") - out.count(")"))  # spans stop before an argument's ")"
    if span.end_line != span.line:
        out += " ..."
    return out if len(out) <= limit else out[:limit - 3] + "..."


def release_label(r: Any, sources: dict[str, str]) -> str:
    base = r.name or source_text(r.span, sources)
    return base + "".join(f"[{k}]" for k in r.keys)


def accuracy_parts(acc: Any) -> tuple[Optional[float], Optional[float], str]:
    """(bound, beta, what) of a mechanism's accuracy statement."""
    if acc is None:
        return None, None, ""
    if isinstance(acc, (int, float, Fraction)):
        return to_float(acc), 0.05, "|noise|"
    bound, beta, what = getattr(acc, "bound", None), getattr(acc, "beta", 0.05), getattr(acc, "what", "")
    return (None if bound is None else to_float(bound)), to_float(beta), str(what)


def accuracy_words(acc: Any, value: Any) -> str:
    if hasattr(acc, "describe"):  # a statement restated in the user's units (primitives/estimates.py)
        return acc.describe()
    bound, beta, what = accuracy_parts(acc)
    if bound is None:
        return ""
    pct = f"{100 * (1 - beta):g}%"
    if what.startswith("|noise|"):
        joint = "all " if isinstance(value, tuple) else ""  # one bound for every coordinate at once
        return f"{joint}within +-{bound:.4g} with {pct} probability"
    if not beta:
        return f"{what} <= {bound:.4g}"
    return f"{what} <= {bound:.4g} with {pct} probability"


def _decimals(acc: Any) -> Optional[int]:
    bound, _, what = accuracy_parts(acc)
    if bound is None or not what.startswith("|noise|") or not bound > 0 or not math.isfinite(bound):
        return None
    return max(0, min(10, 2 - math.floor(math.log10(bound))))


def release_text(r: Any, sources: dict[str, str], label: Optional[str] = None, where: Optional[str] = None) -> str:
    value = value_text(r.value, None, _decimals(r.accuracy))
    words = "; ".join(w for w in (_cost_words(r), accuracy_words(r.accuracy, r.value)) if w)
    if where is None:
        where = f"{r.span.file}:{r.span.line}" if r.span is not None else None
    else:
        where = where.rsplit(":", 1)[0]  # file:line
    return f"{label or release_label(r, sources)} = {value}  ({words})" + (f"  [{where}]" if where else "")


def release_cost(r: Any) -> tuple[str, Any]:
    """A release's own cost in its own notion: ("rho", its zCDP rho) for a Gaussian release,
    ("epsilon", its epsilon) for a pure one."""
    if r.mechanism == "gaussian":
        return "rho", r.extra.get("rho", 0)
    return "epsilon", r.epsilon


def _cost_words(r: Any) -> str:
    notion, amount = release_cost(r)
    together = cost_together(r)
    if together is None:
        return f"{notion} {show(amount)}"
    total, groups = together
    return f"{notion} {show(amount)} per group; the {groups} groups cost epsilon {show(total)} together"


def cost_together(r: Any) -> Optional[tuple[Any, int]]:
    """(epsilon, parts) of all the releases of the `each` a pure release was made in, taken
    together, as the checker proved it: by parallel composition over a groupby's parts the
    per-group epsilon; over bound_groups' parts m*c times it.  None outside an `each`."""
    if release_cost(r)[0] != "epsilon":
        return None
    return r.extra.get("together")


def release_json(r: Any, sources: dict[str, str]) -> dict:
    bound, beta, what = accuracy_parts(r.accuracy)
    loc = None if r.span is None else {"file": r.span.file, "line": r.span.line, "col": r.span.col}
    notion, amount = release_cost(r)
    pure = notion == "epsilon"  # a Gaussian release has no epsilon of its own: its cost is its rho
    return {"name": r.name, "keys": list(r.keys), "mechanism": r.mechanism, "location": loc,
            "source": source_text(r.span, sources), "notion": notion, "cost": number(amount),
            "cost_exact": exact(amount),
            "epsilon": number(r.epsilon) if pure else None, "epsilon_exact": exact(r.epsilon) if pure else None,
            **({} if pure else {"rho": number(amount), "rho_exact": exact(amount)}),
            **_together_json(r),
            "scale": number(r.scale), "scale_exact": exact(r.scale),
            "accuracy": None if bound is None else {"bound": bound, "beta": beta, "what": what,
                                                    "words": accuracy_words(r.accuracy, r.value),
                                                    **_rank_json(r.accuracy)},
            "value": value_json(r.value, None)}


def _together_json(r: Any) -> dict:
    """For a release in an `each`: the epsilon of all its groups together (what to add up); None
    for any other."""
    together = cost_together(r)
    if together is None:
        return {"together": None}  # every release has the same fields
    total, groups = together
    return {"together": {"groups": groups, "epsilon": number(total), "epsilon_exact": exact(total)}}


def _rank_json(acc: Any) -> dict:
    """A quantile's statement in ranks: its level and the neighbouring candidates (public)."""
    if not hasattr(acc, "q"):
        return {}
    return {"quantile": to_float(acc.q), "neighbours": [None if c is None else to_float(c)
                                                        for c in (acc.below, acc.above)]}


ESTIMATES_HEADING = "estimated from the releases (post-processing, no further cost):"


def estimate_json(e: Any, label: str, where: Optional[str], source_labels: list[str]) -> dict:
    """An estimate: its value, its interval for the exact quantity (or none), and in words."""
    def num(x: Any, up: bool) -> Optional[float]:
        """A bound as a float rounded outwards: the interval printed is never narrower."""
        if x is None:
            return None
        f = to_float(x)
        if isinstance(x, Fraction) and math.isfinite(f):
            if up and Fraction(f) < x:
                f = math.nextafter(f, math.inf)
            elif not up and Fraction(f) > x:
                f = math.nextafter(f, -math.inf)
        return f

    return {"label": label, "kind": e.kind, "keys": list(estimate_keys(e)), "value": value_json(e.value),
            "low": num(e.low, False), "high": num(e.high, True), "beta": to_float(e.beta), "bounded": e.bounded,
            "words": e.words, "from": source_labels, "where": where}


def estimate_text(js: dict) -> str:
    decimals = None
    if js["low"] is not None and js["high"] is not None and js["high"] > js["low"]:
        half = (js["high"] - js["low"]) / 2
        decimals = max(0, min(10, 2 - math.floor(math.log10(half))))
    value = _num_text(js["value"], decimals) if isinstance(js["value"], (int, float)) else value_text(js["value"])
    where = f"  [{js['where'].rsplit(':', 1)[0]}]" if js["where"] else ""
    sources = " and ".join(js["from"]) if len(js["from"]) <= 2 else f"{js['from'][0]} .. {js['from'][-1]}"  # a CDF
    return f"{js['label']} = {value}  ({js['words']}; from {sources}){where}"


def _num_text(x: Any, decimals: Optional[int]) -> str:
    x = to_float(x)
    if not math.isfinite(x):
        return str(x)
    if decimals is not None and abs(x) < 1e15:
        return f"{x:.{decimals}f}"
    return f"{x:.7g}"


def value_text(v: Any, t: Any = None, decimals: Optional[int] = None) -> str:
    """A released or post-processed value in fuzzpy's notation, guided by its type when known."""
    from ..typesystem import types as T

    v = plain(v)
    if isinstance(t, T.Fuzzy):
        return "<distribution>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return _num_text(v, decimals)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if v is None:
        return "()"
    if isinstance(v, dict):
        elem = t.elem if isinstance(t, T.Parts) else None
        fields = dict(t.fields) if isinstance(t, T.Record) else {}
        if isinstance(t, T.Parts):
            return "{" + ", ".join(f"{json.dumps(k)}: {value_text(x, elem, decimals)}" for k, x in v.items()) + "}"
        return "{" + ", ".join(f"{k} = {value_text(x, fields.get(k), decimals)}" for k, x in v.items()) + "}"
    if isinstance(v, tuple):
        return _tuple_text(v, t, decimals)
    return "<" + ("bag" if _is_bag(v) else "function" if callable(v) else "value") + ">"


def _tuple_text(v: tuple, t: Any, decimals: Optional[int]) -> str:
    from ..typesystem import types as T

    if isinstance(t, T.SumT) and len(v) == 2 and v[0] in ("inl", "inr"):
        return f"{v[0]} {value_text(v[1], t.left if v[0] == 'inl' else t.right, decimals)}"
    if isinstance(t, T.ListT):
        return "[" + ", ".join(value_text(x, t.elem, decimals) for x in v) + "]"
    items = t.items if isinstance(t, (T.Tensor, T.With)) and len(t.items) == len(v) else [None] * len(v)
    inner = ", ".join(value_text(x, it, decimals) for x, it in zip(v, items))
    return f"(|{inner}|)" if isinstance(t, T.With) else f"({inner})"


def plain(v: Any) -> Any:
    """numpy scalars as Python ones (np.float64 is a float already; np.bool_ and ints are not),
    and exact numbers (released values after exact post-processing) as floats for display."""
    if isinstance(v, Fraction):
        return to_float(v)
    if type(v).__module__ == "numpy" and hasattr(v, "item"):
        try:
            return v.item()
        except (TypeError, ValueError):
            return v
    return v


def _is_bag(v: Any) -> bool:
    from ..runtime.values import is_bag

    return is_bag(v)


def value_json(v: Any, t: Any = None) -> Any:
    from ..typesystem import types as T

    v = plain(v)
    if isinstance(t, T.Fuzzy):
        return "<distribution>"
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        x = to_float(v)
        return x if math.isfinite(x) else str(x)
    if isinstance(v, str) or v is None:
        return v
    if isinstance(v, dict):
        elem = t.elem if isinstance(t, T.Parts) else None
        fields = dict(t.fields) if isinstance(t, T.Record) else {}
        return {str(k): value_json(x, elem if elem is not None else fields.get(k)) for k, x in v.items()}
    if isinstance(v, tuple):
        if isinstance(t, T.SumT) and len(v) == 2 and v[0] in ("inl", "inr"):
            return {v[0]: value_json(v[1], t.left if v[0] == "inl" else t.right)}
        if isinstance(t, T.ListT):
            return [value_json(x, t.elem) for x in v]
        items = t.items if isinstance(t, (T.Tensor, T.With)) and len(t.items) == len(v) else [None] * len(v)
        return [value_json(x, it) for x, it in zip(v, items)]
    return "<bag>" if _is_bag(v) else "<value>"
