"""The Qlib side of ``scripts/bench_qlib_zoo.py``: runs in a Python with ``pyqlib`` and ``torch``
(never this project's environment; see that script for the side venv), driven by it in a
subprocess, as ``scripts/check_qlib.py`` drives Qlib.

Two commands::

    python qlib_zoo_worker.py features --data DIR --handler Alpha360 --start D --end D --out F.pkl
    python qlib_zoo_worker.py fit --data DIR --model gru --features F.pkl --folds FOLDS.json \\
        --out pred.pkl [--max-epochs N] [--device auto|cpu|cuda] [--threads N]

``features`` computes a handler's raw features and Qlib's default label
(``Ref($close, -2)/Ref($close, -1) - 1``) once, on the point-in-time members of
``instruments/csi300.txt`` of DIR, with no processor; ``fit`` refits one model of the zoo on
each fold of FOLDS.json (``[{"train": [a, b], "valid": [c, d], "test": [e, f]}, ...]``) with its
benchmark's processors fitted on that fold's training days only, and writes the test
predictions of all folds as Qlib's ``pred.pkl`` (index ``datetime, instrument``, column
``score``, dated by signal day) and ``pred.json`` beside it (per fold: seconds, epochs run);
``features`` writes ``F.json`` beside its pickle (rows, stocks, the columns without a value).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

# The benchmark configurations of Qlib's zoo (github.com/microsoft/qlib, examples/benchmarks/:
# LightGBM/workflow_config_lightgbm_Alpha158.yaml, MLP/workflow_config_mlp_Alpha360.yaml,
# GRU/workflow_config_gru_Alpha360.yaml, ALSTM/workflow_config_alstm_Alpha360.yaml,
# Transformer/workflow_config_transformer_Alpha360.yaml,
# Localformer/workflow_config_localformer_Alpha360.yaml), written out here because the wheel
# does not ship them. Changed from them: LightGBM's num_threads (20 there) is the cores given;
# GPU is 0 on --device cuda and -1 (the CPU) otherwise; n_epochs / max_steps only under
# --max-epochs.
ALPHA360_PROCESSORS = {
    "infer": [{"class": "RobustZScoreNorm", "kwargs": {"fields_group": "feature", "clip_outlier": True}},
              {"class": "Fillna", "kwargs": {"fields_group": "feature"}}],
    "learn": [{"class": "DropnaLabel"}, {"class": "CSRankNorm", "kwargs": {"fields_group": "label"}}],
}
ALPHA158_PROCESSORS = {  # the Alpha158 handler's defaults, which the LightGBM benchmark keeps
    "infer": [],
    "learn": [{"class": "DropnaLabel"}, {"class": "CSZScoreNorm", "kwargs": {"fields_group": "label"}}],
}
RNN = {"d_feat": 6, "hidden_size": 64, "num_layers": 2, "dropout": 0.0, "n_epochs": 200, "lr": 1e-3,
       "early_stop": 20, "batch_size": 800, "metric": "loss", "loss": "mse"}
ZOO = {
    "lightgbm": ("Alpha158", "qlib.contrib.model.gbdt", "LGBModel",
                 {"loss": "mse", "colsample_bytree": 0.8879, "learning_rate": 0.2, "subsample": 0.8789,
                  "lambda_l1": 205.6999, "lambda_l2": 580.9768, "max_depth": 8, "num_leaves": 210}),
    "mlp": ("Alpha360", "qlib.contrib.model.pytorch_nn", "DNNModelPytorch",
            {"loss": "mse", "lr": 0.002, "optimizer": "adam", "max_steps": 8000, "batch_size": 4096,
             "pt_model_kwargs": {"input_dim": 360}}),
    "gru": ("Alpha360", "qlib.contrib.model.pytorch_gru", "GRU", dict(RNN)),
    "alstm": ("Alpha360", "qlib.contrib.model.pytorch_alstm", "ALSTM", {**RNN, "rnn_type": "LSTM"}),
    "transformer": ("Alpha360", "qlib.contrib.model.pytorch_transformer", "TransformerModel",
                    {"d_feat": 6, "seed": 0}),
    "localformer": ("Alpha360", "qlib.contrib.model.pytorch_localformer", "LocalformerModel",
                    {"d_feat": 6, "seed": 0}),
}
CPU_EPOCHS = 2  # --max-epochs when none is given and the device is the CPU: full runs take days there


def _init(data: str, threads: int) -> None:
    import qlib

    qlib.init(provider_uri=data, region="cn", kernels=threads)


def features(args) -> None:
    """The handler's raw features and label over ``start..end``, pickled once for every model."""
    from qlib.contrib.data.handler import Alpha158, Alpha360
    from qlib.data.dataset.handler import DataHandler

    _init(args.data, args.threads)
    handler = {"Alpha158": Alpha158, "Alpha360": Alpha360}[args.handler]
    h = handler(instruments=args.instruments, start_time=args.start, end_time=args.end,
                infer_processors=[], learn_processors=[])
    frame = h.fetch(col_set=DataHandler.CS_RAW)  # the columns keep their group: feature, label
    frame.to_pickle(args.out)
    account = describe(frame)
    Path(args.out).with_suffix(".json").write_text(json.dumps(account, indent=1))
    print(json.dumps(account))


