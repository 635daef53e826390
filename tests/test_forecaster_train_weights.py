"""Training weighted toward a universe (issue 51: ``[data] train_outside_weight``): the labels
of a training universe's members count 1, every other stock's ``w``. The losses take weights
(0/1 weights are the bool mask bit for bit; a weight of k counts a stock as k copies), a
step's mask carries them (its draw is as without them), ``w = 1`` fits exactly what the whole
market fits, ``w = 0`` what the members alone fit, and the option runs from the command line."""

from __future__ import annotations

import dataclasses
import html
import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from test_forecaster_universe import QUICK, _universe_file

from forecaster.app.cli import main
from forecaster.data import Panel, synthetic_panel, write_synthetic_panel
from forecaster.data.daily.folders import load_dir
from forecaster.data.market.universe import read_universe
from forecaster.evaluation.walkforward import WalkForwardConfig, fold_store
from forecaster.features.labels import tradeable_label
from forecaster.models.panel.baselines import FeatureRegressor
from forecaster.models.panel.losses import RANK_LOSSES, rank_loss
from forecaster.models.panel.model import PanelTransformer


def _scores_labels(days=4, stocks=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(days, stocks, generator=g)
    labels = 0.5 * scores + torch.randn(days, stocks, generator=g)
    mask = torch.rand(days, stocks, generator=g) > 0.25
    return scores, labels, mask


@pytest.mark.parametrize("loss", RANK_LOSSES)
def test_weights_of_one_and_zero_are_the_mask_bit_for_bit(loss):
    scores, labels, mask = _scores_labels()
    scores.requires_grad_(True)
    out = {}
    for name, m in (("bool", mask), ("float", mask.to(torch.float32))):
        value = rank_loss(loss, scores, labels, m, generator=torch.Generator().manual_seed(3))
        (grad,) = torch.autograd.grad(value, scores)
        out[name] = (value.detach(), grad)
    assert torch.equal(out["bool"][0], out["float"][0]) and torch.equal(out["bool"][1], out["float"][1])


@pytest.mark.parametrize("loss", ["mse", "ic", "icir"])
def test_a_weight_of_k_counts_a_stock_as_k_copies(loss):
    """The weighted daily correlation (and mean squared error) with integer weights equals the
    unweighted one over a day whose stocks are repeated that many times."""
    scores, labels, mask = _scores_labels(days=3, stocks=8, seed=1)
    k = torch.tensor([1, 2, 3, 1, 0, 2, 1, 4])
    weights = k.to(torch.float32).expand(3, 8) * mask
    idx = torch.arange(8).repeat_interleave(k)  # stock j, k[j] times
    weighted = rank_loss(loss, scores, labels, weights)
    repeated = rank_loss(loss, scores[:, idx], labels[:, idx], mask[:, idx])
    torch.testing.assert_close(weighted, repeated, rtol=1e-5, atol=1e-6)
    assert not torch.isclose(weighted, rank_loss(loss, scores, labels, mask))  # the weights counted


def test_labels_outside_are_kept_at_a_weight_and_masked_at_zero():
    panel = Panel.from_frames(synthetic_panel(n_stocks=10, n_days=120, seed=0))
    member = np.zeros((panel.n_days, panel.n_stocks), dtype=bool)
    member[:, :4] = True
    whole, _ = tradeable_label(panel, 1, "next_open")
    weighted = dataclasses.replace(panel, learn=np.where(member, 1.0, 0.25).astype(np.float32), _cache={})
    label, report = tradeable_label(weighted, 1, "next_open")
    np.testing.assert_array_equal(label, whole)  # nothing masked: the weights act in the fit
    assert report.masked.get("not in the training universe", 0) == 0
    assert weighted.learn_weights()[0, :5].tolist() == [1.0, 1.0, 1.0, 1.0, 0.25]
    narrow = dataclasses.replace(panel, learn=member, _cache={})
    label, report = tradeable_label(narrow, 1, "next_open")
    assert np.isnan(label[:, 4:]).all() and report.masked["not in the training universe"] > 0


def test_weight_one_fits_the_whole_market_and_a_weight_between_fits_something_else(one_thread):
    """Bit for bit: the Transformer and gbm with every weight 1 fit what they fit with no
    training universe; at 0.5 both fit otherwise; at 0 (float) the Transformer fits what the
    bool universe fits."""
    panel = Panel.from_frames(synthetic_panel(n_stocks=10, n_days=160, seed=3))
    member = np.zeros((panel.n_days, panel.n_stocks), dtype=bool)
    member[:, ::2] = True

    def with_learn(learn):
        return panel if learn is None else dataclasses.replace(panel, learn=learn, _cache={})

    def net(learn):
        model = PanelTransformer(window=8, d_model=16, n_heads=2, n_layers=1, max_epochs=2, n_seeds=1,
                                 device="cpu", random_state=0).fit(with_learn(learn))
        return list(model.nets_[0].state_dict().values())

    def gbm(learn):
        model = FeatureRegressor("gbm", random_state=0).fit(with_learn(learn))
        return model.predict(panel).to_numpy()

    ones = np.ones(member.shape, np.float32)
    half = np.where(member, 1.0, 0.5).astype(np.float32)
    zero = member.astype(np.float32)
    wide, one = net(None), net(ones)
    assert all(torch.equal(a, b) for a, b in zip(wide, one, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(wide, net(half), strict=True))
    assert all(torch.equal(a, b) for a, b in zip(net(member), net(zero), strict=True))
    np.testing.assert_array_equal(gbm(None), gbm(ones))
    assert not np.array_equal(gbm(None), gbm(half))


def test_a_resume_tells_weights_apart(tmp_path):
    panel = Panel.from_frames(synthetic_panel(n_stocks=4, n_days=60, seed=0))
    member = np.zeros((panel.n_days, panel.n_stocks), dtype=bool)
    member[:, :2] = True

    def key(learn, tmp):
        return fold_store(panel, {}, WalkForwardConfig(), tmp, learn).fingerprint["run"]["train_members"]

    weighted = [np.where(member, 1.0, w).astype(np.float32) for w in (0.3, 0.5)]
    keys = {key(learn, tmp_path / str(i)) for i, learn in enumerate([member, *weighted])}
    assert len(keys) == 3


def test_backtest_and_train_with_train_outside_weight(tmp_path, one_thread):
    data = tmp_path / "syn"
    write_synthetic_panel(data, n_stocks=12, n_days=260, seed=1)
    codes = sorted(p.name[:-4] for p in data.glob("*.csv"))
    idx = _universe_file(tmp_path, codes)
    for bad, why in ((["--train-outside-weight", "0.5"], "--train-universe: give --train-universe too"),
                     (["--train-universe", str(idx), "--train-outside-weight", "1.5"],
                      "--train-outside-weight must be within 0..1")):
        for command in ("backtest", "train"):
            res = CliRunner().invoke(main, [command, str(data), "--out", str(tmp_path / "no"), *bad])
            assert res.exit_code != 0 and why in res.output and "Traceback" not in res.output, res.output
            assert not (tmp_path / "no").exists()
    out = tmp_path / "r"
    res = CliRunner().invoke(main, ["backtest", str(data), "--out", str(out), "--universe", str(idx),
                                    "--train-universe", str(idx), "--train-outside-weight", "0.5", *QUICK])
    assert res.exit_code == 0, res.output
    assert 'train_outside_weight = 0.5' in (out / "experiment.toml").read_text()
    line = "on each day at weight 1 and every other stock's at weight 0.5"
    assert line in (out / "metrics.json").read_text()
    assert line in html.unescape((out / "report.html").read_text())
    small = ["--epochs", "1", "--n-seeds", "1", "--window", "8", "--d-model", "16", "--device", "cpu"]
    res = CliRunner().invoke(main, ["train", str(data), "--out", str(tmp_path / "t"), *small,
                                    "--train-universe", str(idx), "--train-outside-weight", "0.25"])
    assert res.exit_code == 0, res.output
    assert "every other stock's at weight 0.25" in res.output
    assert json.loads((tmp_path / "t" / "run.json").read_text())["train_outside_weight"] == 0.25
    # what the command fitted is what the Python API fits on the weighted panel
    cli = PanelTransformer.load(tmp_path / "t" / "model.pt", device="cpu")
    panel = Panel.from_frames(load_dir(data)[0])
    learn = read_universe(idx).learn_mask(panel.dates, panel.codes, 0.25)
    api = PanelTransformer(**cli.get_params()).fit(dataclasses.replace(panel, learn=learn, _cache={}))
    for a, b in zip(cli.nets_[0].state_dict().values(), api.nets_[0].state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)


def test_a_step_carries_each_stock_days_weight_into_the_loss():
    """What a step of the Transformer sees under a universe: a mask of each labelled
    stock-day's weight, whether the step draws some of the stocks or takes them all; the draw
    itself is the same as without weights (drawing only members, tried this stop, lost rank
    IC over the whole CSI 300 walk-forward)."""
    from forecaster.features.factors import feature_tensor
    from forecaster.features.processors import make_processor
    from forecaster.models.panel.dataset import build_sequences

    panel = Panel.from_frames(synthetic_panel(n_stocks=30, n_days=80, seed=2))
    member = np.zeros((panel.n_days, panel.n_stocks), dtype=bool)
    member[:, :12] = True
    names = ("ret_1d", "volatility_20d")
    processor = make_processor("rank").fit(feature_tensor(panel, names), panel.dates)
    days = np.arange(40, 44)
    plain = build_sequences(panel, names, processor, context=4, min_days=5, horizon=1)
    for learn, outside in ((member, 0.0), (np.where(member, 1.0, 0.5).astype(np.float32), 0.5)):
        data = build_sequences(dataclasses.replace(panel, learn=learn, _cache={}), names, processor,
                               context=4, min_days=5, horizon=1)
        for max_stocks in (8, None):
            rng = (np.random.default_rng(0), np.random.default_rng(0))
            _, _, mask, _, stocks = data.batch(days, max_stocks=max_stocks, rng=rng[0])
            _, _, labelled, _, same = plain.batch(days, max_stocks=max_stocks, rng=rng[1])
            assert torch.equal(stocks, same) and mask.dtype == torch.float32
            inside = torch.as_tensor(member[days][:, stocks.numpy()])
            want = labelled.to(torch.float32) * torch.where(inside, 1.0, outside)
            assert torch.equal(mask, want)
