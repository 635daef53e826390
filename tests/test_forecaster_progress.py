"""The walk-forward's progress estimate: folds weighed by their training days and kind (a full
fit or a warm start), rates learnt from the folds that finished (each worker's first fold left
out once a later one is timed), the rest of the run replayed on its workers; the start-up before
the first fold is not extrapolated."""

from __future__ import annotations

import heapq
import io
from types import SimpleNamespace

import pandas as pd
import pytest

from forecaster.evaluation.folds import Fold
from forecaster.evaluation.progress import FoldClock, _duration
from forecaster.evaluation.walkforward import _collect, _fold_clock
from forecaster.evaluation.warm_start import in_waves


def test_equal_folds_read_as_tqdm_would():
    clock = FoldClock({k: 100 for k in range(4)})
    assert clock.seconds_left(0.0) is None and clock.describe(0.0) == "4 folds to go"
    clock.finish(0, 10.0, at=10.0)
    assert clock.seconds_left(10.0) == pytest.approx(30.0)
    assert clock.describe(10.0) == "~30 s left (3 folds)"


def test_an_expanding_window_makes_later_folds_dearer():
    clock = FoldClock({0: 100, 1: 200, 2: 300, 3: 400})
    clock.finish(0, 10.0, at=10.0)
    # 0.1 s a training day: 90 s for the 900 days left, where counting folds says 30 s
    assert clock.seconds_left(10.0) == pytest.approx(90.0)


def test_warm_folds_cost_the_epoch_ratio_until_one_is_measured():
    clock = FoldClock({k: 100 for k in range(6)}, warm={2, 3, 4, 5}, warm_ratio=0.25, stride=2)
    assert clock.describe(0.0) == "2 full fits, 4 warm to go"
    clock.finish(0, 10.0, at=10.0)
    clock.finish(1, 10.0, at=20.0)
    assert clock.seconds_left(20.0) == pytest.approx(10.0)  # counting folds would say 40 s
    clock.finish(2, 5.0, at=25.0)  # warm folds measured at half a full fit's cost
    assert clock.seconds_left(25.0) == pytest.approx(15.0)
    assert clock.describe(25.0) == "~15 s left (0 full fits, 3 warm)"


def test_parallel_workers_share_the_folds_left():
    clock = FoldClock({k: 100 for k in range(4)}, workers=2)
    clock.finish(0, 10.0, at=10.0)
    clock.finish(1, 10.0, at=10.0)  # two workers: 20 s of fits in 10 s of wall time
    assert clock.seconds_left(10.0) == pytest.approx(10.0)


def test_resumed_folds_count_as_done_but_give_no_rate():
    clock = FoldClock({k: 100 for k in range(3)})
    clock.finish(0, 0.0)
    assert clock.seconds_left(5.0) is None and clock.describe(5.0) == "2 folds to go"
    clock.finish(1, 4.0, at=4.0)
    assert clock.seconds_left(4.0) == pytest.approx(4.0)
    assert FoldClock({0: 1}).describe(0.0) == "1 fold to go"


def test_durations_read_in_the_unit_that_fits():
    shown = [_duration(s) for s in (0.2, 45, 100, 3600, 7500)]
    assert shown == ["1 s", "45 s", "2 min", "60 min", "2 h 05 min"]


def test_fold_clock_reads_training_days_and_warm_folds_from_the_folds():
    dates = pd.bdate_range("2020-01-01", periods=50)
    folds = [Fold(k, dates[0], dates[9 + 10 * k], dates[10 + 10 * k: 20 + 10 * k]) for k in range(4)]
    clock = _fold_clock(dates, folds, warm_start=2, workers=3)
    assert clock.days == {0: 10, 1: 20, 2: 30, 3: 40} and clock.warm == {2, 3}
    assert (clock.workers, clock.stride, clock.waves()) == (3, 2, [[0, 1], [2, 3]])
    assert _fold_clock(dates, folds, warm_start=0).warm == set()


def test_the_bar_shows_folds_elapsed_and_the_estimate(monkeypatch):
    class Output:
        def __init__(self, fold, seconds):
            self.fold, self.seconds = fold, {(fold, "transformer"): seconds}

    stream = io.StringIO()
    import forecaster.evaluation.walkforward as wf

    real = wf.tqdm
    monkeypatch.setattr(wf, "tqdm", lambda *a, **k: real(*a, **{**k, "file": stream, "mininterval": 0}))
    clock = FoldClock({0: 100, 1: 100, 2: 100}, warm={2})
    outputs, _ = _collect(iter([(Output(0, 1.0), {}), (Output(1, 1.0), {})]), None, {}, 3, True, clock)
    text = stream.getvalue()
    assert len(outputs) == 2 and "2/3 folds" in text and "left (0 full fits, 1 warm)" in text