def describe(frame) -> dict:
    """Rows, stocks, and the feature columns without a single value (a folder without ``$vwap``
    leaves Alpha360's 60 VWAP columns and Alpha158's VWAP0 empty: Fillna makes them 0, LightGBM
    reads NaN), so the report can say so."""
    empty = frame["feature"].isna().all()
    return {"rows": len(frame), "columns": int(frame["feature"].shape[1]),
            "instruments": int(frame.index.get_level_values("instrument").nunique()),
            "all_nan_columns": [str(c) for c in empty[empty].index]}


def _max_epochs(given: int | None, device: str) -> int:
    """0: the benchmark's own epochs."""
    if given is not None:
        return given
    return 0 if device == "cuda" else CPU_EPOCHS


def _model(name: str, device: str, threads: int, cap: int, n_train: int):
    import importlib

    _, module, cls, kwargs = ZOO[name]
    kwargs = json.loads(json.dumps(kwargs))  # a copy per fold
    if name == "lightgbm":
        kwargs["num_threads"] = threads
    else:
        kwargs["GPU"] = 0 if device == "cuda" else -1
        if "n_jobs" in _params(module, cls):
            kwargs["n_jobs"] = threads
    if name == "mlp":  # the default schedule, which 0.9.7 fails to build on torch >= 2.10 (see _plateau)
        kwargs["scheduler"] = _plateau
    if cap and name == "mlp":  # MLP counts steps of one batch each: an epoch is n_train / batch steps
        kwargs["max_steps"] = min(kwargs["max_steps"], cap * math.ceil(n_train / kwargs["batch_size"]))
    elif cap and name != "lightgbm":
        kwargs["n_epochs"] = min(kwargs.get("n_epochs", _params(module, cls)["n_epochs"]), cap)
    return getattr(importlib.import_module(module), cls)(**kwargs), kwargs


def _plateau(optimizer):
    """DNNModelPytorch's ``scheduler="default"``: pyqlib 0.9.7 compares torch versions as strings
    ("2.13.0" <= "2.6.0") and passes ``verbose``, which torch 2.7 removed; the same schedule
    without it."""
    import torch

    return torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="min", factor=0.5, patience=10, threshold=0.0001, threshold_mode="rel", cooldown=0,
        min_lr=0.00001, eps=1e-08)


def _params(module: str, cls: str) -> dict:
    import importlib
    import inspect

    sig = inspect.signature(getattr(importlib.import_module(module), cls).__init__)
    return {k: p.default for k, p in sig.parameters.items()}


