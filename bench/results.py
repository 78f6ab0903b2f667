"""One row of the benchmark table, and how `bench/run.py` prints and records rows."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    """A measured figure, the baseline it is compared with, and the goal for the ratio."""

    name: str
    value: float
    unit: str
    baseline: float | None = None  # measured in the same run
    goal: str = ""  # e.g. "<= 1.2x", ">= 0.8"
    met: bool | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        assert self.baseline is not None
        return self.value / self.baseline

    def cells(self) -> list[str]:
        ratio = f"{self.ratio:.2f}x" if self.ratio is not None else "-"
        baseline = f"{self.baseline:.4g} {self.unit}" if self.baseline is not None else "-"
        met = {True: "yes", False: "**no**", None: "-"}[self.met]
        return [
            self.name,
            f"{self.value:.4g} {self.unit}",
            baseline,
            ratio,
            self.goal,
            met,
            self.note,
        ]


def at_most(value: float, limit: float) -> bool:
    return value <= limit


def print_rows(rows: list[Row]) -> None:
    for row in rows:
        cells = row.cells()
        name, value, baseline, ratio, goal, met = cells[:6]
        print(f"  {name:<52} {value:>14}  base {baseline:>14}  {ratio:>7}  goal {goal:<8} {met}")
