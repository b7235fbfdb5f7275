"""Patterns: binding a value to a pattern, and the distances of the components a tensor or
with pattern takes apart (mixed into `Checker`, checker.py).  Taking a tensor apart is a
partition: its components get part symbols (docs/soundness.md, rule Split)."""

from __future__ import annotations

from typing import Any

from ..primitives.registry import NOCONST
from ..syntax import ast as A
from ..typesystem import ir as I
from ..typesystem.sens import Dist
from ..typesystem.types import Tensor, With
from .values import Val


class PatternRules:
    """Pattern binding (a mixin of `Checker`)."""

    # ---- patterns ------------------------------------------------------------------------------

    # rule Functions in containers: a tuple pattern's components keep their functions
    def bind_pattern(self, p: A.Pattern, v: Val) -> tuple[dict[str, Val], Any]:
        if isinstance(p, A.PVar):
            self._note_binding(p.span, p.name, v)
            return {p.name: v}, p.name
        if isinstance(p, A.PWild):
            return {}, None
        assert isinstance(p, A.PProduct)
        want = Tensor if p.kind == "tensor" else With
        if not isinstance(v.type, want) or len(v.type.items) != len(p.items):
            raise self.fail("E0202", f"this pattern has {len(p.items)} components but the value is {v.type}",
                            p.span)
        dists = self._component_dists(p.kind, v)
        bindings: dict[str, Val] = {}
        pats = []
        for i, (sub, t, d) in enumerate(zip(p.items, v.type.items, dists)):
            const = v.const[i] if v.is_const else NOCONST
            ir = I.IConst(const) if const is not NOCONST else I.IVar("_")  # constants are inlined
            fn = v.fns[i] if v.fns is not None else None  # rule Functions in containers
            b, sp = self.bind_pattern(sub, Val(t, d, ir, const, fn))
            bindings.update(b)
            pats.append(sp)
        return bindings, (p.kind, pats)

    def _component_dists(self, kind: str, v: Val) -> list[Dist]:
        n = len(v.type.items)  # type: ignore[attr-defined]
        if v.parts is not None:
            return v.parts
        if kind == "with" or not v.dist:
            return [v.dist] * n  # each component of a with-pair moves at most as the whole
        # Tensor destructuring (Fuzz's rule): components share the whole's distance.
        labels = [f"component {i + 1}" for i in range(n)]
        return self.split(v.dist, labels, list(v.type.items))  # type: ignore[attr-defined]
