"""What a check produces: `CheckReport`, with its functions and private inputs.

Kept apart from the checker (fuzzpy/checking/program.py re-exports them) so that `fuzzpy check`
reading a report back from its cache (fuzzpy/checking/cache.py) imports neither the checker nor
the parser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Optional

from ..diagnostics import Diagnostic, Span
from ..typesystem.sens import INF
from .records import MechanismRecord

if TYPE_CHECKING:  # annotations only: importing them would import the checker's types
    from ..typesystem import ir as I
    from ..typesystem.types import Schema, Type


@dataclass
class FunctionReport:
    name: str
    span: Span
    type: str
    generic: bool = False
    coefs: Any = None  # its parameters' sensitivities (Fraction, INF or Lin), when checked once for all
    rhos: Any = None   # their Gaussian rho per unit of distance squared (rule Rho), likewise
    param_names: Any = None


@dataclass
class InputReport:
    name: str
    type: str
    epsilon: Any  # Fraction or INF: the pure-epsilon releases together
    semantic: Optional[Type] = None  # the declared type (e.g. Bag(schema row record))
    # Rule Rho: zCDP of the Gaussian releases (sum of mu^2/2) and of the pure ones (sum of eps^2/2).
    rho_gauss: Any = Fraction(0)
    rho_pure: Any = Fraction(0)
    # Rule Inventory: its pure releases as ((epsilon, most releases), ...), every one a scalar
    # Laplace release whose input moves by at most its sensitivity; None when not known.
    laplace: Any = None
    # Rule Inventory: every pure release, whatever its mechanism, as ((epsilon, most releases), ...),
    # each eps-DP when the input moves by 1; None when not known.
    pure: Any = None
    # Rule Partition selection: the total probability of the bad events of its partition
    # selections (their delta) when it moves by one unit; their epsilon is among the pure releases.
    delta: Any = Fraction(0)
    # Rule Poisson subsampling: its releases on Poisson samples as ((kind, rate, epsilon, most
    # releases), ...), counted apart from `laplace` and `pure`; None when not known.
    subsampled: Any = ()
    # Rule Poisson subsampling: the part of rho_gauss made on Poisson samples (channel gs).
    rho_sampled: Any = Fraction(0)

    @property
    def is_pure(self) -> bool:
        return self.rho_gauss == 0 and self.delta == 0

    @property
    def rho_releases(self) -> Any:
        """The zCDP rho of all releases, partition selections counted by their epsilon (Fraction
        or INF).  The pure releases are epsilon-DP together, hence epsilon^2/2-zCDP, when that is
        below their channel-z bound."""
        if INF in (self.rho_gauss, self.rho_pure):
            return INF
        pure = self.rho_pure if self.epsilon == INF else min(self.rho_pure, self.epsilon ** 2 / 2)
        return self.rho_gauss + pure

    @property
    def rho(self) -> Any:
        """The zCDP rho of the input: that of its releases, or INF when it has a partition
        selection (whose delta no zCDP bound covers)."""
        return INF if self.delta != 0 else self.rho_releases


@dataclass
class CheckReport:
    file: str
    sources: dict[str, str]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    functions: list[FunctionReport] = field(default_factory=list)
    entry: Optional[str] = None
    inputs: list[InputReport] = field(default_factory=list)
    mechanisms: list[MechanismRecord] = field(default_factory=list)
    schemas: dict[str, Schema] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    param_types: dict[str, Type] = field(default_factory=dict)  # as declared (their ranges)
    entry_instance: Optional[I.Instance] = None
    entry_type: Optional[Type] = None
    timings: dict[str, float] = field(default_factory=dict)
    lp_solves: int = 0
    instances: int = 0  # function instances checked (each a check of a body): the checker's work
    growth: Any = Fraction(1)  # the largest table the program builds, in multiples of its inputs' rows
    public_tables: dict[str, Schema] = field(default_factory=dict)  # entry parameter -> its public schema
    pragma_budget: Optional[Fraction] = None
    budget: Optional[Fraction] = None  # the effective budget, set by the interface
    pragma_delta: Optional[Fraction] = None
    delta: Optional[Fraction] = None       # the effective delta (interface or pragma), if any
    rho_budget: Optional[Fraction] = None  # a budget in zCDP, set by the interface
    guarantee: Any = None                  # interfaces/guarantee.Guarantee, set with the budget
    formulas: Any = None                   # checking/formulas.FormulaReport, when asked for (--formula)
    formula_style: str = "text"            # how they are printed: text or latex

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)

    def table_schema(self, inp: "InputReport") -> Optional[Schema]:
        """The schema a private input reads (`bag Schema`), or None for another type."""
        from ..typesystem.types import Bag, Record, UnitBag

        t = inp.semantic
        name = t.elem.name if isinstance(t, (Bag, UnitBag)) and isinstance(t.elem, Record) else None
        return self.schemas.get(name) if name is not None else None

    @property
    def is_pure(self) -> bool:
        """Every release is pure epsilon-DP (no Gaussian release): `epsilon` is the guarantee."""
        return all(i.is_pure for i in self.inputs)

    @property
    def rho(self) -> Any:
        """Total zCDP rho: the sum over private inputs, like epsilon."""
        total: Any = Fraction(0)
        for inp in self.inputs:
            total = INF if inp.rho == INF or total == INF else total + inp.rho
        return total

    @property
    def approx_delta(self) -> Any:
        """The delta of the partition selections, summed over private inputs (rule Partition
        selection): 0 when there is none."""
        total: Any = Fraction(0)
        for inp in self.inputs:
            total = INF if inp.delta == INF or total == INF else total + inp.delta
        return total

    @property
    def epsilon(self) -> Any:
        """Total epsilon of the pure releases: the sum over private inputs (one person may be in
        several tables).  The program's guarantee only when `is_pure`."""
        total: Any = Fraction(0)
        for inp in self.inputs:
            total = INF if inp.epsilon == INF or total == INF else total + inp.epsilon
        return total
