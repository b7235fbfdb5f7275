"""The audit pipeline: screen pairs, climb, explore events, validate on fresh samples.

1. screen: with many candidate pairs, each is explored with a small sample and ranked by the
   best event it shows (skipped when there are few pairs);
2. climb: a coordinate search over the added row's values, moving the best pair toward a larger
   estimated violation.  DP-Finder (Bichsel et al., CCS 2018) maximises a smoothed estimate
   of the violation with SLSQP and correlated sampling; we keep its two ideas that matter for a
   black-box sampler: every candidate of one climb is sampled with the same seed (common random
   numbers, so candidates differ by their inputs, not by their noise), and the objective is the
   bound a fresh sample is expected to give.  Derivative-free, because program outputs are not
   differentiable in a row's values;
3. explore: the best pairs get a larger sample per side; events are proposed on one half and
   ranked on the other (events.py);
4. validate: every chosen (pair, event) is measured on FRESH samples, independent of all the
   choices above, and bounded with Clopper-Pearson at the stated confidence, Bonferroni over all
   of them (stats.py).  Only this step's numbers enter the reported bound.

Every stage draws all its inputs from one seed (common random numbers: the inputs differ by
their values, not by their noise), in one sampler call where the sampler can (`sampler.many`).
Each input's draws are still independent of each other, which is all a Clopper-Pearson interval
needs; the union bound behind Bonferroni holds whatever the dependence between intervals.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .events import Event, Scored, counts, propose, rank
from .outputs import Encoded, concat, encode
from .stats import cp_lower, cp_upper, epsilon_lower_bound, per_bound_alpha, point_estimate

# sample_fn(input, n, rng) -> n outputs (a numeric array of shape (n,) or (n, k), or a list).
# It may also have `many(inputs, n, rng)`: n outputs for each input with sample_fn's law, the
# inputs sharing each run's noise as far as it can (the program sampler, programs.py), or None
# when it cannot draw them together.
Sampler = Callable[[Any, int, np.random.Generator], Any]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class AuditConfig:
    """Sizes are samples PER SIDE of a pair."""

    samples: int = 50_000            # fresh samples for each validated pair
    confidence: float = 0.95
    seed: Optional[int] = None       # None: a random seed (reported, so a run can be repeated)
    explore: Optional[int] = None    # default: samples // 5, within [2_000, samples]
    screen: int = 400                # per pair, when there are more pairs than top_pairs
    climb: int = 12                  # hill-climb evaluations (0: no climb)
    climb_samples: int = 1_000
    top_pairs: int = 3
    events_per_pair: int = 3
    chunk: int = 10_000              # samples per sampler call

    @property
    def explore_samples(self) -> int:
        return self.explore if self.explore is not None else min(self.samples, max(2_000, self.samples // 5))

    @property
    def planned_tests(self) -> int:
        return self.top_pairs * self.events_per_pair


@dataclass
class Pair:
    """Two neighbouring inputs; `claimed` is the epsilon the checker proved for this kind of
    neighbour, at `delta` (0: a pure claim); `moves` (optional) proposes nearby pairs for the
    climb."""

    a: Any
    b: Any
    claimed: Fraction
    label: str = ""
    moves: Optional[Callable[[float], list["Pair"]]] = field(default=None, repr=False)
    show: Optional[Callable[[Any], Any]] = field(default=None, repr=False)  # input -> JSON-able
    delta: Fraction = Fraction(0)

    @property
    def delta_up(self) -> float:
        """delta as the smallest float at or above it: subtracting it never flatters the bound."""
        return float_up(self.delta)

    def shown(self, x: Any) -> Any:
        return self.show(x) if self.show is not None else repr(x)


@dataclass(frozen=True)
class Tested:
    """One (pair, event, direction) measured on fresh samples."""

    pair: Pair
    event: Event
    direction: int           # +1: P[A in E] / P[B in E]; -1: the reverse
    k1: int
    k2: int
    n: int
    alpha: float             # each one-sided interval's level
    lower_bound: float
    estimate: float

    @property
    def excess(self) -> float:
        return self.lower_bound - float(self.pair.claimed)

    @property
    def delta(self) -> Fraction:
        return self.pair.delta

    def interval(self, k: int) -> tuple[float, float]:
        return float(cp_lower(k, self.n, self.alpha)), float(cp_upper(k, self.n, self.alpha))


@dataclass
class SearchStats:
    pairs: int = 0
    screened: int = 0
    climbed: int = 0
    explored: int = 0
    samples: int = 0         # outputs drawn in total, both sides, all stages
    seconds: float = 0.0
    sampling_seconds: float = 0.0

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.sampling_seconds if self.sampling_seconds > 0 else math.nan


@dataclass
class SearchResult:
    tested: list[Tested]
    stats: SearchStats
    seed: int
    tests: int


class _Run:
    def __init__(self, sampler: Sampler, config: AuditConfig, progress: Optional[Progress]):
        self.sampler = sampler
        self.config = config
        self.progress = progress or (lambda message: None)
        self.seed = config.seed if config.seed is not None else random_seed()
        self.seeds = np.random.SeedSequence(self.seed)
        self.stats = SearchStats()
        self.alpha_plan = per_bound_alpha(config.confidence, config.planned_tests)

    # -- sampling -----------------------------------------------------------------------------------

    def draw(self, x: Any, n: int, seed: np.random.SeedSequence, *, raw: bool = False,
             what: str = "") -> Encoded:
        """n outputs for input x, in chunks (progress after each)."""
        rng = np.random.default_rng(seed)
        parts, done, t0 = [], 0, time.perf_counter()
        while done < n:
            k = min(self.config.chunk, n - done)
            out = self.sampler(x, k, rng)
            enc = encode(out, keep_raw=raw)
            if enc.n != k:
                raise ValueError(f"the sampler returned {enc.n} outputs where {k} were asked for")
            parts.append(enc)
            done += k
            if what and n > self.config.chunk:
                self.progress(f"{what}: {done}/{n} samples")
        self.stats.samples += n
        self.stats.sampling_seconds += time.perf_counter() - t0
        return concat(parts) if len(parts) > 1 else parts[0]

    def draw_inputs(self, xs: list, n: int, seed: np.random.SeedSequence, *, raw: bool = False,
                    what: str = "") -> list[Encoded]:
        """n outputs for each input of xs, every input from the same seed: common random numbers,
        as in DP-Finder (the inputs differ by their values, not by their noise; each input's
        draws are still independent of each other).  Drawn together when the sampler can
        (`sampler.many`, one call for all inputs), else input by input."""
        many = getattr(self.sampler, "many", None)
        if many is not None and len(xs) > 1:
            got = self._draw_many(many, xs, n, seed, raw, what)
            if got is not None:
                return got
        out = []
        for i, x in enumerate(xs):
            label = what and f"{what}, input {i + 1}/{len(xs)}"
            if label:
                self.progress(label)
            out.append(self.draw(x, n, seed, raw=raw, what=label))
        return out

    def _draw_many(self, many: Callable, xs: list, n: int, seed: np.random.SeedSequence, raw: bool,
                   what: str) -> Optional[list[Encoded]]:
        """draw_inputs with `many`, in chunks of config.chunk runs per input; None when the
        sampler cannot (what was drawn is dropped: the caller draws input by input)."""
        rng = np.random.default_rng(seed)
        parts: list[list[Encoded]] = [[] for _ in xs]
        done, t0 = 0, time.perf_counter()
        try:
            while done < n:
                k = min(self.config.chunk, n - done)
                got = many(xs, k, rng)
                if got is None:
                    return None
                for part, out in zip(parts, got):
                    enc = encode(out, keep_raw=raw)
                    if enc.n != k:
                        raise ValueError(f"the sampler returned {enc.n} outputs where {k} were asked for")
                    part.append(enc)
                done += k
                if what:
                    self.progress(f"{what}: {done}/{n} samples for each of {len(xs)} inputs")
        finally:
            self.stats.sampling_seconds += time.perf_counter() - t0
        self.stats.samples += n * len(xs)
        return [concat(p) if len(p) > 1 else p[0] for p in parts]

    def explore(self, pair: Pair, a: Encoded, b: Encoded, top: int) -> list[Scored]:
        """Propose events on the first half of each side's draws, rank them on the second half."""
        half = a.n // 2
        pa, sa = _split(a, half)
        pb, sb = _split(b, half)
        events = propose(pa, pb)
        return rank(events, sa, sb, self.config.samples, self.alpha_plan, top, pair.delta_up)

    def explore_pairs(self, pairs: Sequence[Pair], n: int, seed: np.random.SeedSequence, top: int,
                      what: str = "") -> list[list[Scored]]:
        """explore() for each pair on n draws per side, every side from the same seed: correlated
        sampling, as in DP-Finder (the pairs differ by their inputs, not by their noise)."""
        outs = self.draw_inputs([x for p in pairs for x in (p.a, p.b)], n, seed, raw=True, what=what)
        return [self.explore(p, outs[2 * i], outs[2 * i + 1], top) for i, p in enumerate(pairs)]

    def scores(self, pairs: Sequence[Pair], n: int, seed: np.random.SeedSequence, what: str = "") -> list[float]:
        """Each pair's best predicted bound over its claim, from n draws per side (one seed)."""
        found = self.explore_pairs(pairs, n, seed, 1, what)
        return [best[0].predicted - float(p.claimed) if best else -math.inf for p, best in zip(pairs, found)]

    # -- the stages -------------------------------------------------------------------------------------

    def screen(self, pairs: Sequence[Pair]) -> list[Pair]:
        cfg = self.config
        if len(pairs) <= cfg.top_pairs:
            return list(pairs)
        seed = self.seeds.spawn(1)[0]
        self.progress(f"screening {len(pairs)} pairs")
        scores = self.scores(pairs, cfg.screen, seed, what=f"screening {len(pairs)} pairs")
        self.stats.screened = len(pairs)
        order = sorted(range(len(pairs)), key=lambda i: scores[i], reverse=True)
        return [pairs[i] for i in order[:cfg.top_pairs]]

    def climb(self, pair: Pair) -> Pair:
        """Coordinate search on `pair.moves`, step halving when no move improves."""
        cfg = self.config
        if pair.moves is None or cfg.climb <= 0:
            return pair
        seed = self.seeds.spawn(1)[0]  # one seed for every candidate: common random numbers
        best, step, used = pair, 0.5, 1
        best_score = None
        while used < cfg.climb and step > 1 / 64:
            # a round's candidates all move from the round's start, so they are scored together
            # (the first round with the start itself)
            cands = pair_moves(best, step)[:cfg.climb - used]
            used += len(cands)
            self.progress(f"climbing: {used}/{cfg.climb}")
            scored = self.scores(([best] if best_score is None else []) + cands, cfg.climb_samples, seed)
            if best_score is None:
                best_score, scored = scored[0], scored[1:]
            improved = False
            for cand, s in zip(cands, scored):
                if s > best_score:
                    best, best_score, improved = cand, s, True
            if not improved:
                step /= 2
        self.stats.climbed = used
        return best

    def validate(self, chosen: list[tuple[Pair, list[Scored]]]) -> list[Tested]:
        cfg = self.config
        tests = sum(len(c) for _, c in chosen)
        alpha = per_bound_alpha(cfg.confidence, tests)
        out: list[Tested] = []
        # a fresh seed, independent of every earlier draw; every side of every pair from it
        # (common random numbers: each side's draws are independent of each other, which is all a
        # Clopper-Pearson interval needs, and Bonferroni's union bound holds whatever the
        # dependence between the intervals)
        seed = self.seeds.spawn(1)[0]
        self.progress(f"validating {len(chosen)} pairs")
        drawn = self.draw_inputs([x for pair, _ in chosen for x in (pair.a, pair.b)], cfg.samples, seed,
                                 what="validating")
        for i, (pair, cands) in enumerate(chosen):
            a, b = drawn[2 * i], drawn[2 * i + 1]
            events = [c.event for c in cands]
            ka, kb = counts(events, a), counts(events, b)
            for c, x, y in zip(cands, ka, kb):
                k1, k2 = (int(x), int(y)) if c.direction == 1 else (int(y), int(x))
                n, delta = cfg.samples, pair.delta_up
                lb = float(epsilon_lower_bound(k1, n, k2, n, alpha, delta))
                out.append(Tested(pair, c.event, c.direction, k1, k2, n, alpha, lb,
                                  float(point_estimate(k1, n, k2, n, delta))))
        return out


