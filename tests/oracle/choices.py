"""Where the generator's choices come from.

The program generator asks a `Chooser` for small integers only (`below(n)`), and every choice
is ordered so that 0 is the simplest option.  Three sources implement it:

* `HypothesisChooser`: draws from hypothesis (the pytest property test; hypothesis shrinks);
* `RandomChooser`: a seeded `random.Random`, recording its choices (the large script: no
  hypothesis overhead, and program i of seed s is reproducible);
* `ReplayChooser`: replays a recorded list, 0 once it runs out (the script's own shrinker edits
  that list, as hypothesis edits its choice sequence).
"""

from __future__ import annotations

import random
from typing import Any, Protocol, Sequence, TypeVar

T = TypeVar("T")


class Chooser(Protocol):
    def below(self, n: int) -> int:
        """An integer in [0, n)."""


class RandomChooser:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.record: list[int] = []

    def below(self, n: int) -> int:
        v = self.rng.randrange(n) if n > 1 else 0
        self.record.append(v)
        return v


class ReplayChooser:
    def __init__(self, record: Sequence[int]):
        self.values = list(record)
        self.i = 0
        self.record: list[int] = []

    def below(self, n: int) -> int:
        v = self.values[self.i] if self.i < len(self.values) else 0
        self.i += 1
        v = min(v, n - 1) if n > 1 else 0
        self.record.append(v)
        return v


class HypothesisChooser:
    def __init__(self, draw: Any):
        from hypothesis import strategies as st

        self.draw = draw
        self._ints = {}  # n -> strategy, built once
        self._st = st

    def below(self, n: int) -> int:
        if n <= 1:
            return 0
        s = self._ints.get(n)
        if s is None:
            s = self._ints[n] = self._st.integers(0, n - 1)
        return self.draw(s)


# ---- helpers over a chooser -------------------------------------------------------------------

def pick(ch: Chooser, options: Sequence[T]) -> T:
    return options[ch.below(len(options))]


def weighted(ch: Chooser, options: Sequence[tuple[int, T]]) -> T:
    """An option with probability proportional to its weight; 0 gives the first."""
    total = sum(w for w, _ in options)
    v = ch.below(total)
    for w, x in options:
        if v < w:
            return x
        v -= w
    return options[-1][1]


def coin(ch: Chooser, percent: int) -> bool:
    """True with about `percent`% probability; the simplest answer (0) is False."""
    return ch.below(100) >= 100 - percent
