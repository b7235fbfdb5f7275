"""Utility of the DiffPID3 decision tree (examples/decision_tree.fz) on UCI Adult, against epsilon.

    pip install -e ".[bench]"
    python benchmarks/diffpid3_utility.py [--runs 10] [--eps 0.01,0.03,0.1,0.3,1,3,10] [--depth 5]
                                          [--data /work/shared/data/adult] [--out docs/img/diffpid3_utility.png]

For every total budget B (the program's `B` parameter), the program is checked (its proven
epsilon must be exactly B), then trained `--runs` times on `adult.data` with seeds 0, 1, ...
(seeded noise: reproducible, for measurement only) and each released tree is scored on
`adult.test`.  The plot shows the mean test accuracy with its min-max band, beside a
non-private scikit-learn DecisionTreeClassifier trained on the same features (the same
categories and the same equal-width bins, one-hot encoded, as PrivJail's figure 5 does) and
the majority-class baseline.  The table printed at the end is the one in docs/utility.md.

Everything runs in-process through the Python API (`check_file` + `run_program`); nothing is
timed.  The released tree is a list of rules (path, label); since every internal node has one
child per declared key, exactly one rule matches each row.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "examples" / "decision_tree.fz"
ADULT = Path("/work/shared/data/adult")
OUT = ROOT / "docs" / "img" / "diffpid3_utility.png"
EPSILONS = ("0.01", "0.03", "0.1", "0.3", "1", "3", "10")


# ---- the program's public description of its features ---------------------------------------------

@dataclass(frozen=True)
class Features:
    """The attributes of the program (its `attrs` parameter), the bins of the numeric ones (the
    schema's declared bounds, `bins` equal intervals) and the class labels."""

    attrs: tuple[str, ...]
    bins: int
    bounds: dict[str, tuple[Fraction, Fraction]]  # numeric attributes only
    schema: Any

    @classmethod
    def of(cls, report) -> "Features":
        from fuzzpy.typesystem.types import Num

        schema = report.schemas["Adult"]
        attrs = tuple(report.params["attrs"])
        bounds = {}
        for a in attrs:
            col = schema.column(a)
            if isinstance(col.type, Num):
                bounds[a] = (Fraction(col.type.lo), Fraction(col.type.hi))
        return cls(attrs, int(report.params["bins"]), bounds, schema)

    def bucket(self, values, lo: Fraction, hi: Fraction):
        """The program's `bucket`: how many inner cut points lo + i (hi - lo) / bins
        (i = 1 .. bins - 1) are at or below x, clipped to [0, bins - 1]."""
        import numpy as np

        x = np.asarray(values, dtype=np.float64)
        out = np.zeros(len(x), dtype=np.int64)
        for i in range(1, self.bins):
            out += x >= float(lo + i * (hi - lo) / self.bins)
        return np.clip(out, 0, self.bins - 1)

    def table(self, df):
        """The attributes of every row as strings: the keys the program's groupbys use."""
        import pandas as pd

        cols = {}
        for a in self.attrs:
            if a in self.bounds:
                cols[a] = pd.Series(self.bucket(df[a], *self.bounds[a])).astype(str)
            else:
                cols[a] = df[a].astype(str).reset_index(drop=True)
        return pd.DataFrame(cols)


def load(features: Features, data: Path):
    """adult.data and adult.test, conformed by fuzzpy's loader (adult.test's labels end with a
    period: they are read as declared categories and the period dropped)."""
    from fuzzpy.runtime.data import load_table
    from fuzzpy.typesystem.types import Cat

    train = load_table(data / "adult.data", features.schema, table="db")
    income = features.schema.column("income")
    labels = income.type.values
    test_schema = replace(features.schema, columns=tuple(
        replace(c, type=Cat(tuple(v + "." for v in labels))) if c.name == "income" else c
        for c in features.schema.columns))
    test = load_table(data / "adult.test", test_schema, table="db")
    test["income"] = test["income"].astype(str).str.rstrip(".")
    return train, test


# ---- the released tree ----------------------------------------------------------------------------

def tree_of(rules) -> Any:
    """Rules (path, label) -> nested nodes: a label (leaf) or (attribute, {key: node})."""
    root: dict = {}
    for path, label in rules:
        attrs = [attr for attr, _ in path]
        assert len(set(attrs)) == len(attrs), "an attribute is tested twice on one path"
        node = root
        for attr, key in path:
            node.setdefault("attr", attr)
            assert node["attr"] == attr, "the rules do not form a tree"
            node = node.setdefault("kids", {}).setdefault(key, {})
        node["label"] = label

    def build(node):
        if "label" in node:
            return node["label"]
        return (node["attr"], {k: build(v) for k, v in node["kids"].items()})

    return build(root)


def depth_of(tree) -> int:
    return 0 if isinstance(tree, str) else 1 + max(depth_of(k) for k in tree[1].values())


def leaves_of(tree) -> int:
    return 1 if isinstance(tree, str) else sum(leaves_of(k) for k in tree[1].values())


def predict(tree, table) -> list[str]:
    """The label of every row of `table` (strings, as Features.table gives)."""
    import numpy as np

    out = np.empty(len(table), dtype=object)

    def walk(node, idx):
        if isinstance(node, str):
            out[idx] = node
            return
        attr, kids = node
        col = table[attr].to_numpy()[idx]
        for key, kid in kids.items():
            sel = idx[col == key]
            if len(sel):
                walk(kid, sel)

    walk(tree, np.arange(len(table)))
    return list(out)


# ---- the experiment -----------------------------------------------------------------------------

@dataclass
class Row:
    epsilon: str
    checked: Fraction
    accuracies: list[float]
    depths: list[int]
    leaves: list[int]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.accuracies)


