"""A pickle a user is handed is data, never code (issue 70): ``score PRED.pkl`` and
``--resume``'s fold files are read by an unpickler that rebuilds frames and arrays only, and a
resume reads only the fold files its run wrote."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_forecaster_trust import _invoke

from forecaster.data import synthetic_panel, write_synthetic_panel
from forecaster.evaluation.fold_store import FoldOutput, FoldStore, ResumeError
from forecaster.evaluation.safe_pickle import UnsafePickle, load_pickle, loads_restricted
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.models.panel.baselines import FactorScore
from seq2seq.core import atomic_write
from seq2seq.core.outputs import check_output

DATA = Path(__file__).parent / "data"


class _Payload:
    """Pickles as a call of ``exec`` that leaves a marker file, then returns a proper frame
    (the case that printed a normal report with rc 0)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        code = (f"__import__('pathlib').Path({str(self.marker)!r}).write_text('ran'); "
                "import pandas as pd; result = pd.DataFrame()")
        return (exec, (code,))


def _frames():
    days = pd.date_range("2021-01-04", periods=3, freq="B")
    idx = pd.MultiIndex.from_product([days, ["SH600000", "SZ000001"]],
                                     names=["datetime", "instrument"])
    return [
        pd.DataFrame({"score": np.arange(6.0, dtype="float32")}, index=idx),
        pd.Series(np.linspace(-1, 1, 6), index=idx, name="score"),
        pd.DataFrame({"date": pd.date_range("2021-01-04", periods=3, freq="B"), "code": ["a", "b", "c"],
                      "score": [1.0, np.nan, 3.0]}),
        pd.DataFrame({"c": pd.Categorical(["a", "b"]), "o": np.array(["x", 1], dtype=object),
                      "i": pd.array([1, None], dtype="Int64"), "s": pd.array(["a", None], dtype="string"),
                      "t": pd.date_range("2021", periods=2, tz="Asia/Shanghai"),
                      "d": pd.to_timedelta([1, 2], unit="D")}),
    ]


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_frames_of_every_common_kind_round_trip(protocol):
    for obj in _frames():
        back = loads_restricted(pickle.dumps(obj, protocol=protocol))
        assert type(back) is type(obj) and back.equals(obj)


def test_a_qlib_pred_pkl_of_pandas_2_reads_as_pandas_reads_it():
    # Written by pandas 2.0.3 (numpy 1.x) as Qlib's recorders write pred.pkl.
    got = load_pickle(DATA / "qlib_pred_pandas2.pkl")
    pd.testing.assert_frame_equal(got, pd.read_pickle(DATA / "qlib_pred_pandas2.pkl"))
    assert got.index.names == ["datetime", "instrument"] and got["score"].dtype == np.float32
    assert got.loc[(pd.Timestamp("2021-01-05"), "SH600000"), "score"] == pytest.approx(0.3)


def test_code_in_a_pickle_is_refused_before_it_runs(tmp_path):
    marker = tmp_path / "marker"
    with pytest.raises(UnsafePickle, match="builtins.exec"):
        loads_restricted(pickle.dumps(_Payload(marker)))
    assert not marker.exists()
    # getattr only for what rebuilds a time zone: not a route to a frame's methods
    with pytest.raises(UnsafePickle, match="getattr\\(DataFrame, 'to_pickle'\\)"):
        loads_restricted(b"cbuiltins\ngetattr\n(cpandas\nDataFrame\nS'to_pickle'\ntR.")


def test_score_refuses_a_pickle_that_runs_code(tmp_path):
    write_synthetic_panel(tmp_path / "data", n_stocks=4, n_days=60, seed=2)
    marker, pred = tmp_path / "marker", tmp_path / "pred.pkl"
    pred.write_bytes(pickle.dumps(_Payload(marker)))
    res = _invoke("score", pred, tmp_path / "data", "--out", tmp_path / "r")
    assert res.exit_code == 1 and not marker.exists(), res.output
    line = res.output.strip().splitlines()[-1]
    assert "pred.pkl: refused: a pickle can run code" in line and "builtins.exec" in line
    assert "Parquet or CSV" in line and "Traceback" not in res.output
    assert not (tmp_path / "r").exists()
    res = _invoke("score", "--help")
    assert "pickle can run code" in " ".join(res.output.split())


def _run(tmp_path):
    frames = synthetic_panel(n_stocks=6, n_days=260, seed=1)
    models = {"low_vol": FactorScore("low_vol_20d")}
    config = WalkForwardConfig(train_days=150, retrain_every=40, min_stock_days=60, n_jobs=1, progress=False)
    folds = check_output(tmp_path / "rep").claim() / "folds"  # a report folder, with its manifest
    walk_forward(frames, models, config, checkpoint_dir=folds)
    resume = WalkForwardConfig(**{**config.__dict__, "resume": True})
    return frames, models, resume, folds


def test_resume_reads_only_the_fold_files_its_run_wrote(tmp_path):
    frames, models, resume, folds = _run(tmp_path)
    assert walk_forward(frames, models, resume, checkpoint_dir=folds).n_resumed >= 2
    victim = sorted(folds.glob("fold_*.json"))[0]
    marker = tmp_path / "marker"
    victim.write_bytes(pickle.dumps(_Payload(marker)))  # swapped, not recorded
    with pytest.raises(ResumeError, match=f"{victim.name} is not the file the run wrote"):
        walk_forward(frames, models, resume, checkpoint_dir=folds)
    # a digest forged alongside (written through the manifest): still never run (no pickle is read)
    with atomic_write(victim) as f:
        f.write(pickle.dumps(_Payload(marker)))
    with pytest.raises(ResumeError, match=f"{victim.name}: is not JSON"):
        walk_forward(frames, models, resume, checkpoint_dir=folds)
    assert not marker.exists()


def test_a_resume_never_mixes_folds_of_another_version(tmp_path):
    frames, models, resume, folds = _run(tmp_path)
    run = folds / "run.json"
    stored = json.loads(run.read_text())
    assert set(stored["code"]) == {"version", "source"}
    stored["code"]["source"] = "0" * 16
    with atomic_write(run, "w") as f:
        json.dump(stored, f)
    with pytest.raises(ResumeError, match="another version of forecaster"):
        walk_forward(frames, models, resume, checkpoint_dir=folds)


def test_warm_states_survive_the_fold_file(tmp_path):
    import torch

    store = FoldStore(check_output(tmp_path / "rep").claim() / "folds", {"data": "x", "run": {}})
    store.start(resume=False)
    state = {"nets": [{"w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
                       "h": torch.ones(2, dtype=torch.bfloat16)}], "features": ("a", "b"), "blend": None}
    rows = pd.DataFrame({"code": ["a"], "model": ["m"], "fold": [3], "forecast": [0.5]},
                        index=pd.to_datetime(["2021-01-04"]))
    store.save(FoldOutput(3, [rows], states={"transformer": state}))
    back = store.start(resume=True)[3]
    nets = back.states["transformer"]["nets"][0]
    assert torch.equal(nets["w"], state["nets"][0]["w"]) and nets["h"].dtype == torch.bfloat16
    assert back.states["transformer"]["features"] == ("a", "b")
