"""Write adult_sample.csv: a fixed 2,000-row sample of the UCI Adult training file, with a header.

Run once from the repository root:
    python examples/data/make_sample.py [path/to/adult.data]
Values are stripped of the leading space the original file has; "?" (missing) is kept as-is so
that the loader's missing-value handling is exercised.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

SOURCE = Path("/work/shared/data/adult/adult.data")
OUT = Path(__file__).with_name("adult_sample.csv")
SEED = 20101  # fixed, so the sample is reproducible
ROWS = 2000
COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
           "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
           "hours_per_week", "native_country", "income"]


def main(source: Path) -> None:
    data = pd.read_csv(source, header=None, names=COLUMNS, dtype=str, keep_default_na=False,
                       skipinitialspace=True, skip_blank_lines=True)
    data = data.apply(lambda col: col.str.strip())
    sample = data.sample(n=ROWS, random_state=SEED).sort_index()  # keep the file's order
    sample.to_csv(OUT, index=False, lineterminator="\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCE)