def train_tree(report, train, seed: int):
    from fuzzpy.runtime.interpreter import run_program
    from fuzzpy.runtime.samplers import RandomSource

    result = run_program(report.entry_instance, {"db": train}, RandomSource.seeded(seed))
    return tree_of(result.value)


def diffpid3(eps: str, runs: int, depth: int, train, test_table, test_labels, log) -> Row:
    from fuzzpy.checking.program import check_file

    report = check_file(PROGRAM, params={"B": eps, "depth": str(depth)})
    assert report.ok, [d.message for d in report.diagnostics]
    assert report.epsilon == Fraction(eps), (report.epsilon, eps)  # the tree costs exactly B
    row = Row(eps, report.epsilon, [], [], [])
    for seed in range(runs):
        t0 = time.perf_counter()
        tree = train_tree(report, train, seed)
        pred = predict(tree, test_table)
        acc = sum(p == y for p, y in zip(pred, test_labels)) / len(test_labels)
        row.accuracies.append(acc)
        row.depths.append(depth_of(tree))
        row.leaves.append(leaves_of(tree))
        log(f"  B={eps} seed={seed}: accuracy {acc:.4f}, depth {row.depths[-1]}, {row.leaves[-1]} leaves "
            f"({time.perf_counter() - t0:.1f} s)")
    return row


def sklearn_baselines(train_table, train_labels, test_table, test_labels, depth: int) -> dict[str, float]:
    from sklearn.preprocessing import OneHotEncoder
    from sklearn.tree import DecisionTreeClassifier

    enc = OneHotEncoder(handle_unknown="ignore").fit(train_table)
    xtr, xte = enc.transform(train_table), enc.transform(test_table)
    out = {}
    for name, max_depth in (("sklearn", None), (f"sklearn, max_depth={depth}", depth)):
        clf = DecisionTreeClassifier(max_depth=max_depth, random_state=0).fit(xtr, train_labels)
        out[name] = float((clf.predict(xte) == test_labels).mean())
    return out


def plot(rows: list[Row], baselines: dict[str, float], majority: float, depth: int, runs: int, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [float(r.epsilon) for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 5.0), dpi=150)
    ax.fill_between(xs, [min(r.accuracies) for r in rows], [max(r.accuracies) for r in rows],
                    color="tab:blue", alpha=0.2, label=f"fuzzpy DiffPID3, min-max of {runs} runs")
    ax.plot(xs, [r.mean for r in rows], "o-", color="tab:blue", label="fuzzpy DiffPID3, mean")
    styles = iter([("tab:green", "--"), ("tab:olive", "-.")])
    for name, acc in baselines.items():
        color, ls = next(styles)
        ax.axhline(acc, color=color, ls=ls, label=f"{name} (non-private)")
    ax.axhline(majority, color="gray", ls=":", label="majority class")
    ax.set_xscale("log")
    ax.set_xlabel("total privacy budget epsilon (B)")
    ax.set_ylabel("accuracy on adult.test")
    ax.set_title(f"DiffPID3 on UCI Adult (depth {depth}, 12 attributes)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--eps", default=",".join(EPSILONS), help="comma-separated total budgets")
    ap.add_argument("--depth", type=int, default=5)
    ap.add_argument("--data", type=Path, default=ADULT)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    import numpy as np

    from fuzzpy.checking.program import check_file

    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    features = Features.of(check_file(PROGRAM))
    train, test = load(features, args.data)
    train_table, test_table = features.table(train), features.table(test)
    train_labels = train["income"].astype(str).to_numpy()
    test_labels = test["income"].astype(str).to_numpy()
    log(f"adult.data: {len(train)} rows, adult.test: {len(test)} rows, attributes: {', '.join(features.attrs)}")

    baselines = sklearn_baselines(train_table, train_labels, test_table, test_labels, args.depth)
    counts = {lab: int((train_labels == lab).sum()) for lab in np.unique(train_labels)}
    majority_label = max(counts, key=counts.get)
    majority = float((test_labels == majority_label).mean())

    rows = [diffpid3(e.strip(), args.runs, args.depth, train, test_table, test_labels, log)
            for e in args.eps.split(",")]
    plot(rows, baselines, majority, args.depth, args.runs, args.out)

    print(f"DiffPID3 (examples/decision_tree.fz, depth {args.depth}, bins {features.bins}) on adult.data "
          f"({len(train)} rows), accuracy on adult.test ({len(test)} rows), {args.runs} seeded runs per budget")
    print()
    print("| epsilon (B) | checked epsilon | mean accuracy | std | min | max | mean depth | mean leaves |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        std = statistics.pstdev(r.accuracies)
        print(f"| {r.epsilon} | {r.checked} | {r.mean:.4f} | {std:.4f} | {min(r.accuracies):.4f} | "
              f"{max(r.accuracies):.4f} | {statistics.fmean(r.depths):.1f} | {statistics.fmean(r.leaves):.0f} |")
    print()
    for name, acc in baselines.items():
        print(f"{name} (non-private, one-hot, same features): {acc:.4f}")
    print(f"majority class ({majority_label}): {majority:.4f}")
    print(f"plot: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
