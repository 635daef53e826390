"""The forecaster: leakage, persistence, determinism, probabilistic outputs, errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.exceptions import NotFittedError

from forecaster import CausalTransformerForecaster
from forecaster.features.series import make_features
from forecaster.features.windows import shift_targets, sliding_windows
from forecaster.models.stock.network import CausalTransformerNet, NetConfig
from seq2seq.core import CheckpointError

TINY = dict(window=20, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_epochs=2, batch_size=64,
            random_state=0, progress=False)


@pytest.fixture(scope="module")
def frame(synthetic_frame):
    return synthetic_frame.iloc[:400]


@pytest.fixture(scope="module")
def fitted(frame):
    return CausalTransformerForecaster(**TINY).fit(frame)


def test_windows_are_views_and_targets_align():
    x = torch.arange(10.0).unsqueeze(1)
    w = sliding_windows(x, 4)
    assert w.shape == (7, 4, 1) and w.data_ptr() == x.data_ptr()  # no copy
    assert w[2, :, 0].tolist() == [2, 3, 4, 5]
    y, ok = shift_targets(torch.arange(6.0), torch.tensor([1, 1, 0, 1, 1, 1], dtype=torch.bool), 2)
    assert y.tolist() == [2, 3, 4, 5, 0, 0]
    assert ok.tolist() == [False, True, True, True, False, False]


def test_network_projects_inputs_and_is_causal():
    torch.manual_seed(0)
    net = CausalTransformerNet(NetConfig(n_features=3, n_outputs=1, window=12, d_model=16,
                                         n_heads=2, d_ff=32, dropout=0.0)).eval()
    assert net.input_proj.in_features == 3 and net.input_proj.out_features == 16
    x = torch.randn(2, 12, 3)
    base = net(x)
    x2 = x.clone()
    x2[:, 7:] += 5
    assert torch.equal(net(x2)[:, :7], base[:, :7])
    # Forecasting from the end of the window alone gives the last position of the full output.
    torch.testing.assert_close(net(x, last_only=True), base[:, -1:], atol=1e-6, rtol=1e-5)


def test_predict_is_the_last_position_of_each_window(frame, fitted):
    x = fitted._scaled(fitted._inputs(frame)[0])  # the scaled features predict feeds the net
    with torch.no_grad():  # every window but the last (its target day is not in the frame)
        full = fitted.net_(sliding_windows(x, TINY["window"])[:-1])[:, -1, 0]
    mu, sd = fitted.target_mean_, fitted.target_scale_
    np.testing.assert_allclose(fitted.predict(frame).to_numpy(), full.numpy() * sd + mu, rtol=1e-5, atol=1e-8)


def test_predictions_do_not_see_the_future(frame, fitted):
    base = fitted.predict(frame)
    assert base.index.name == "date" and base.index.is_monotonic_increasing
    # The first forecast is for the day after the first full window.
    assert base.index[0] == frame.index[TINY["window"]]
    for day in (frame.index[150], frame.index[300]):
        changed = frame.copy()
        later = changed.index >= day  # day d itself included
        changed.loc[later, ["open", "high", "low", "close"]] *= np.linspace(0.5, 2.0, later.sum())[:, None]
        pred = fitted.predict(changed)
        pd.testing.assert_series_equal(pred.loc[:day], base.loc[:day])
        assert not np.allclose(pred.loc[day:].iloc[1:], base.loc[day:].iloc[1:])


def test_scaler_sees_only_the_training_segment(frame, fitted):
    feats = make_features(frame, ("log_return",))
    train = feats.loc[: fitted.train_end_].to_numpy()
    np.testing.assert_allclose(fitted.scaler_.mean_, train.mean(axis=0))
    np.testing.assert_allclose(fitted.scaler_.scale_, train.std(axis=0))
    assert fitted.train_end_ < frame.index[-1]
    # Rewriting everything after the cut-off leaves the scaler alone.
    changed = frame.copy()
    after = changed.index > fitted.train_end_
    changed.loc[after, ["open", "high", "low", "close"]] *= 3.0
    refit = CausalTransformerForecaster(**TINY).fit(changed)
    np.testing.assert_array_equal(refit.scaler_.mean_, fitted.scaler_.mean_)
    assert refit.target_mean_ == fitted.target_mean_


def test_same_seed_same_predictions(frame, fitted):
    again = CausalTransformerForecaster(**TINY).fit(frame)
    pd.testing.assert_series_equal(again.predict(frame), fitted.predict(frame))
    other = CausalTransformerForecaster(**{**TINY, "random_state": 1}).fit(frame)
    assert not np.allclose(other.predict(frame), fitted.predict(frame))


def test_save_load_round_trip(frame, fitted, tmp_path):
    path = fitted.save(tmp_path / "model.pt")
    loaded = CausalTransformerForecaster.load(path)
    pd.testing.assert_series_equal(loaded.predict(frame), fitted.predict(frame))
    pd.testing.assert_series_equal(loaded.predict_next(frame), fitted.predict_next(frame))
    assert loaded.get_params() == fitted.get_params()
    assert loaded.train_end_ == fitted.train_end_


def test_bad_checkpoints_give_clear_errors(sealed, tmp_path, fitted):
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="corrupt"):
        CausalTransformerForecaster.load(corrupt)
    path = fitted.save(tmp_path / "ok.pt")
    data = torch.load(path, weights_only=True)
    data["version"] = 99
    torch.save(sealed(data), tmp_path / "future.pt")
    with pytest.raises(CheckpointError, match="version 99"):
        CausalTransformerForecaster.load(tmp_path / "future.pt")
    data["version"], data["kind"] = 1, "seq2seq"
    torch.save(sealed(data), tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="expected 'forecaster"):
        CausalTransformerForecaster.load(tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="no such"):
        CausalTransformerForecaster.load(tmp_path / "missing.pt")


def test_predict_next_is_the_day_after(frame, fitted):
    nxt = fitted.predict_next(frame)
    assert len(nxt) == 1 and nxt.index[0] > frame.index[-1]
    # Equal to the forecast the same window makes inside predict on a longer frame.
    longer = fitted.predict(pd.concat([frame, frame.iloc[-1:].set_axis([nxt.index[0]])]))
    assert longer.iloc[-1] == pytest.approx(nxt.iloc[0], abs=1e-7)


@pytest.mark.parametrize("loss, columns", [("gaussian", ["mean", "scale"]),
                                           ("quantile", ["q0.1", "q0.5", "q0.9"])])
def test_probabilistic_losses(frame, loss, columns):
    model = CausalTransformerForecaster(**{**TINY, "loss": loss}).fit(frame)
    pred = model.predict(frame)
    assert list(pred.columns) == columns
    if loss == "gaussian":
        assert (pred["scale"] > 0).all()
    else:
        assert (pred["q0.1"] <= pred["q0.5"]).all() and (pred["q0.5"] <= pred["q0.9"]).all()


@pytest.mark.parametrize("positional", ["learned", "rotary"])
def test_positional_options_train(frame, positional):
    model = CausalTransformerForecaster(**{**TINY, "positional": positional, "max_epochs": 1})
    assert np.isfinite(model.fit(frame).predict(frame)).all()


def test_extra_features(frame):
    model = CausalTransformerForecaster(**{**TINY, "features": ("log_return", "range", "gap",
                                                                "volume_change")})
    model.fit(frame)
    assert model.n_features_in_ == 4 and model.net_.input_proj.in_features == 4


def test_errors(frame):
    with pytest.raises(NotFittedError, match="not fitted"):
        CausalTransformerForecaster().predict(frame)
    with pytest.raises(ValueError, match="window must be a positive integer"):
        CausalTransformerForecaster(window=0).fit(frame)
    with pytest.raises(ValueError, match="loss must be one of"):
        CausalTransformerForecaster(loss="mae").fit(frame)
    with pytest.raises(ValueError, match="divisible"):
        CausalTransformerForecaster(**{**TINY, "d_model": 10, "n_heads": 4}).fit(frame)
    with pytest.raises(ValueError, match="too little data"):
        CausalTransformerForecaster(**{**TINY, "window": 399}).fit(frame)
    # sklearn convention: __init__ stores keywords untouched, even invalid ones.
    assert CausalTransformerForecaster(window=-5).window == -5


def test_flipped_bytes_in_a_forecaster_checkpoint_stop_with_corrupt(tmp_path, fitted):
    path = fitted.save(tmp_path / "model.pt")
    raw = bytearray(path.read_bytes())
    mid = len(raw) // 2
    raw[mid:mid + 14] = bytes(b ^ 0xFF for b in raw[mid:mid + 14])
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=r"model\.pt: checkpoint is corrupt"):
        CausalTransformerForecaster.load(path)
