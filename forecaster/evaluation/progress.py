"""The walk-forward's progress bar: folds done, time elapsed and an estimate of the time left
that knows folds differ in cost and run side by side.

The estimate replays the rest of the run: the folds not finished are laid out on the workers in
the order they were handed out (a fold starts when a worker frees; a warm-started run's waves,
:func:`forecaster.evaluation.warm_start.in_waves`, each after the last has finished), the folds
still running credited with the time they have run, and the time left is when the last would end.
A fold's cost is its training days times the seconds per training day of its kind: an expanding
window makes each fold longer than the last, and a warm-started fold
(``WalkForwardConfig.warm_start``) trains a fraction of a full fit's epochs.

What it learns from the folds that finished, and what it leaves out as one-off:

- seconds per training day, from the models' own seconds in the workers (``FoldOutput.seconds``),
  per kind (a warm fold's from the full folds' times the epoch ratio until one has finished).
  Each worker's first fold also pays for the worker's imports and torch's first kernels: once a
  later fold has finished, the rates come from the later folds alone.
- the wall time a fold holds its worker against its models' seconds (cutting its inputs, sending
  its forecasts back), from the folds whose start is known: those handed to a worker that an
  earlier fold freed.
- the time before the first fold began (starting the worker processes) is not per-fold work: it
  is never extrapolated.
"""

from __future__ import annotations

import heapq
import math

# A warm-started fold's cost against a full fit's before one has finished: the panel
# Transformer's default warm_epochs / max_epochs (3 / 12).
WARM_COST_RATIO = 0.25

# The wall time a fold holds its worker, per second its models took: at least the models' own
# time, and bounded when the starts inferred from the arrivals are off.
_HOLD_RANGE = (1.0, 4.0)


class FoldClock:
    """Expected wall time of the folds left.

    Args:
        days: ``{fold: training days}`` of every fold still to run or already run.
        warm: the folds that start from an earlier fold's state.
        warm_ratio: a warm fold's cost per training day against a full fold's, until measured.
        workers: folds that run at once (1: one after another).
        stride: the warm start's stride (``WalkForwardConfig.warm_start``; 0: none): the folds
            then run in the waves :func:`~forecaster.evaluation.warm_start.in_waves` forms.
    """

    def __init__(self, days: dict[int, int], warm: set[int] | frozenset = frozenset(),
                 warm_ratio: float = WARM_COST_RATIO, workers: int = 1, stride: int = 0):
        self.days = {int(k): max(int(v), 1) for k, v in days.items()}
        self.warm = set(warm)
        self.warm_ratio = warm_ratio
        self.workers = max(int(workers), 1)
        self.stride = max(int(stride or 0), 0)
        self.finished: dict[int, float] = {}  # fold -> seconds its models took (0: unknown)
        self.arrived: dict[int, float] = {}  # fold run now -> wall seconds into the run it came back

    def kind(self, fold: int) -> str:
        return "warm" if fold in self.warm else "full"

    def finish(self, fold: int, seconds: float, at: float = 0.0) -> None:
        """Fold ``fold`` is done: its models took ``seconds`` (0 when unknown, e.g. resumed from
        a checkpoint: then it is not one of this run's) and its result came back ``at`` wall
        seconds into the run."""
        fold = int(fold)
        self.finished[fold] = float(seconds)
        if seconds > 0:
            self.arrived[fold] = float(at)

    def waves(self) -> list[list[int]]:
        """This run's folds (all but the resumed), in the order handed to the workers: one list,
        or a warm-started run's waves (fold ``k`` waits for fold ``k - stride``)."""
        run = sorted(f for f in self.days if self.finished.get(f, 1.0) > 0)
        if not self.stride:
            return [run] if run else []
        waves, pending = [], run
        while pending:
            waiting = set(pending)
            waves.append([f for f in pending if f - self.stride not in waiting])
            pending = [f for f in pending if f - self.stride in waiting]
        return waves

    def _starts(self, waves: list[list[int]]) -> dict[int, float]:
        """``{fold: wall seconds into the run it began}`` of the folds begun: a wave's first
        ``workers`` folds when it begins (the first when the first result's fold began; a later
        one when the last of the wave before came back), every other fold when a result of its
        wave freed a worker (the ``j``-th to come back frees the worker of fold ``workers + j``)."""
        first = min(self.arrived, key=self.arrived.get)
        begin = max(self.arrived[first] - self.finished[first], 0.0)  # before: starting the workers
        starts: dict[int, float] = {}
        for wave in waves:
            came = sorted(self.arrived[f] for f in wave if f in self.arrived)
            for position, fold in enumerate(wave):
                if position < self.workers:
                    starts[fold] = begin
                elif position - self.workers < len(came):
                    starts[fold] = came[position - self.workers]
            if len(came) < len(wave):
                break  # this wave is running: the next has not begun
            begin = came[-1]
        return starts

    def _rates(self, later: set[int]) -> dict[str, float]:
        """Seconds per training day of each kind, from the timed folds (those in ``later``, not
        a worker's first, where any of the kind has finished)."""
        rates = {}
        for kind in ("full", "warm"):
            timed = [f for f in self.arrived if self.kind(f) == kind]
            timed = [f for f in timed if f in later] or timed
            if timed:
                rates[kind] = sum(self.finished[f] for f in timed) / sum(self.days[f] for f in timed)
        if "full" in rates and "warm" not in rates:
            rates["warm"] = rates["full"] * self.warm_ratio
        if "warm" in rates and "full" not in rates:
            rates["full"] = rates["warm"] / self.warm_ratio
        return rates

    def _hold(self, starts: dict[int, float], later: set[int]) -> float:
        """Wall seconds a fold holds its worker per second of its models (1 until measured)."""
        timed = [f for f in later if f in starts]
        model = sum(self.finished[f] for f in timed)
        if model <= 0:
            return 1.0
        ratio = sum(self.arrived[f] - starts[f] for f in timed) / model
        return min(max(ratio, _HOLD_RANGE[0]), _HOLD_RANGE[1])

    def seconds_left(self, elapsed: float) -> float | None:
        """Wall seconds left at ``elapsed`` seconds into the run, or None before a timed fold
        has finished in this run."""
        if not self.arrived:
            return None
        todo = [f for f in self.days if f not in self.finished]
        if not todo:
            return 0.0
        waves = self.waves()
        starts = self._starts(waves)
        later = set(self.arrived) - set(waves[0][: self.workers])
        rates = self._rates(later)
        hold = self._hold(starts, later)
        cost = {f: self.days[f] * rates[self.kind(f)] * hold for f in todo}
        now = max(float(elapsed), max(self.arrived.values()))
        begin = now
        for wave in waves:
            left = [f for f in wave if f not in self.finished]
            if not left:
                continue
            ends = [max(begin, starts[f] + cost[f]) for f in left if f in starts]  # running
            free = ends + [begin] * max(self.workers - len(ends), 0)
            heapq.heapify(free)
            for fold in (f for f in left if f not in starts):  # waiting, in the order handed out
                end = heapq.heappop(free) + cost[fold]
                heapq.heappush(free, end)
                ends.append(end)
            begin = max(ends)  # the next wave begins when this one has ended
        return begin - now

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
