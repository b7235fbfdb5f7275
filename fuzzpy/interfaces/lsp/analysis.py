"""The language server's settings, and what one analysis of a document produces: the merged
check report, the parsed modules, and the local bindings the checker saw (recorded through
`Checker.on_bind` while an analysis runs, for hover)."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Optional

from ...checking.checker import Checker, MechanismRecord
from ...checking.program import CheckReport, FunctionReport
from ...diagnostics import Diagnostic, Span
from ...limits import RECURSION_LIMIT, in_large_stack_thread
from ...render.numbers import show as fmt_coef
from ...syntax import ast as A
from ...typesystem.sens import INF, is_const

log = logging.getLogger("fuzzpy.lsp")


# ---- settings ---------------------------------------------------------------------------------


@dataclass
class Settings:
    """Server options, from the client's `initializationOptions` (all optional)."""

    entry: str = "main"
    params: dict[str, str] = field(default_factory=dict)
    budget: Optional[Fraction] = None
    delta: Optional[Fraction] = None  # the delta of (epsilon, delta) statements
    debounce: float = 0.015
    incremental: bool = True
    server: Optional[str] = None       # a curator service's URL (`fuzzpy serve`)
    datasets: tuple[str, ...] = ()     # whose published schemas to fetch from it
    published: tuple = ()              # remote.Published, once fetched (not an option)
    formulas: bool = True              # derive costs as formulas after a check (docs/formulas.md)
    formula_timeout: float = 3.0       # seconds (option formulaTimeoutMs)
    formula_delay: float = 1.0         # seconds the document must stay unchanged first (formulaDelayMs)
    peer: bool = True                  # check half of a full check in a second process (peer.py)

    @staticmethod
    def from_options(options: Any) -> "Settings":
        s = Settings()
        if not isinstance(options, dict):
            return s
        s.entry = str(options.get("entry") or s.entry)
        params = options.get("params") or {}
        if isinstance(params, dict):
            s.params = {str(k): str(v) for k, v in params.items()}
        if options.get("budget") is not None:
            from ...exact import parse_exact

            try:  # bounded reading: a hostile "1e99999999" must not block initialize
                budget = parse_exact(str(options["budget"]))
                if budget < 0:
                    raise ValueError("negative")
                s.budget = budget
            except ValueError:
                log.warning("ignoring invalid budget option %r", str(options["budget"])[:60])
        if options.get("delta") is not None:
            from ...exact import parse_delta

            try:
                s.delta = parse_delta(str(options["delta"]))
            except ValueError:
                log.warning("ignoring invalid delta option %r", str(options["delta"])[:60])
        if options.get("debounceMs") is not None:
            try:  # each option on its own: one bad value does not drop the others
                s.debounce = max(0.0, float(options["debounceMs"]) / 1000)
            except (TypeError, ValueError):
                log.warning("ignoring invalid debounceMs option %r", str(options["debounceMs"])[:60])
        s.incremental = bool(options.get("incremental", True))
        s.formulas = bool(options.get("formulas", True))
        s.peer = bool(options.get("peer", True))
        for key, attr in (("formulaTimeoutMs", "formula_timeout"), ("formulaDelayMs", "formula_delay")):
            if options.get(key) is not None:
                try:
                    setattr(s, attr, max(0.0, float(options[key]) / 1000))
                except (TypeError, ValueError):
                    log.warning("ignoring invalid %s option %r", key, str(options[key])[:60])
        s.server, s.datasets = _remote_options(options)
        return s

    def key(self) -> tuple:
        return (self.entry, tuple(sorted(self.params.items())))

    def virtual(self, declared: set[str]) -> dict[str, str]:
        """The published schemas to check with a program that declares the schemas `declared`."""
        return {p.file: p.source for p in self.published if p.schema not in declared}


def _remote_options(options: dict) -> tuple[Optional[str], tuple[str, ...]]:
    """`server` (URL) and `dataset` (a name or a list of names); both or neither."""
    server, dataset = options.get("server"), options.get("dataset")
    if server is None and dataset is None:
        return None, ()
    names = [dataset] if isinstance(dataset, str) else dataset if isinstance(dataset, list) else []
    names = [n.strip() for n in names if isinstance(n, str) and n.strip()]
    if not isinstance(server, str) or not server.startswith(("http://", "https://")) or not names:
        log.warning("ignoring the server options: 'server' must be an http(s) URL and 'dataset' a name "
                    "or a list of names")
        return None, ()
    return server, tuple(dict.fromkeys(names))


# ---- what one analysis produces -------------------------------------------------------------


