"""The strategy: forecasts -> target weights (top-k, top-k dropout, rank weights, turnover)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.portfolio.strategy import StrategyConfig, annual_turnover, target_weights


def _frame(rows):
    return pd.DataFrame(rows, columns=list("abcde"),
                        index=pd.bdate_range("2024-01-01", periods=len(rows)), dtype=float)


def _held(w):
    return [set(w.columns[row > 0]) for row in w.to_numpy()]


def test_dropout_replaces_at_most_n_drop_names_per_rebalance():
    f = _frame([[5, 4, 3, 2, 1],     # start: hold the best two, a and b
                [1, 2, 3, 4, 5],     # ranking reversed: only one swap allowed (n_drop=1)
                [1, 2, 3, 4, 5],     # the next swap
                [1, 2, 3, 4, 5]])    # d and e held: nothing better left out
    w = target_weights(f, StrategyConfig(rule="dropout", top_k=2, n_drop=1))
    assert _held(w) == [{"a", "b"}, {"b", "e"}, {"e", "d"}, {"d", "e"}]
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    # top-k on the same scores swaps the whole book at once.
    top = target_weights(f, StrategyConfig(top_k=2))
    assert _held(top)[1] == {"d", "e"}


def test_dropout_keeps_a_holding_that_stays_above_the_candidates():
    f = _frame([[5, 4, 3, 2, 1],
                [5, 1, 3, 2, 4]])    # b falls below e: b is swapped for e, a stays
    w = target_weights(f, StrategyConfig(rule="dropout", top_k=2, n_drop=1))
    assert _held(w) == [{"a", "b"}, {"a", "e"}]


def test_dropout_replaces_a_holding_without_forecast_first():
    f = _frame([[5, 4, 3, 2, 1],
                [np.nan, 4, 3, 2, 1]])  # a suspended: no score, first to go
    w = target_weights(f, StrategyConfig(rule="dropout", top_k=2, n_drop=1))
    assert _held(w)[1] == {"b", "c"}


def test_dropout_rebalances_only_on_rebalance_rows():
    f = _frame([[5, 4, 3, 2, 1], [1, 2, 3, 4, 5], [1, 2, 3, 4, 5]])
    w = target_weights(f, StrategyConfig(rule="dropout", top_k=2, n_drop=1, rebalance_every=2))
    assert _held(w) == [{"a", "b"}, {"a", "b"}, {"b", "e"}]


def test_rank_weights_follow_the_score_rank():
    f = _frame([[5, 4, 3, 2, 1]])
    w = target_weights(f, StrategyConfig(top_k=3, weighting="rank")).iloc[0]
    np.testing.assert_allclose(w.to_numpy(), [3 / 6, 2 / 6, 1 / 6, 0, 0])
    short = target_weights(f, StrategyConfig(top_k=2, weighting="rank", mode="long_short",
                                             top_k_above_threshold=False)).iloc[0]
    np.testing.assert_allclose(short.to_numpy(), [2 / 3, 1 / 3, 0, -1 / 3, -2 / 3])


def test_dropout_bounds_turnover_on_random_scores():
    rng = np.random.default_rng(0)
    f = pd.DataFrame(rng.standard_normal((250, 40)), index=pd.bdate_range("2024-01-01", periods=250))
    daily = annual_turnover(target_weights(f, StrategyConfig(top_k=10)))
    drop = annual_turnover(target_weights(f, StrategyConfig(rule="dropout", top_k=10, n_drop=2)))
    # At most 2 of 10 names a day: one-sided turnover <= 0.2 * 252 per year.
    assert drop <= 0.2 * 252 + 1e-9 and drop < daily / 2
    assert daily == pytest.approx(252 * 0.75, rel=0.1)  # random top-10 of 40 keeps ~1/4 of its names


def test_annual_turnover_of_a_full_swap_each_day():
    w = _frame([[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [1, 0, 0, 0, 0]])
    assert annual_turnover(w) == pytest.approx(252.0)