def fit(args) -> None:
    """Every fold: the benchmark's handler on the stored features, the model fitted, the test
    year predicted; all folds' predictions into one pred.pkl."""
    import numpy as np
    import pandas as pd
    import torch
    from qlib.contrib.data.handler import check_transform_proc
    from qlib.data.dataset import DatasetH
    from qlib.data.dataset.handler import DataHandlerLP
    from qlib.data.dataset.loader import StaticDataLoader
    from qlib.workflow import R

    _init(args.data, args.threads)
    torch.set_num_threads(args.threads)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    cap = _max_epochs(args.max_epochs, device)
    handler_name = ZOO[args.model][0]
    procs = ALPHA158_PROCESSORS if handler_name == "Alpha158" else ALPHA360_PROCESSORS
    raw = pd.read_pickle(args.features)
    folds = json.loads(Path(args.folds).read_text())
    preds, account = [], []
    out = Path(args.out)
    with R.start(experiment_name=f"zoo_{args.model}", uri=f"file:{out.parent / 'mlruns'}"):
        for i, fold in enumerate(folds):
            start = time.perf_counter()
            # Qlib's models shuffle with the global generators; the benchmark seeds only the
            # transformers (their seed: 0 still applies): one seed per fold here
            np.random.seed(i)  # noqa: NPY002
            torch.manual_seed(i)
            first, last = fold["train"][0], fold["test"][1]
            days = raw.index.get_level_values("datetime")
            frame = raw[(days >= pd.Timestamp(first)) & (days <= pd.Timestamp(last))]
            handler = DataHandlerLP(
                data_loader=StaticDataLoader(frame),
                infer_processors=check_transform_proc(procs["infer"], *fold["train"]),
                learn_processors=check_transform_proc(procs["learn"], *fold["train"]),
            )
            dataset = DatasetH(handler, segments={k: tuple(fold[k]) for k in ("train", "valid", "test")})
            n_train = len(dataset.prepare("train", col_set="label", data_key=DataHandlerLP.DK_L))
            model, kwargs = _model(args.model, device, args.threads, cap, n_train)
            evals: dict = {}
            model.fit(dataset, evals_result=evals)
            pred = model.predict(dataset, segment="test")
            preds.append(pred)
            curve = evals.get("valid", evals.get("train", []))
            if isinstance(curve, dict):  # LightGBM: {metric: [per round]}
                curve = next(iter(curve.values()), [])
            account.append({"fold": i, **{k: fold[k] for k in ("train", "valid", "test")},
                            "seconds": time.perf_counter() - start, "n_train": n_train, "n_test": len(pred),
                            "epochs_run": len(curve), "epochs_limit": kwargs.get("n_epochs", kwargs.get(
                                "max_steps")), "device": device})
            print(json.dumps(account[-1]), flush=True)
    score = pd.concat(preds).to_frame("score").sort_index()
    if score.index.duplicated().any():
        twice = int(score.index.duplicated().sum())
        sys.exit(f"{args.folds}: folds' test segments overlap ({twice} rows twice)")
    score.to_pickle(out)
    out.with_suffix(".json").write_text(json.dumps({"model": args.model, "handler": handler_name,
                                                    "max_epochs": cap, "device": device, "folds": account},
                                                   indent=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("features")
    f.add_argument("--handler", choices=("Alpha158", "Alpha360"), required=True)
    f.add_argument("--start", required=True)
    f.add_argument("--end", required=True)
    f.add_argument("--instruments", default="csi300")
    m = sub.add_parser("fit")
    m.add_argument("--model", choices=sorted(ZOO), required=True)
    m.add_argument("--features", required=True)
    m.add_argument("--folds", required=True)
    m.add_argument("--max-epochs", type=int, default=None)
    m.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    for q in (f, m):
        q.add_argument("--data", required=True)
        q.add_argument("--out", required=True)
        # torch and LightGBM threads, and Qlib's loader processes; more threads than free cores
        # stall torch (20 times slower on 2 busy cores)
        q.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    {"features": features, "fit": fit}[args.command](args)


if __name__ == "__main__":
    main()