def _planted(days, workers, startup, warm_up, per_day, hold, warm=frozenset(), stride=0, warm_ratio=0.25):
    """The results of a run laid out as the walk-forward runs it, ``[(wall s, fold, models' s)]``
    in the order they come back: ``workers`` processes ready ``startup`` seconds in, each taking
    the next fold as it frees (a warm-started run in :func:`in_waves`' waves, each after the last);
    a fold's models take ``per_day`` seconds a training day (``warm_ratio`` of that for a warm
    fold), plus ``warm_up`` on each worker's first fold; a fold holds its worker ``hold`` seconds
    more (its inputs cut, its forecasts sent back)."""
    came, clock, used = [], {"begin": startup}, set()

    def run_wave(wave):
        free = [(clock["begin"], worker) for worker in range(workers)]
        ends = []
        for task in wave:
            fold = task[0].fold
            start, worker = heapq.heappop(free)
            model = days[fold] * per_day * (warm_ratio if fold in warm else 1.0)
            model += warm_up if worker not in used else 0.0
            used.add(worker)
            heapq.heappush(free, (start + model + hold, worker))
            ends.append((start + model + hold, fold, model))
        clock["begin"] = max(end for end, _, _ in ends)
        for end, fold, model in sorted(ends):
            came.append((end, fold, model))
            yield SimpleNamespace(fold=fold, states={}), {}

    tasks = [(SimpleNamespace(fold=k),) for k in sorted(days)]
    list(in_waves(run_wave, tasks, stride, {}) if stride else run_wave(tasks))
    return came


def _readings(days, came, **clock_args):
    """``[(estimate, truth)]`` of the time left as each result comes back (but the last)."""
    clock, last, out = FoldClock(days, **clock_args), came[-1][0], []
    for at, fold, model in came[:-1]:
        clock.finish(fold, model, at=at)
        out.append((clock.seconds_left(at), last - at))
    return out


# A small run as measured on the 2-core machine: an expanding window of 300 to 660 training days,
# the models' 1.1 to 2.5 s a fold, 0.4 s more of the worker per fold; workers up in 5 s (process
# start, imports), a worker's first fold 2.5 s dearer (torch's first kernels and imports).
SMALL = {k: 300 + 60 * k for k in range(7)}
PER_DAY = 1.5 / 400


@pytest.mark.parametrize("workers, startup, warm_up", [(1, 0.2, 1.0), (2, 5.0, 2.5), (4, 5.0, 2.5)])
def test_a_small_runs_estimate_is_within_a_quarter_of_the_time_left(workers, startup, warm_up):
    """Once each worker has finished a fold, the estimate is within 25 % of the time left (it read
    2 to 13 times too high here when the start-up, each worker's first fold and the folds still
    running were counted as the work of the folds done). Before, it overstates by no more than
    the first fold's warm-up does."""
    came = _planted(SMALL, workers, startup, warm_up, PER_DAY, hold=0.4)
    readings = _readings(SMALL, came, workers=workers)
    for k, (estimate, truth) in enumerate(readings):
        if k >= workers:
            assert truth / 1.25 <= estimate <= truth * 1.25, (k, estimate, truth)
        else:  # each worker's first fold: its warm-up is all the estimate can err by
            first = min(SMALL[f] for f in range(workers)) * PER_DAY
            assert truth / 1.25 <= estimate <= truth * 1.25 * (first + warm_up) / first, (k, estimate, truth)


@pytest.mark.parametrize("workers, stride", [(2, 2), (2, 3), (4, 2)])
def test_a_warm_started_runs_waves_are_replayed(workers, stride):
    """Warm-started folds run in waves of ``stride``, each after the last: the estimate follows
    them to within 25 % (or half a second, at the very end) once every worker has a fold done."""
    days = {k: 1000 + 63 * k for k in range(12)}
    warm = {k for k in days if k >= stride}
    came = _planted(days, workers, 5.0, 2.5, 10 / 1000, hold=0.4, warm=warm, stride=stride)
    readings = _readings(days, came, workers=workers, stride=stride, warm=warm)
    for k, (estimate, truth) in enumerate(readings[min(workers, stride):]):
        assert abs(estimate - truth) <= 0.25 * truth + 0.5, (k, estimate, truth)
