"""Privacy accounting: certified conversions between pure epsilon, (epsilon, delta), zCDP,
Renyi DP and Gaussian DP for what the checker proves. Pure mathematics: imports nothing from the
rest of fuzzpy, so the checker, the report and the ledger can all use it.
See docs/privacy-notions.md."""

from .convert import Conversion, EpsilonCap, RhoCap, compose, epsilon_at_delta, fits, rho_of, spent
from .gaussian import MIN_GRID_SIGMA, discrete_gaussian_slack, gdp_delta_float, gdp_delta_upper
from .loss import ProvenLoss
from .pld import LatticePld, laplace_grid, laplace_pld, rr_pld
from .rdp import laplace_rdp, rdp_epsilon, zcdp_epsilon

__all__ = ["Conversion", "EpsilonCap", "LatticePld", "MIN_GRID_SIGMA", "ProvenLoss", "RhoCap",
           "compose", "discrete_gaussian_slack", "epsilon_at_delta", "fits", "gdp_delta_float",
           "gdp_delta_upper", "laplace_grid", "laplace_pld", "laplace_rdp", "rdp_epsilon",
           "rho_of", "rr_pld", "spent", "zcdp_epsilon"]
