"""The text report's noise scales as a reader reads them: short exact values as they are, long
exact fractions (a Gaussian's grid sigma) to six significant digits, any size without failing."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction as F
from pathlib import Path

from fuzzpy.render.numbers import show_measured

ROOT = Path(__file__).resolve().parents[2]


def test_short_exact_values_are_shown_exactly():
    assert show_measured(F(2)) == "2"
    assert show_measured(F(1, 3)) == "1/3"
    assert show_measured(F(5, 2)) == "2.5"


def test_a_long_fraction_is_shown_to_six_digits():
    assert show_measured(F(629397181890197, 281474976710656)) == "2.23607"


def test_values_beyond_the_float_range_are_shown_in_scientific_notation():
    assert show_measured(F(10**600 + 1, 3)) == "3.333e+599"
    assert show_measured(F(1, 3 * 10**600)) == "3.33333e-601"


def test_the_gaussian_noise_sd_line_of_a_check_is_readable():
    out = subprocess.run([sys.executable, "-m", "fuzzpy", "check", "--delta", "1e-6",
                          str(ROOT / "examples" / "linear_regression_adassp.fz")],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    sds = [line.split("noise sd ")[1].split()[0] for line in out.splitlines() if "noise sd" in line]
    assert len(sds) == 2 and all("/" not in sd and len(sd) <= 8 for sd in sds), out
