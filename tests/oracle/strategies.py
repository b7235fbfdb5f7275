"""The oracle's generator as hypothesis strategies: hypothesis makes every choice, so it
shrinks a failing program and its tables together."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from .choices import HypothesisChooser
from .generator import Program, generate
from .runtime_diff import draw_paths
from .support import DEPTH_LIMIT, Case, draw_case


@st.composite
def programs(draw: st.DrawFn) -> Program:
    """Generated fuzzpy programs (text, and the entry point's private inputs)."""
    return generate(HypothesisChooser(draw))


@st.composite
def cases(draw: st.DrawFn, depth_limit: int = DEPTH_LIMIT, n_pairs: int = 3) -> Case:
    """A program with `n_pairs` pairs of neighbouring tables around the call-depth limit."""
    return draw_case(HypothesisChooser(draw), depth_limit, n_pairs)


@st.composite
def diff_cases(draw: st.DrawFn, depth_limit: int = DEPTH_LIMIT, n_pairs: int = 2) -> tuple[Case, dict[str, bool]]:
    """A case as `cases` draws it, then the combination of fast paths its runs are compared with
    (runtime_diff.py): hypothesis shrinks the program, its tables and the combination together."""
    ch = HypothesisChooser(draw)
    case = draw_case(ch, depth_limit, n_pairs)
    return case, draw_paths(ch)


def oracle_settings(max_examples: int) -> settings:
    """A fixed, derandomized number of generated cases, with no deadline (a loaded machine can
    be many times slower) and no example database."""
    return settings(max_examples=max_examples, derandomize=True, deadline=None, database=None, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