def run_search(sampler: Sampler, pairs: Sequence[Pair], config: AuditConfig,
               progress: Optional[Progress] = None) -> SearchResult:
    if not pairs:
        raise ValueError("no pairs to audit")
    if config.samples < 1:
        raise ValueError("samples must be positive")
    t0 = time.perf_counter()
    run = _Run(sampler, config, progress)
    run.stats.pairs = len(pairs)
    best = run.screen(pairs)
    if best and best[0].moves is not None:
        climbed = run.climb(best[0])
        if climbed is not best[0]:
            best = [climbed] + best[:-1] if len(best) >= config.top_pairs else [climbed] + best
    explore_seed = run.seeds.spawn(1)[0]
    run.progress(f"exploring {len(best)} pairs")
    found = run.explore_pairs(best, config.explore_samples, explore_seed, config.events_per_pair, "exploring")
    chosen = [(pair, cands) for pair, cands in zip(best, found) if cands]
    run.stats.explored = len(best)
    tested = run.validate(chosen)
    run.stats.seconds = time.perf_counter() - t0
    return SearchResult(tested, run.stats, run.seed, len(tested))


def pair_moves(pair: Pair, step: float) -> list[Pair]:
    """The climb's candidates; they keep the pair's delta (a claim's delta is the audit's, not a
    property of the inputs)."""
    moved = pair.moves(step) if pair.moves is not None else []
    return [m if m.delta == pair.delta else replace(m, delta=pair.delta) for m in moved]


def _split(enc: Encoded, half: int) -> tuple[Encoded, Encoded]:
    def part(sl: slice) -> Encoded:
        raw = enc.raw[sl] if enc.raw is not None else None
        return Encoded(len(enc.keys[sl]), enc.keys[sl], {k: v[sl] for k, v in enc.numeric.items()}, raw)

    return part(slice(0, half)), part(slice(half, None))


def float_up(x: Fraction) -> float:
    """The smallest float >= x."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def random_seed() -> int:
    """A fresh seed when none is given (reported, so the audit can be repeated)."""
    import secrets

    return secrets.randbits(63)
