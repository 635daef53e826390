"""Qlib itself reads what this toolkit writes (needs a second Python with ``pyqlib``, e.g.
``python3 -m venv /tmp/qlibenv && /tmp/qlibenv/bin/pip install pyqlib``; Qlib pins its own
numpy/pandas, so it does not share this project's environment).

Writes ``../shared/data/ashare`` as a Qlib data folder (:func:`forecaster.data.write_qlib`) and
ridge-on-features walk-forward scores as the prediction frame ``export-qlib`` writes, then, in
the Qlib interpreter, reads the folder with ``qlib.data.D.features`` and scores the frame with
``qlib.contrib.eva.alpha.calc_ic``. Prints::

    ours ic=+0.0000 rank_ic=+0.0000 days=N
    qlib version=V instruments=N rows=N/N max_rel_err_close=E max_rel_err_volume=E
    qlib ic=+0.0000 rank_ic=+0.0000 days=N
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]

QLIB_SIDE = r"""
import sys, pandas as pd, qlib
from qlib.data import D
from qlib.contrib.eva.alpha import calc_ic
work = sys.argv[1]
qlib.init(provider_uri=f"{work}/data", region="cn")
df = D.features(D.instruments("all"), ["$close", "$volume", "$factor"], start_time="1990-01-01",
                end_time="2100-01-01").reset_index()
df["instrument"] = df["instrument"].str.upper()
df = df.set_index(["instrument", "datetime"])
raw = pd.read_pickle(f"{work}/raw.pkl")
common = df.index.intersection(raw.index)
close = df.loc[common, "$close"] / df.loc[common, "$factor"]
err_close = ((close - raw.loc[common, "close"]).abs() / raw.loc[common, "close"]).max()
volume = df.loc[common, "$volume"] * df.loc[common, "$factor"]
traded = raw.loc[common, "volume"].where(raw.loc[common, "volume"] > 0)
err_volume = ((volume - traded).abs() / traded).max()
print(f"qlib version={qlib.__version__} instruments={df.index.get_level_values(0).nunique()} "
      f"rows={len(common)}/{len(raw)} max_rel_err_close={err_close:.1e} max_rel_err_volume={err_volume:.1e}")
both = pd.read_pickle(f"{work}/pred.pkl").join(pd.read_pickle(f"{work}/label.pkl"), how="inner").dropna()
ic, ric = calc_ic(both["score"], both["actual"])
print(f"qlib ic={ic.mean():+.4f} rank_ic={ric.mean():+.4f} days={len(ric)}")
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--qlib-python", default="/tmp/qlibenv/bin/python", help="a Python with pyqlib")
    p.add_argument("--data", default=str(REPO.parent / "shared/data/ashare"))
    args = p.parse_args()
    from forecaster.data import load_dir, write_qlib
    from forecaster.data.qlib.conventions import qlib_code
    from forecaster.data.qlib.writer import qlib_predictions
    from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
    from forecaster.metrics import daily_ic, ic_summary
    from forecaster.models.panel.baselines import FeatureRegressor

    frames = load_dir(args.data).frames
    with tempfile.TemporaryDirectory() as work:
        write_qlib(frames, f"{work}/data")
        raw = pd.concat({qlib_code(c): f[["close", "volume"]] for c, f in frames.items()},
                        names=["instrument", "datetime"])
        raw.to_pickle(f"{work}/raw.pkl")
        config = WalkForwardConfig(train_days=500, retrain_every=126, n_jobs=1, progress=False)
        pred = walk_forward(frames, {"ridge": FeatureRegressor("ridge")}, config).predictions
        qlib_predictions(pred, "ridge").to_pickle(f"{work}/pred.pkl")
        label = pred.reset_index().rename(columns={"date": "datetime"})
        label["instrument"] = label["code"].map(qlib_code)
        label.set_index(["datetime", "instrument"])[["actual"]].to_pickle(f"{work}/label.pkl")
        scores = pred.pivot_table(index="date", columns="code", values="forecast")
        actual = pred.pivot_table(index="date", columns="code", values="actual")
        ic = ic_summary(daily_ic(scores, actual, method="pearson"))
        rank = ic_summary(daily_ic(scores, actual, method="spearman"))
        print(f"ours ic={ic['mean_ic']:+.4f} rank_ic={rank['mean_ic']:+.4f} days={rank['n_days']}",
              flush=True)
        out = subprocess.run([args.qlib_python, "-c", QLIB_SIDE, work], capture_output=True, text=True)
        print("\n".join(line for line in out.stdout.splitlines() if line.startswith("qlib ")))
        if out.returncode:
            raise SystemExit(f"the Qlib side failed:\n{out.stderr[-2000:]}")


if __name__ == "__main__":
    main()
