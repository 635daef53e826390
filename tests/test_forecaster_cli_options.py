"""Every option works from every entry point: each option of ``backtest``, ``train`` and
``run`` set once through the CLI reaches the resolved experiment with its type."""

from __future__ import annotations

import datetime
import json
import sys

import pytest
from click.testing import CliRunner

from forecaster.app.cli import backtest, main, train
from forecaster.app.experiment import read_toml, resolve, to_toml
from forecaster.app.options import raw_sections
from forecaster.data import write_synthetic_panel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# option -> (what the command line says, what the resolved experiment must hold)
VALUES = {
    "features__names": ("ret_1d,volatility_20d", ("ret_1d", "volatility_20d")),
    "features__blend": ("return_20d,range", ("return_20d", "range")),
    "model__window": ("12", 12),
    "model__norm": ("rank", "rank"),
    "model__label_norm": ("zscore", "zscore"),
    "model__drop_tails": ("0.05", 0.05),
    "model__d_model": ("16", 16),
    "model__n_heads": ("2", 2),
    "model__n_layers": ("1", 1),
    "model__d_ff": ("48", 48),
    "model__dropout": ("0.2", 0.2),
    "model__positional": ("none", "none"),
    "model__cross_stock": (True, True),
    "model__market": ("gate", "gate"),
    "model__loss": ("listnet", "listnet"),
    "model__icir_floor": ("0.6", 0.6),  # not the default, so reaching the run is seen
    "model__max_epochs": ("3", 3),
    "model__days_per_batch": ("4", 4),
    "model__lr": ("0.002", 0.002),
    "model__weight_decay": ("0.02", 0.02),
    "model__patience": ("2", 2),
    "model__val_fraction": ("0.25", 0.25),
    "model__average_last": ("3", 3),
    "model__n_seeds": ("3", 3),
    "model__blend_seeds": ("2", 2),
    "model__preset": ("market", "market"),
    "model__name": ("transformer", "transformer"),
    "model__epoch_stock_days": ("200000", 200000),
    "model__stocks_per_batch": ("20", 20),
    "model__warm_epochs": ("2", 2),
    "model__device": ("cpu", "cpu"),
    "model__precision": ("bfloat16", "bfloat16"),
    "model__random_state": ("7", 7),
    "model__attention_dropout": ("0.1", 0.1),
    "model__norm_first": (False, False),
    "model__batch_size": ("64", 64),
    "model__train_stride": ("2", 2),
    "model__lr_step_size": ("5", 5),
    "model__lr_gamma": ("0.7", 0.7),
    "model__grad_clip": ("0.5", 0.5),
    "models__baselines": (False, False),
    "models__seed_recipe": (True, True),
    "models__per_stock": (True, True),
    "models__time_series": (False, False),
    "walk_forward__scheme": ("rolling", "rolling"),
    "walk_forward__train_days": ("300", 300),
    "walk_forward__retrain_every": ("21", 21),
    "walk_forward__purge": ("3", 3),
    "walk_forward__step": ("1", 1),
    "walk_forward__horizon": ("2", 2),
    "walk_forward__min_stock_days": ("60", 60),
    "walk_forward__margin_days": ("140", 140),
    "run__n_jobs": ("1", 1),
    "run__threads_per_task": ("2", 2),
    "walk_forward__start": ("2018-06-01", datetime.date(2018, 6, 1)),
    "walk_forward__end": ("2019-06-28", datetime.date(2019, 6, 28)),
    "walk_forward__label": ("close", "close"),
    "run__resume": (True, None),
    "run__backend": ("ray", "ray"),
    "run__address": ("10.0.0.1:6379", "10.0.0.1:6379"),
    "walk_forward__warm_start": ("2", 2),
    "strategy__rule": ("top_k", "top_k"),
    "strategy__top_k": ("4", 4),
    "strategy__n_drop": ("2", 2),
    "strategy__weighting": ("rank", "rank"),
    "strategy__mode": ("long_short", "long_short"),
    "strategy__threshold": ("0.001", 0.001),
    "strategy__top_k_above_threshold": (True, True),
    "strategy__rebalance_every": ("5", 5),
    "strategy__exclude_st": (False, False),
    "strategy__tracking_error": ("0.03", 0.03),
    "strategy__active_bound": ("0.03", 0.03),
    "strategy__style_bound": ("0.6", 0.6),
    "strategy__max_turnover": ("0.2", 0.2),
    "strategy__alpha_ic": ("0.04", 0.04),
    "strategy__risk_aversion": ("5", 5.0),
    "strategy__alpha_shape": ("rank", "rank"),
    "strategy__alpha_halflife": ("3", 3.0),
    "strategy__trade_aversion": ("2", 2.0),
    "strategy__industries": ("ind.csv", "ind.csv"),
    "strategy__industry_level": ("2", 2),
    "strategy__industry_min_members": ("4", 4),
    "strategy__industry_bound": ("0.05", 0.05),
    "costs__commission_rate": ("0.0003", 0.0003),
    "costs__min_commission": ("1.0", 1.0),
    "costs__stamp_duty_before": ("0.002", 0.002),
    "costs__stamp_duty_after": ("0.001", 0.001),
    "costs__stamp_duty_change": ("2023-09-01", datetime.date(2023, 9, 1)),
    "costs__transfer_fee_rate": ("0.00002", 0.00002),
    "costs__slippage_bps": ("3", 3.0),
    "market__lot_size": ("200", 200),
    "market__corporate_actions": ("cash", "cash"),
    "backtest__capital": ("500000", 500000.0),
    "backtest__execution": ("close", "close"),
    "backtest__rebalance_tolerance": ("0.2", 0.2),
    "backtest__predictions_format": ("parquet", "parquet"),
    "backtest__benchmark_weights": ("equal", "equal"),
    "backtest__dividend_data": ("dividends.csv", "dividends.csv"),
    "data__on_bad": ("drop", "drop"),
    "data__strict": (True, True),
    "data__index_constituents": (True, True),
    "data__cache": (True, True),
    "data__trust_code_column": (True, True),
    "data__intraday": ("minute_bars", "minute_bars"),
    "data__universe": ("csi300", "csi300"),
    "data__train_universe": ("csi300", "csi300"),
    "data__train_outside_weight": ("0.5", 0.5),
    "data__max_file_mb": ("100", 100.0),
    "data__synthetic_stocks": ("40", 40),
    "data__synthetic_days": ("500", 500),
    "data__synthetic_ic": ("0.03", 0.03),
    "data__synthetic_seed": ("5", 5),
}
PANEL_ONLY = {
    "blend",
    "norm",
    "label_norm",
    "drop_tails",
    "cross_stock",
    "market",
    "days_per_batch",
    "n_seeds",
    "blend_seeds",
    "preset",
    "epoch_stock_days",
    "stocks_per_batch",
    "warm_epochs",
    "precision",
    "average_last",
    "icir_floor",
}
ONE_STOCK_ONLY = {
    "attention_dropout",
    "norm_first",
    "batch_size",
    "train_stride",
    "lr_step_size",
    "lr_gamma",
    "grad_clip",
}


