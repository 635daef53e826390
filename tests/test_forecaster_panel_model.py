"""The panel models: one contract test over the Transformer and every cross-sectional
baseline (fit up to a cut-off, predict after it, no look-ahead, save/load), the ranking
losses, and the system-level checks on synthetic panels: a planted signal is recovered and a
null panel shows no significant skill."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.evaluation.scoring import score_run
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.features.factors import FACTORS
from forecaster.models.interface import Forecaster
from forecaster.models.panel.baselines import FactorScore, FeatureRegressor
from forecaster.models.panel.losses import (
    RANK_LOSSES,
    ic_loss,
    icir_loss,
    listnet_loss,
    mse_loss,
    pairwise_loss,
    rank_loss,
)
from forecaster.models.panel.model import PanelTransformer
from forecaster.models.presets import panel_models
from forecaster.models.training import LoopConfig

TINY = dict(window=10, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_epochs=3, patience=2,
            days_per_batch=8, random_state=0)


@pytest.fixture(scope="module")
def frames():
    return synthetic_panel(n_stocks=30, n_days=260, signal_ic=0.1, seed=3)


def contract_models():
    return {
        "transformer": PanelTransformer(**TINY),
        "transformer_market_gate": PanelTransformer(**TINY, market="gate"),
        "transformer_aux_horizons": PanelTransformer(**TINY, aux_horizons=(5,)),
        "transformer_blend": PanelTransformer(**{**TINY, "n_seeds": 1},
                                              blend_features=("return_20d", "range")),
        **{name: FactorScore(name) for name in FACTORS},
        "gbm": FeatureRegressor("gbm"),
        "ridge_features": FeatureRegressor("ridge"),
    }


@pytest.mark.parametrize("name", list(contract_models()))
def test_model_contract(name, frames, one_thread):
    model = contract_models()[name]
    assert isinstance(model, Forecaster) and model.input_kind == "panel"
    panel = Panel.from_frames(frames)
    cut = panel.dates[199]
    fitted = model.fit(panel.slice(end=cut))
    assert fitted is model
    pred = model.predict(panel.slice(start=panel.dates[100]))
    assert pred.name == "forecast" and list(pred.index.names) == ["date", "code"]
    assert pred.index.get_level_values("date").min() > panel.dates[100]  # needs the day before
    assert pred.notna().all()
    # The future cannot reach back: change every bar from day 230 on, refit on the same
    # training rows, and every forecast dated up to day 230 (inputs up to 229) is unchanged.
    later = {c: f.copy() for c, f in frames.items()}
    for f in later.values():
        rows = f.index >= panel.dates[230]
        f.loc[rows, ["open", "high", "low", "close", "volume", "amount", "turnover", "pb_mrq"]] *= 1.3
    other = Panel.from_frames(later)
    again = contract_models()[name].fit(other.slice(end=cut))
    pred2 = again.predict(other.slice(start=panel.dates[100]))
    upto = pred.index.get_level_values("date") <= panel.dates[230]
    upto2 = pred2.index.get_level_values("date") <= panel.dates[230]
    pd.testing.assert_series_equal(pred[upto], pred2[upto2])
    assert not pred[~upto].equals(pred2[~upto2])


def test_transformer_save_load_identical(frames, tmp_path, one_thread):
    panel = Panel.from_frames(frames)
    model = PanelTransformer(**{**TINY, "n_seeds": 2, "cross_stock": True, "market": "input",
                                "aux_horizons": (3,)})
    model.fit(panel.slice(end=panel.dates[199]))
    path = model.save(tmp_path / "panel.pt")
    same = PanelTransformer.load(path, device="cpu")
    test = panel.slice(start=panel.dates[150])
    pd.testing.assert_series_equal(model.predict(test), same.predict(test))
    nxt = same.predict_next(test)
    assert nxt.index.name == "code" and len(nxt) == panel.n_stocks
    assert len(model.histories_) == 2 and all(1 <= b <= TINY["max_epochs"] for b in model.best_epochs_)


def test_cross_stock_attention_ignores_absent_stocks(one_thread):
    from forecaster.models.panel.network import PanelNetConfig, PanelTransformerNet

    torch.manual_seed(0)
    config = PanelNetConfig(n_features=3, window=5, d_model=8, n_heads=2, d_ff=16, cross_stock=True)
    net = PanelTransformerNet(config).eval()
    x = torch.randn(6, config.context + 2, 3)  # 6 stocks, two scored days
    present = torch.tensor([[True] * 4 + [False] * 2, [True] * 6])
    out = net(x, present)
    x2 = x.clone()
    x2[4:, -2] = 100.0  # garbage in the absent stocks' inputs of the first day
    again = net(x2, present)
    assert torch.allclose(out[0], again[0], atol=1e-6) and (out[0, 4:] == 0).all()
    assert not torch.allclose(out[1], again[1])  # the second day does see them (causally)


def test_auxiliary_horizons_train_their_own_heads(frames, one_thread, monkeypatch):
    """``aux_horizons``: batches carry every horizon's normalised label ``[days, stocks, 1 + A]``
    (the forecast's first, masked where a label is unknown), the step averages one loss per
    head, and validation starts after the longest label of the training days has ended."""
    import forecaster.models.panel.model as pm
    from forecaster.features.labels import normalise_per_day, tradeable_label
    from forecaster.models.panel.losses import rank_loss
    from forecaster.models.training import LoopConfig, train_days

    panel = Panel.from_frames(frames).slice(end=Panel.from_frames(frames).dates[199])
    seen = {}
    real_train, real_val = pm.train_days, pm.PanelTransformer._val_ic

    def spy_train(net, batch, blocks, *args, **kwargs):
        seen["batch"], seen["fit_end"] = batch, max(int(b[-1]) for b in blocks)
        return real_train(net, batch, blocks, *args, **kwargs)

    def spy_val(self, net, data, days, seed):
        seen["val_start"] = int(days[0])
        return real_val(self, net, data, days, seed)

    monkeypatch.setattr(pm, "train_days", spy_train)
    monkeypatch.setattr(pm.PanelTransformer, "_val_ic", spy_val)
    model = PanelTransformer(**{**TINY, "max_epochs": 1, "dropout": 0.0}, aux_horizons=(5,)).fit(panel)
    assert model.nets_[0].head.out_features == 2
    assert seen["val_start"] - seen["fit_end"] == 5 + 2  # 6 days skipped: a 5-day label's span
    days = np.arange(190, 198)  # the panel's last row is 199
    x, target, mask, present, stocks = seen["batch"](days)
    assert target.shape == mask.shape == (8, len(stocks), 2) and present.shape == (8, len(stocks))
    five = normalise_per_day(tradeable_label(panel, 5)[0], "rank")[days][:, stocks.numpy()]
    np.testing.assert_allclose(target[..., 1].numpy(), np.nan_to_num(five), atol=1e-6)
    # Entry at the next open, exit five days on: from row 194 the exit is past row 199.
    assert mask[:4, :, 1].any() and not mask[4:, :, 1].any() and mask[4:, :, 0].any()
    # One optimiser step's loss is the mean of the heads' losses on the same scores.
    net = model.nets_[0]
    scores = net(x, present, all_outputs=True).detach()
    expected = np.mean([float(rank_loss("mse", scores[..., k], target[..., k], mask[..., k]))
                        for k in (0, 1)])
    history, _ = train_days(net, lambda d: (x, target, mask, present), [days], None,
                            LoopConfig(loss="mse", max_epochs=1), 0, torch.device("cpu"))
    assert history[0]["train_loss"] == pytest.approx(expected, rel=1e-4)
    with pytest.raises(ValueError, match="aux_horizons"):
        PanelTransformer(aux_horizons=(1,)).fit(panel)


def test_weights_of_the_last_epochs_are_averaged_without_validation(frames, one_thread):
    """``average_last=k`` without validation keeps the mean of the last k epochs' weights
    (each recorded at the end of its epoch); with ``k = 1`` the last epoch's."""
    from forecaster.models.training import fit_loop

    def run(average_last):
        torch.manual_seed(0)
        net = torch.nn.Linear(3, 1)
        x, y = torch.randn(64, 3), torch.randn(64, 1)
        seen = []

        class Record:  # the loop calls scheduler.step() once at the end of every epoch
            def step(self):
                seen.append({k: v.detach().clone() for k, v in net.state_dict().items()})

        fit_loop(net, torch.optim.SGD(net.parameters(), lr=0.1), lambda: range(2),
                 lambda b: (((net(x) - y) ** 2).mean(), 1), max_epochs=5, grad_clip=10.0, patience=1,
                 scheduler=Record(), average_last=average_last)
        return net, seen

    net, seen = run(3)
    for key, value in net.state_dict().items():
        torch.testing.assert_close(value, torch.stack([s[key] for s in seen[-3:]]).mean(0))
        assert not torch.allclose(value, seen[-1][key])
    net, seen = run(1)
    for key, value in net.state_dict().items():
        torch.testing.assert_close(value, seen[-1][key])
    model = PanelTransformer(**{**TINY, "val_fraction": 0.0, "average_last": 2})
    model.fit(Panel.from_frames(frames))
    assert model.best_epochs_ == [3, 3] and [len(h) for h in model.histories_] == [3, 3]  # two seeds


def test_market_context_is_each_days_cross_section():
    from forecaster.models.panel.dataset import market_context

    X = np.array([[[1.0, 0.0], [3.0, 2.0], [100.0, 100.0]],
                  [[2.0, 4.0], [2.0, 0.0], [5.0, 5.0]]], dtype=np.float32)  # [2 days, 3 stocks, 2]
    listed = np.array([[True, True, False], [True, True, True]])
    m = market_context(X, listed)
    assert m.shape == (2, 4)
    # day 0: the unlisted third stock is left out; day 1: all three
    np.testing.assert_allclose(m[0], [2.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(m[1], [3.0, 3.0, np.std([2, 2, 5]), np.std([4, 0, 5])], rtol=1e-6)


def test_market_context_by_default_only_at_whole_market_breadth(frames):
    model = PanelTransformer()
    modes = (model.market_mode(60), model.market_mode(240), model.market_mode(1200))
    assert modes == ("none", "none", "gate")
    assert PanelTransformer(market="input").market_mode(60) == "input"
    fitted = PanelTransformer(**TINY).fit(Panel.from_frames(frames))  # 30 stocks: no gate
    assert fitted.net_config_.market == "none" and fitted.nets_[0].gate is None


def test_market_gate_starts_as_a_rescaling_of_the_stock_features(one_thread):
    from forecaster.models.panel.network import PanelNetConfig, PanelTransformerNet

    torch.manual_seed(0)
    config = PanelNetConfig(n_features=3, window=4, d_model=8, n_heads=2, d_ff=16, market="gate", n_market=6)
    net = PanelTransformerNet(config).eval()
    with torch.no_grad():  # a zero gate layer is the uniform gate: F * softmax(0) = 1 per feature
        net.gate.weight.zero_()
        net.gate.bias.zero_()
    plain = PanelTransformerNet(PanelNetConfig(n_features=3, window=4, d_model=8, n_heads=2, d_ff=16)).eval()
    plain.load_state_dict({k: v for k, v in net.state_dict().items() if not k.startswith("gate.")})
    x = torch.randn(5, config.context + 3, 9)
    present = torch.ones(3, 5, dtype=torch.bool)
    assert torch.allclose(net(x, present), plain(x[..., :3], present), atol=1e-6)
    with pytest.raises(ValueError, match="market"):
        PanelNetConfig(n_features=3, market="gate")


def test_sequence_network_depends_on_its_context_only(one_thread):
    from forecaster.models.panel.network import PanelNetConfig, PanelTransformerNet

    torch.manual_seed(0)
    config = PanelNetConfig(n_features=3, window=4, d_model=8, n_heads=2, n_layers=2, d_ff=16)
    net = PanelTransformerNet(config).eval()
    x = torch.randn(5, 40, 3)  # 5 stocks, 40 days
    days = 40 - config.context
    full = net(x, torch.ones(days, 5, dtype=torch.bool))
    # The last day computed from just its context equals the same day within a long batch.
    last = net(x[:, -config.context - 1:], torch.ones(1, 5, dtype=torch.bool))
    assert torch.allclose(full[-1], last[0], atol=1e-5)
    x2 = x.clone()
    x2[:, : 40 - config.context - 1] = 9.0  # everything before the last day's context
    changed = net(x2, torch.ones(days, 5, dtype=torch.bool))
    assert torch.allclose(changed[-1], full[-1], atol=1e-5) and not torch.allclose(changed[0], full[0])


def test_ranking_losses_known_values():
    scores = torch.tensor([[1.0, 2.0, 3.0, 0.0], [3.0, 2.0, 1.0, 0.0]])
    labels = torch.tensor([[1.0, 2.0, 3.0, 9.0], [1.0, 2.0, 3.0, 0.0]])
    mask = torch.tensor([[True, True, True, False], [True, True, True, False]])
    # Day 1 perfectly ordered (corr +1), day 2 reversed (-1): the mean is 0.
    assert ic_loss(scores, labels, mask).item() == pytest.approx(0.0, abs=1e-6)
    assert ic_loss(scores[:1], labels[:1], mask[:1]).item() == pytest.approx(-1.0, abs=1e-6)
    # ICIR over the days: mean 0, sd 1 -> 0; days +1 and +0.5 -> -0.75 / (0.25 + floor).
    assert icir_loss(scores, labels, mask, floor=0.05).item() == pytest.approx(0.0, abs=1e-6)
    half = torch.tensor([[1.0, 2.0, 3.0, 0.0], [1.0, 3.0, 2.0, 0.0]])  # day 2: corr 0.5
    assert icir_loss(half, labels, mask, floor=0.05).item() == pytest.approx(-0.75 / 0.30, rel=1e-5)
    # The floor is an option (icir_floor, 0.3 by default) that reaches the loss from the loop.
    assert rank_loss("icir", half, labels, mask).item() == pytest.approx(-0.75 / 0.55, rel=1e-5)
    wider = rank_loss("icir", half, labels, mask, icir_floor=0.6)
    assert wider.item() == pytest.approx(-0.75 / 0.85, rel=1e-5)
    with pytest.raises(ValueError, match="icir_floor"):
        LoopConfig(icir_floor=0.0)
    assert mse_loss(scores, labels, mask).item() == pytest.approx((0 + 0 + 0 + 4 + 0 + 4) / 6)
    good = pairwise_loss(scores[:1], labels[:1], mask[:1], generator=torch.Generator().manual_seed(0))
    bad = pairwise_loss(scores[1:], labels[1:], mask[1:], generator=torch.Generator().manual_seed(0))
    assert good.item() < np.log(2) < bad.item()
    # ListNet is minimised by scores equal to the labels (up to a shift).
    assert listnet_loss(labels[:1] + 5, labels[:1], mask[:1]) < listnet_loss(scores[1:], labels[:1], mask[:1])


@pytest.mark.parametrize("name", RANK_LOSSES)
def test_every_loss_has_finite_gradients_with_a_day_without_labels_or_spread(name):
    """A training universe leaves steps whose drawn stocks hold no label on some day; a day
    can also hold equal scores. Those days weigh nothing and must not turn every gradient into
    NaN (which once made a fold's networks score every stock alike, silently)."""
    scores = torch.randn(4, 10, generator=torch.Generator().manual_seed(0)).requires_grad_()
    labels = torch.randn(4, 10, generator=torch.Generator().manual_seed(1))
    mask = torch.ones(4, 10, dtype=torch.bool)
    mask[1] = False  # no labelled stock
    mask[2, 1:] = False  # one
    flat = scores.detach().clone()
    flat[3] = 0.5  # equal scores
    for s in (scores, flat.requires_grad_()):
        loss = rank_loss(name, s, labels, mask, generator=torch.Generator().manual_seed(2))
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(s.grad).all(), name
    # A batch with a single scored day (a training period's last block of one day): the ICIR's
    # spread across days is 0, and its square root must not make the gradient NaN.
    for days_mask in (mask[[0]], torch.stack([mask[0], mask[1], mask[1]])):
        one = scores.detach()[: len(days_mask)].clone().requires_grad_()
        loss = rank_loss(name, one, labels[: len(days_mask)], days_mask,
                         generator=torch.Generator().manual_seed(2))
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(one.grad).all() and one.grad[0].abs().sum() > 0, name
    full = torch.ones(4, 10, dtype=torch.bool)
    kept = rank_loss(name, scores[[0]], labels[[0]], full[[0]], generator=torch.Generator().manual_seed(2))
    with_empty = rank_loss(name, scores[[0, 1]], labels[[0, 1]], torch.stack([full[0], mask[1]]),
                           generator=torch.Generator().manual_seed(2))
    if name in ("ic", "listnet"):  # a day without labels changes nothing
        assert with_empty.item() == pytest.approx(kept.item(), rel=1e-6)


def test_a_network_with_non_finite_weights_fails_loudly_not_with_zero_scores():
    panel = Panel.from_frames(synthetic_panel(n_stocks=12, n_days=200, signal_ic=0.1, seed=3))
    model = PanelTransformer(**{**TINY, "max_epochs": 1}).fit(panel)
    with torch.no_grad():
        next(model.nets_[0].parameters()).fill_(float("nan"))
    with pytest.raises(FloatingPointError, match="not finite"):
        model.predict(panel)


def _run(frames, signal: bool):
    models = {k: v for k, v in panel_models(time_series=False, **TINY).items()
              if k in ("transformer", "gbm", "ridge_features", "composite", "low_vol_20d", "reversal_5d")}
    config = WalkForwardConfig(train_days=250, retrain_every=125, min_stock_days=60, margin_days=80,
                               progress=False, n_jobs=1)
    result = walk_forward(frames, models, config)
    return score_run(result, frames, models, "transformer")


@pytest.mark.slow
def test_planted_signal_is_recovered(one_thread):
    frames = synthetic_panel(n_stocks=60, n_days=500, signal_ic=0.1, seed=11)
    report = _run(frames, True)
    ic = report.ic["transformer"]
    assert ic["n_days"] > 200
    # Recovered close to the planted 0.1 (the features carry it with noise), and significant.
    assert 0.05 < ic["mean_ic"] < 0.15 and ic["t_stat"] > 4
    assert report.ic["gbm"]["mean_ic"] > 0.04  # a learner on the same features finds it too
    assert abs(report.ic["low_vol_20d"]["mean_ic"]) < 0.05  # nothing planted there


@pytest.mark.slow
def test_null_panel_shows_no_significant_skill(one_thread):
    frames = synthetic_panel(n_stocks=60, n_days=500, signal_ic=0.0, seed=12)
    report = _run(frames, False)
    n = len(report.ic)
    for name, ic in report.ic.items():
        p_above = stats.t.sf(ic["t_stat"], ic["n_days"] - 1)
        assert p_above > 0.05 / n, f"{name} shows skill on a null panel: {ic}"  # Bonferroni


def test_training_budgets_bound_every_step_and_epoch(frames, one_thread, monkeypatch):
    """``stocks_per_batch`` caps the stocks of a step, ``epoch_stock_days`` the steps of an
    epoch (budget // (days_per_batch x stocks per step)); the network still learns."""
    import forecaster.models.panel.model as pm

    seen = []

    def spy(net, batch, blocks, *args, **kwargs):
        def counting(days):
            out = batch(days)
            seen.append(out[0].shape[0])
            return out
        return real(net, counting, blocks, *args, **kwargs)

    real = pm.train_days
    monkeypatch.setattr(pm, "train_days", spy)
    panel = Panel.from_frames(frames)
    model = PanelTransformer(**{**TINY, "max_epochs": 2, "val_fraction": 0.0, "n_seeds": 1,
                                "stocks_per_batch": 12, "epoch_stock_days": 12 * 8 * 5})
    model.fit(panel.slice(end=panel.dates[199]))
    assert seen == [12] * 10  # 2 epochs x 5 steps of 12 of the 30 stocks
    seen.clear()
    full = PanelTransformer(**{**TINY, "max_epochs": 1, "val_fraction": 0.0, "n_seeds": 1})
    full.fit(panel.slice(end=panel.dates[199]))
    assert len(seen) > 10 and max(seen) == 30  # every usable day block, every stock present
    assert full.histories_[0][0]["train_loss"] != model.histories_[0][0]["train_loss"]
    with pytest.raises(ValueError, match="stocks_per_batch"):
        PanelTransformer(stocks_per_batch=1).fit(panel)


def test_validation_stays_within_the_epoch_budget(frames, one_thread, monkeypatch):
    """With ``epoch_stock_days``, an epoch's validation scores at most that many stock-days,
    the same stocks every epoch; without it, every stock of every validation day."""
    import forecaster.models.panel.model as pm

    scored = []
    real = pm.PanelTransformer._scores

    def spy(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        scored.append(np.isfinite(out))
        return out

    monkeypatch.setattr(pm.PanelTransformer, "_scores", spy)
    panel = Panel.from_frames(frames)
    train = panel.slice(end=panel.dates[199])
    params = {**TINY, "max_epochs": 2, "patience": 5, "val_fraction": 0.2, "n_seeds": 1}  # one network
    PanelTransformer(**params).fit(train)
    full = scored[0].sum()
    assert len(scored) == 2 and full > 600  # ~30 stocks x ~30 validation days
    scored.clear()
    PanelTransformer(**params, epoch_stock_days=300).fit(train)
    assert len(scored) == 2 and 0 < scored[0].sum() <= 300
    assert scored[0].sum(axis=1).max() < 30  # a subset of each day's stocks
    np.testing.assert_array_equal(scored[0], scored[1])


def test_gradient_boosting_row_cap_uses_only_the_latest_days(frames, one_thread):
    """With ``max_rows`` binding, the fit depends on the latest rows' days (and the history
    their features need) only: rewriting the first 40 days changes nothing."""
    panel = Panel.from_frames(frames)
    early = {c: f.copy() for c, f in frames.items()}
    for f in early.values():
        rows = f.index < panel.dates[40]
        f.loc[rows, ["open", "high", "low", "close", "preclose", "volume", "amount"]] *= 1.7
    other = Panel.from_frames(early)
    test = slice(panel.dates[150], None)
    a = FeatureRegressor("gbm", max_rows=600).fit(panel.slice(end=panel.dates[199]))
    b = FeatureRegressor("gbm", max_rows=600).fit(other.slice(end=panel.dates[199]))
    pd.testing.assert_series_equal(a.predict(panel.slice(test.start)), b.predict(other.slice(test.start)))
    # Uncapped, the same rewrite does change the fit (so the check above can fail).
    c = FeatureRegressor("gbm", max_rows=10**6).fit(other.slice(end=panel.dates[199]))
    d = FeatureRegressor("gbm", max_rows=10**6).fit(panel.slice(end=panel.dates[199]))
    assert not c.predict(other.slice(test.start)).equals(d.predict(panel.slice(test.start)))


def test_walk_forward_on_a_built_panel_equals_frames_in_parallel_workers(frames, one_thread):
    """A Panel in place of the frames (the caller may then drop them), and fold workers that
    map the panel's files: the same forecasts, in (model, code, date) order."""
    models = {k: v for k, v in panel_models(time_series=False, **{**TINY, "max_epochs": 1}).items()
              if k in ("transformer", "gbm", "low_vol_20d")}
    config = dict(train_days=200, retrain_every=30, min_stock_days=60, margin_days=80, progress=False)
    from_frames = walk_forward(frames, models, WalkForwardConfig(**config, n_jobs=2)).predictions
    from_panel = walk_forward(Panel.from_frames(frames), models, WalkForwardConfig(**config, n_jobs=1))
    pd.testing.assert_frame_equal(from_panel.predictions, from_frames)
    assert from_frames["model"].nunique() == 3 and from_frames["actual"].notna().mean() > 0.9
    resorted = (from_frames.reset_index().sort_values(["model", "code", "date"], kind="stable")
                .set_index("date"))
    pd.testing.assert_frame_equal(from_frames, resorted)
    with pytest.raises(ValueError, match="label='close' reads the frames"):
        walk_forward(Panel.from_frames(frames), models, WalkForwardConfig(**config, label="close"))


def test_training_budget_is_chosen_from_the_panel_size():
    from forecaster.models.panel.model import PanelTransformer

    m = PanelTransformer()
    early_stopped = {"loss": "pairwise", "max_epochs": 20, "val_fraction": 0.2, "average_last": 1}
    unbounded = {"epoch_stock_days": None, "stocks_per_batch": None, "days_per_batch": 8, **early_stopped}
    assert m.budget(60, 1200) == unbounded and m.budget(240, 1300) == unbounded  # as before
    market = {"epoch_stock_days": 600_000, "stocks_per_batch": 250, "days_per_batch": 32, "loss": "icir",
              "max_epochs": 12, "val_fraction": 0.0, "average_last": 6}
    assert m.budget(1294, 1200) == market
    assert m._net_config(20, 60).d_ff == 64 and m._net_config(20, 240).d_ff == 64  # as before
    assert m._net_config(20, 1294).d_ff == 128 and m.market_mode(1294) == "gate"
    assert PanelTransformer(d_ff=32)._net_config(20, 1294).d_ff == 32
    assert m.budget(400, 1200)["epoch_stock_days"] == 200_000  # 480,000 stock-days: bounded epochs
    assert m.budget(400, 1200)["stocks_per_batch"] is None  # whole days still fit a step
    set_by_hand = PanelTransformer(epoch_stock_days=50_000, stocks_per_batch=100, days_per_batch=4,
                                   max_epochs=3, val_fraction=0.1, average_last=1, loss="mse")
    assert set_by_hand.budget(1294, 1200) == {"epoch_stock_days": 50_000, "stocks_per_batch": 100,
                                              "days_per_batch": 4, "max_epochs": 3, "val_fraction": 0.1,
                                              "average_last": 1, "loss": "mse"}


def test_whole_market_features_for_the_transformer_and_the_feature_regressions_alike(
        frames, one_thread, monkeypatch):
    from forecaster.features.factors import DEFAULT_FEATURES, MARKET_ONLY_FEATURES
    from forecaster.models.panel.sizing import SizeRules

    panel = Panel.from_frames(frames)  # 30 stocks
    small = PanelTransformer(**TINY, n_seeds=1).fit(panel)
    gbm = FeatureRegressor("ridge").fit(panel)
    assert small.features_ == gbm.features_ and not set(MARKET_ONLY_FEATURES) & set(small.features_)
    assert set(small.features_) <= set(DEFAULT_FEATURES)
    # With the whole-market threshold below 30 stocks, both add the four market-only features.
    wide = SizeRules(market_above=10)
    monkeypatch.setattr(PanelTransformer, "rules", wide)
    monkeypatch.setattr(FeatureRegressor, "rules", wide)
    big = PanelTransformer(**TINY, n_seeds=1, loss="pairwise", epoch_stock_days=3000).fit(panel)
    gbm = FeatureRegressor("ridge").fit(panel)
    expected = small.features_[:17] + MARKET_ONLY_FEATURES + small.features_[17:]  # FEATURES' order
    assert big.features_ == gbm.features_ == expected
    assert big.nets_[0].input_proj.in_features == len(small.features_) + 4
    assert big.net_config_.market == "gate" and big.net_config_.d_ff == TINY["d_ff"]