class Binding:
    """A local variable or parameter as the checker saw it (recorded through `Checker.on_bind`):
    its span, name, type and sensitivity (texts), and the checker's Type, for `r.` completion.

    The two texts are written when first read (hover, or the background's test of whether a
    result can move), not while the check runs: writing them for the thousand bindings of a
    1,000-line file was a sixth of a full check.  What they say is fixed at the binding: its
    type, its distance and the names of that distance's inputs, copied then."""

    def __init__(self, span: Span, name: str, value_type: Any, function: bool, dist: dict,
                 input_names: dict) -> None:
        self.span, self.name, self.value_type = span, name, value_type
        self._function, self._dist, self._input_names = function, dist, input_names

    @property
    def type(self) -> str:
        text = self.__dict__.get("_type")
        if text is None:
            text = self.__dict__["_type"] = deep(lambda: str(self.value_type))
        return text

    @property
    def sensitivity(self) -> str:
        text = self.__dict__.get("_sensitivity")
        if text is None:
            text = self.__dict__["_sensitivity"] = deep(
                lambda: _render_distance(self._function, self._dist, self._input_names))
        return text

    def _shown(self) -> tuple:
        return (self.span, self.name, self.type, self.sensitivity)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Binding) and self._shown() == other._shown()

    def __hash__(self) -> int:
        return hash(self._shown())

    def __repr__(self) -> str:  # every text it can show (incremental._movable reads them)
        return (f"Binding(span={self.span!r}, name={self.name!r}, type={self.type!r}, "
                f"sensitivity={self.sensitivity!r}, value_type={self.value_type!r})")


def deep(render: Callable[[], str]) -> str:
    """`render()`; for a value nested too deeply for this thread (a type of a tuple nested 400
    deep), `render()` in a thread with the stack and recursion limit the check it comes from had."""
    try:
        return render()
    except RecursionError:
        pass
    box: dict[str, str] = {}

    def work() -> None:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, RECURSION_LIMIT))  # safe: this thread has a large stack
        try:
            box["text"] = render()
        finally:
            sys.setrecursionlimit(old)

    in_large_stack_thread(work, "fuzzpy-lsp-render")
    return box["text"]


@dataclass(frozen=True)
class CallRecord:
    """A call of a top-level function as the checker saw it (recorded through `Checker.on_call`):
    the instance's type and what the call costs in the caller's inputs."""

    span: Span
    name: str
    type: str
    cost: str


@dataclass
class UnitResult:
    """The result of one check run (a unit's, the prelude's, or a full check)."""

    diagnostics: list[Diagnostic]
    functions: list[FunctionReport]
    mechanisms: list[MechanismRecord]
    bindings: list[Binding]
    params: dict[str, Any] = field(default_factory=dict)
    schemas: dict[str, Any] = field(default_factory=dict)
    entry: Optional[CheckReport] = None  # the entry unit's: entry name, inputs, entry type only
    uses_names: bool = False
    names: tuple = ()
    calls: list[CallRecord] = field(default_factory=list)
    # Where the unit's functions were when it ran: ((first line, last line), ...) in file order,
    # and the line ranges of their code (trailing blank lines left out); see incremental.moved.
    layout: tuple = ()
    extents: tuple = ()
    movable: Optional[bool] = None  # whether shifting its spans gives the result at another layout
    # Its records' identities for merging, made once (incremental.merge_keys); not part of what
    # it says (left out of repr, which decides whether it can move, and of equality).
    merge_keys: Any = field(default=None, repr=False, compare=False)


@dataclass
class Analysis:
    """Everything the server knows about one version of a document."""

    file: str
    text: str
    report: CheckReport
    modules: list[A.Module]
    bindings: list[Binding]
    runs: int = 0          # check runs this analysis needed (0: everything from the cache)
    full: bool = False     # whether a plain full check ran (maybe in two halves, see peer)
    peer: bool = False     # whether half of that full check ran in the peer process (peer.py)
    stale_units: int = 0   # units left for background warming
    calls: list[CallRecord] = field(default_factory=list)
    # function -> variable -> types, kept from earlier versions for functions that no longer
    # parse (the server fills it: members.known_types)
    known: dict = field(default_factory=dict)
    # Seconds spent in each stage of making it ("load", "plan", "check", "merge"), for the log.
    stages: dict = field(default_factory=dict)

    @property
    def decls(self) -> list[A.Decl]:
        return [d for m in self.modules for d in m.decls]

    @property
    def own_decls(self) -> list[A.Decl]:
        return self.modules[-1].decls if self.modules else []


# ---- recording bindings from the checker --------------------------------------------------------


