"""What the checker records of each mechanism, kept apart from the checker so that reading a
report back from the check cache (fuzzpy/checking/cache.py) does not import the checker."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ..diagnostics import Span


@dataclass
class MechanismRecord:
    name: str
    span: Span
    sensitivity: Fraction
    epsilon: Fraction
    scale: Fraction
    function: str
    extra: dict = field(default_factory=dict)
