"""The walk-forward's progress bar: folds done, time elapsed and an estimate of the time left
that knows folds differ in cost.

A fold's fit costs about its training days times its epochs: an expanding window makes each
fold longer than the last, and a warm-started fold (``WalkForwardConfig.warm_start``) trains a
fraction of a full fit's epochs. Counting folds alone (tqdm's own estimate) therefore overstates
the time left after the first wave of full fits and understates it late in an expanding run.
:class:`FoldClock` weighs each fold by its training days and kind, learns the seconds per
weighted day of each kind from the folds that finished (a warm fold's from the full folds' times
the epoch ratio until one has finished), and scales by the wall time elapsed, so that parallel
workers are accounted for.
"""

from __future__ import annotations

import math

# A warm-started fold's cost against a full fit's before one has finished: the panel
# Transformer's default warm_epochs / max_epochs (3 / 12).
WARM_COST_RATIO = 0.25


class FoldClock:
    """Expected cost of the folds left.

    Args:
        days: ``{fold: training days}`` of every fold still to run or already run.
        warm: the folds that start from an earlier fold's state.
        warm_ratio: a warm fold's cost per training day against a full fold's, until measured.
    """

    def __init__(self, days: dict[int, int], warm: set[int] | frozenset = frozenset(),
                 warm_ratio: float = WARM_COST_RATIO):
        self.days = {int(k): max(int(v), 1) for k, v in days.items()}
        self.warm = set(warm)
        self.warm_ratio = warm_ratio
        self.finished: dict[int, float] = {}  # fold -> seconds its models took

    def kind(self, fold: int) -> str:
        return "warm" if fold in self.warm else "full"

    def finish(self, fold: int, seconds: float) -> None:
        """Fold ``fold`` is done; its models took ``seconds`` (0 when unknown, e.g. resumed)."""
        self.finished[int(fold)] = float(seconds)

    def _rates(self) -> dict[str, float]:
        """Seconds per training day of each kind, from the finished folds that were timed."""
        rates = {}
        for kind in ("full", "warm"):
            timed = [(f, s) for f, s in self.finished.items() if s > 0 and self.kind(f) == kind]
            if timed:
                rates[kind] = sum(s for _, s in timed) / sum(self.days[f] for f, _ in timed)
        if "full" in rates and "warm" not in rates:
            rates["warm"] = rates["full"] * self.warm_ratio
        if "warm" in rates and "full" not in rates:
            rates["full"] = rates["warm"] / self.warm_ratio
        return rates

    def seconds_left(self, elapsed: float) -> float | None:
        """Wall seconds left, or None before a timed fold has finished this run."""
        rates = self._rates()
        ran = [f for f, s in self.finished.items() if s > 0]
        if not rates or elapsed <= 0 or not ran:
            return None
        cost = {f: self.days[f] * rates[self.kind(f)] for f in self.days}
        done = sum(cost[f] for f in ran)
        left = sum(c for f, c in cost.items() if f not in self.finished)
        return elapsed * left / done if done > 0 else None

    def describe(self, elapsed: float) -> str:
        """``"~12 min left (2 full fits, 9 warm)"`` or, before a fold is timed, the folds left."""
        todo = [f for f in self.days if f not in self.finished]
        full = sum(self.kind(f) == "full" for f in todo)
        parts = (f"{full} full fit{'s' if full != 1 else ''}, {len(todo) - full} warm" if self.warm
                 else f"{len(todo)} fold{'s' if len(todo) != 1 else ''}")
        left = self.seconds_left(elapsed)
        if left is None or not todo:
            return f"{parts} to go" if todo else "done"
        return f"~{_duration(left)} left ({parts})"


def _duration(seconds: float) -> str:
    """``"45 s"``, ``"12 min"``, ``"2 h 05 min"``."""
    if seconds < 90:
        return f"{max(math.ceil(seconds), 1)} s"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60:02d} min"