class _BindingRecorder:
    """Receives `Checker.on_bind` and `Checker.on_call` calls; records only while an analysis is
    running."""

    def __init__(self) -> None:
        self.items: Optional[list[Binding]] = None
        self.calls: list[CallRecord] = []

    def __call__(self, checker: Checker, span: Span, name: str, value: Any) -> None:
        if self.items is None:
            return
        try:
            dist = dict(value.dist)
            self.items.append(Binding(span, name, value.type, value.fn is not None, dist,
                                      {s: checker.describe(s) for s in dist}))
        except Exception:  # noqa: BLE001 - hover data is best effort, never breaks a check
            pass

    def call(self, checker: Checker, span: Span, name: str, summary: Any, dist: Any) -> None:
        if self.items is None or span is None:
            return
        if not all(is_const(c) for c in [*summary.coefs, *dist.values()]):
            return  # a recursive call's assumed summary: its cost is part of the recursion's bound
        try:
            from ...checking.program import _fun_type

            shown = _fun_type(summary.param_types, summary.coefs, summary.cod, summary.quad)
            self.calls.append(CallRecord(span, name, shown, render_call_cost(checker, summary.cod, dist)))
        except Exception:  # noqa: BLE001 - hover data is best effort, never breaks a check
            pass


    def primitive(self, checker: Checker, span: Span, name: str, result: Any) -> None:
        """A join or truncation: its stability, where its factors come from, and its result's
        distance in the caller's inputs (shown as a call)."""
        if self.items is None or span is None or not all(is_const(c) for c in result.dist.values()):
            return
        try:
            cost = f"{result.info['explained']}; {render_call_cost(checker, result.type, result.dist)}"
            self.calls.append(CallRecord(span, name, str(result.type), cost))
        except Exception:  # noqa: BLE001 - hover data is best effort, never breaks a check
            pass


def _render_distance(function: bool, dist: dict, input_names: dict) -> str:
    if function:
        return "a function: its sensitivity is in its type, or checked at each use"
    if not dist:
        return "public: does not depend on private inputs"
    parts = [f"{fmt_coef(c)} in {input_names[s]}" for s, c in dist.items()]
    return "sensitivity " + ", ".join(parts)


def render_call_cost(checker: Checker, cod: Any, dist: Any) -> str:
    """What one call costs, in the caller's inputs: a release's epsilon (the distance of a fuzzy
    value is its privacy loss) and rho (zCDP, Gaussian releases), else how far its result moves."""
    from ...typesystem.quadratic import SAMPLED_GAUSS, base_of, channel_of, is_shadow
    from ...typesystem.types import holds_fuzzy

    linear = [(s, c) for s, c in dist.items() if not is_shadow(s) and c != 0]
    rho = _gauss_rho(dist)
    sampled_rho = [(base_of(k), c) for k, c in dist.items()
                   if is_shadow(k) and channel_of(k) == SAMPLED_GAUSS and c != 0]

    def listed(entries: list, word: str) -> str:
        return ", ".join(f"{fmt_coef(c)} {word} {checker.describe(s)}" for s, c in entries)

    if not holds_fuzzy(cod):
        return f"its result has sensitivity {listed(linear, 'in')}" if linear else \
            "its result does not depend on private inputs"
    parts = []
    if linear and not (rho and all(c == INF for _, c in linear)):
        parts.append(f"epsilon {listed(linear, 'on')}")
    if rho:
        parts.append(f"rho (zCDP) {listed(rho, 'on')}")
    if sampled_rho:  # rule Poisson subsampling: part of that rho is on samples, amplified
        parts[-1] += f" (of which {listed(sampled_rho, 'on')} on Poisson samples, amplified)"
    parts += _sampled_releases(checker, dist)
    return f"it charges {' and '.join(parts)}" if parts else "it releases nothing that depends on private inputs"


def _gauss_rho(dist: Any) -> list:
    """rho of the Gaussian releases per input, on samples (channel gs) or not (g), as `fuzzpy
    check` states it in the type."""
    from ...typesystem.quadratic import SAMPLED_GAUSS, base_of, channel_of, is_shadow
    from ...typesystem.sens import c_add

    total: dict[str, Any] = {}
    for k, c in dist.items():
        if is_shadow(k) and channel_of(k) in ("g", SAMPLED_GAUSS) and c != 0:
            total[base_of(k)] = c_add(total.get(base_of(k), Fraction(0)), c)
    return list(total.items())


def _sampled_releases(checker: Checker, dist: Any) -> list[str]:
    """The pure releases on Poisson samples (channels LS:kind:rate:epsilon), each with its count."""
    from ...typesystem.quadratic import SUBSAMPLED_PREFIX, base_of, channel_of, is_shadow, parse_subsampled

    out = []
    for k, c in dist.items():
        if is_shadow(k) and channel_of(k).startswith(SUBSAMPLED_PREFIX) and c != 0:
            kind, q, eps = parse_subsampled(channel_of(k))
            what = "Laplace" if kind == "laplace" else "pure"
            count = "an unknown number of" if c == INF else fmt_coef(c)
            out.append(f"{count} {what} releases of epsilon {fmt_coef(eps)} on Poisson samples of rate "
                       f"{fmt_coef(q)} of {checker.describe(base_of(k))} (amplified)")
    return out


_RECORDER = _BindingRecorder()
Checker.on_bind = _RECORDER  # type: ignore[attr-defined]
Checker.on_call = _RECORDER.call  # type: ignore[attr-defined]
Checker.on_primitive = _RECORDER.primitive  # type: ignore[attr-defined]
