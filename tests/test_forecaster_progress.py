"""The walk-forward's progress estimate: folds weighed by their training days and kind (a full
fit or a warm start), rates learnt from the folds that finished, scaled by the wall time."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from forecaster.evaluation.folds import Fold
from forecaster.evaluation.progress import FoldClock, _duration
from forecaster.evaluation.walkforward import _collect, _fold_clock


def test_equal_folds_read_as_tqdm_would():
    clock = FoldClock({k: 100 for k in range(4)})
    assert clock.seconds_left(0.0) is None and clock.describe(0.0) == "4 folds to go"
    clock.finish(0, 10.0)
    assert clock.seconds_left(10.0) == pytest.approx(30.0)
    assert clock.describe(10.0) == "~30 s left (3 folds)"


def test_an_expanding_window_makes_later_folds_dearer():
    clock = FoldClock({0: 100, 1: 200, 2: 300, 3: 400})
    clock.finish(0, 10.0)
    # 0.1 s a training day: 90 s for the 900 days left, where counting folds says 30 s
    assert clock.seconds_left(10.0) == pytest.approx(90.0)


def test_warm_folds_cost_the_epoch_ratio_until_one_is_measured():
    clock = FoldClock({k: 100 for k in range(6)}, warm={2, 3, 4, 5}, warm_ratio=0.25)
    assert clock.describe(0.0) == "2 full fits, 4 warm to go"
    clock.finish(0, 10.0)
    clock.finish(1, 10.0)
    assert clock.seconds_left(20.0) == pytest.approx(10.0)  # counting folds would say 40 s
    clock.finish(2, 5.0)  # warm folds measured at half a full fit's cost
    assert clock.seconds_left(25.0) == pytest.approx(15.0)
    assert clock.describe(25.0) == "~15 s left (0 full fits, 3 warm)"


def test_parallel_workers_scale_by_the_wall_time():
    clock = FoldClock({k: 100 for k in range(4)})
    clock.finish(0, 10.0)
    clock.finish(1, 10.0)  # two workers: 20 s of fits in 10 s of wall time
    assert clock.seconds_left(10.0) == pytest.approx(10.0)


def test_resumed_folds_count_as_done_but_give_no_rate():
    clock = FoldClock({k: 100 for k in range(3)})
    clock.finish(0, 0.0)
    assert clock.seconds_left(5.0) is None and clock.describe(5.0) == "2 folds to go"
    clock.finish(1, 4.0)
    assert clock.seconds_left(4.0) == pytest.approx(4.0)
    assert FoldClock({0: 1}).describe(0.0) == "1 fold to go"


def test_durations_read_in_the_unit_that_fits():
    shown = [_duration(s) for s in (0.2, 45, 100, 3600, 7500)]
    assert shown == ["1 s", "45 s", "2 min", "60 min", "2 h 05 min"]


def test_fold_clock_reads_training_days_and_warm_folds_from_the_folds():
    dates = pd.bdate_range("2020-01-01", periods=50)
    folds = [Fold(k, dates[0], dates[9 + 10 * k], dates[10 + 10 * k: 20 + 10 * k]) for k in range(4)]
    clock = _fold_clock(dates, folds, warm_start=2)
    assert clock.days == {0: 10, 1: 20, 2: 30, 3: 40} and clock.warm == {2, 3}
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