def _args(command, names) -> list[str]:
    args = []
    for param in command.params:
        if param.name not in names:
            continue
        text = VALUES[param.name][0]
        if isinstance(text, bool):
            args.append(param.opts[0] if text else param.secondary_opts[0])
        else:
            args += [param.opts[0], text]
    return args


def _options(command):
    return {p.name for p in command.params if "__" in p.name}


def test_the_table_covers_every_option():
    assert _options(backtest) == set(VALUES) and _options(train) <= set(VALUES)


@pytest.mark.parametrize("panel", [True, False])
def test_every_backtest_option_reaches_the_experiment_typed(panel):
    skip = ONE_STOCK_ONLY if panel else PANEL_ONLY
    names = {n for n in VALUES if n.split("__")[1] not in skip}
    ctx = backtest.make_context("backtest", ["--out", "x", *_args(backtest, names)])
    raw = raw_sections(ctx.params)
    exp = resolve(raw, 40 if panel else 1)
    toml = tomllib.loads(to_toml(exp))
    for name in names:
        section, key = name.split("__")
        want = VALUES[name][1]
        if want is None:  # resume: how a run starts, not what it computes (kept out of the file)
            assert exp.walk_forward.resume is True
            continue
        # how the run is carried out: in the experiment, not in its file (the same experiment anywhere)
        got = getattr(exp.run, key) if section == "run" else toml[section][key]
        assert section != "run" or key not in toml.get("walk_forward", {})
        got = tuple(got) if isinstance(got, list) else got
        assert got == want and type(got) is type(want), (name, got, want)
    # the `run` command reads that file: it resolves to the same experiment
    assert to_toml(resolve(tomllib.loads(to_toml(exp)), 40 if panel else 1)) == to_toml(exp)


def test_every_train_option_reaches_the_run(tmp_path):
    folder = tmp_path / "syn"
    write_synthetic_panel(folder, n_stocks=8, n_days=260, seed=1)
    # (--intraday needs a folder of minute bars: tests/test_forecaster_intraday.py runs it)
    # (--model other than transformer is refused by train: tests/test_forecaster_registry.py)
    names = {n for n in _options(train) if n.split("__")[1] not in ONE_STOCK_ONLY}
    names -= {"data__intraday", "model__name"}
    members = tmp_path / "members.txt"  # a list of codes: always members
    members.write_text("\n".join(sorted(p.name[:-4] for p in folder.glob("*.csv"))[:5]) + "\n")
    quick = {
        "data__train_universe": (str(members), str(members)),
        "model__n_seeds": ("1", 1),
        "model__max_epochs": ("1", 1),
        "model__epoch_stock_days": ("2000", 2000),
        "model__stocks_per_batch": ("4", 4),
    }
    args = _args(train, names - set(quick))
    for name, (text, _) in quick.items():
        args += [next(p for p in train.params if p.name == name).opts[0], text]
    res = CliRunner().invoke(
        main, ["train", str(folder), "--out", str(tmp_path / "run"), "--end", "2018-10-31", *args]
    )
    assert res.exit_code == 0, res.output
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["train_end"] <= "2018-10-31" and info["on_bad"] == "drop"
    assert info["train_universe"] == str(members)
    for name in names:
        section, key = name.split("__")
        want = quick.get(name, VALUES[name])[1]
        if section == "model":
            assert info["params"][key] == want and type(info["params"][key]) is type(want), name
        elif section == "features":
            assert tuple(info["params"]["features" if key == "names" else "blend_features"]) == want
    assert info["params"]["horizon"] == 2 and info["params"]["execution"] == "close"


def test_an_experiment_file_with_dates_reads_back(tmp_path):
    path = tmp_path / "e.toml"
    path.write_text(
        '[walk_forward]\nstart = 2019-01-02\nend = "2019-03-01"\n[costs]\nstamp_duty_change = 2023-08-28\n'
    )
    exp = resolve(read_toml(path), 30, str(path))
    assert (
        str(exp.walk_forward.start.date()) == "2019-01-02"
        and str(exp.walk_forward.end.date()) == "2019-03-01"
    )
    path.write_text('[walk_forward]\nstart = "2019-02-30"\n')
    with pytest.raises(
        ValueError, match=r"\[walk_forward\] start must be None or a date YYYY-MM-DD, got '2019-02-30'"
    ):
        resolve(read_toml(path), 30, str(path))
