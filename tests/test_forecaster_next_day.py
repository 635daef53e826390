"""Tomorrow's ranked list and the panel train -> predict -> plot commands."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.data import synthetic_panel, write_synthetic_panel
from forecaster.data.market.calendar import next_trading_day
from forecaster.data.panel import Panel
from forecaster.portfolio.next_day import ranked_list


class _Scores:
    """A fitted model stand-in: fixed scores per code."""

    window = 20

    def __init__(self, scores):
        self.scores = scores

    def predict_next(self, panel):
        return pd.Series(self.scores, name="forecast").reindex(panel.codes).dropna()


def test_ranked_list_ranks_and_says_what_cannot_be_bought():
    frames = synthetic_panel(n_stocks=6, n_days=80, seed=0)
    codes = sorted(frames)
    last = max(f.index[-1] for f in frames.values())
    f = {c: frames[c].copy() for c in codes}
    f[codes[1]].loc[last, ["suspended", "volume"]] = [True, 0.0]  # suspended on the signal day
    f[codes[2]].loc[last, "is_st"] = 1.0
    up = round(f[codes[3]].loc[last, "preclose"] * 1.1, 2)        # closed at limit-up
    f[codes[3]].loc[last, ["close", "high"]] = [up, up]
    f[codes[4]] = f[codes[4]].iloc[-10:]                           # listed 10 days ago
    panel = Panel.from_frames(f)
    scores = {c: s for c, s in zip(codes, [0.5, 0.4, 0.3, 0.2, 0.1, -0.1], strict=True)}
    table = ranked_list(_Scores(scores), panel).set_index("code")
    assert list(table.index) == codes  # best score first
    assert table["rank"].tolist() == [1, 2, 3, 4, 5, 6]
    assert table.loc[codes[0], "quantile"] == 5 and table.loc[codes[5], "quantile"] == 1
    reasons = table["reason"]
    assert table.loc[codes[0], "buyable"] and reasons[codes[0]] == ""
    assert "suspended" in reasons[codes[1]] and "ST" in reasons[codes[2]]
    assert "limit-up" in reasons[codes[3]] and "too new" in reasons[codes[4]]
    assert table.loc[codes[5], "buyable"]
    assert (table["last_date"] == last.date()).all()


def test_panel_train_predict_plot(tmp_path):
    folder = tmp_path / "syn"
    write_synthetic_panel(folder, n_stocks=10, n_days=300, signal_ic=0.1, seed=2)
    run = tmp_path / "run"
    tiny = ["--window", "8", "--d-model", "8", "--heads", "2", "--layers", "1", "--epochs", "2"]
    res = CliRunner().invoke(main, ["train", str(folder), "--out", str(run), "--end", "2019-01-04", *tiny])
    assert res.exit_code == 0, res.output
    info = json.loads((run / "run.json").read_text())
    assert info["kind"] == "panel" and info["train_end"] <= "2019-01-04" and info["params"]["window"] == 8
    assert (run / "training.png").is_file() and "validation rank IC" in res.output
    # The whole-market schedule (no validation, weights averaged) says so rather than "no IC".
    res = CliRunner().invoke(main, ["train", str(folder), "--out", str(tmp_path / "fixed"),
                                    "--end", "2019-01-04", *tiny, "--val-fraction", "0",
                                    "--average-last", "2", "--n-seeds", "2"])
    assert res.exit_code == 0, res.output
    assert "2 epochs on every training day, no validation, the last 2 epochs' weights averaged" in res.output
    assert "2 networks from 2 seeds, their scores averaged" in res.output
    res = CliRunner().invoke(main, ["predict", "--run", str(run)])
    assert res.exit_code == 0, res.output
    signal = pd.read_csv(next(folder.glob("*.csv")))["date"].max()
    assert f"model trained up to {info['train_end']}; signal day {signal}" in res.output
    assert "Warning" in res.output and "--stale-after" in res.output  # months between: stale
    assert not (run / "orders.csv").exists()  # no book, no capital: no orders asked for
    table = pd.read_csv(run / "next_day.csv")
    assert len(table) == 10 and set(table.columns) >= {"code", "score", "rank", "quantile", "buyable"}
    trade = str(next_trading_day(signal).date.date())  # the exchange's next trading day
    assert (table["signal_date"] == signal).all() and (table["trade_date"] == trade).all()
    assert f"for the open of the next trading day, {trade}" in res.output
    assert table["rank"].tolist() == sorted(table["rank"].tolist())
    np.testing.assert_array_less(np.diff(table["score"].to_numpy()), 1e-12)  # descending
    assert (run / "next_day.png").read_bytes()[:4] == b"\x89PNG"
    res = CliRunner().invoke(main, ["plot", "--run", str(run)])
    assert res.exit_code == 0, res.output
    assert "after the training cut-off" in res.output and (run / "rolling_ic.png").is_file()
    # Orders for the next open from a book: sells of names that left, buys in whole lots.
    held = table["code"].iloc[-1]  # the worst score: the dropout rule sells it
    (tmp_path / "h.csv").write_text(f"code,shares\n{held},1000\ncash,500000\n")
    res = CliRunner().invoke(main, ["predict", "--run", str(run), "--holdings", str(tmp_path / "h.csv"),
                                    "--top-k", "3", "--n-drop", "1", "--stale-after", "10000"])
    assert res.exit_code == 0, res.output
    assert "Warning" not in res.output
    orders = pd.read_csv(run / "orders.csv")
    assert (orders["signal_date"] == signal).all() and (orders["trade_date"] == trade).all()
    sell = orders[orders["side"] == "sell"]
    assert sell["code"].tolist() == [held] and sell["shares"].tolist() == [1000]
    buys = orders[orders["side"] == "buy"]
    assert len(buys) == 3 and (buys["shares"] % 100 == 0).all()
    assert set(buys["code"]) <= set(table["code"].head(4))
    # A panel run given one CSV is refused with a clear message.
    one = next(folder.glob("*.csv"))
    res = CliRunner().invoke(main, ["predict", "--run", str(run), str(one)])
    assert res.exit_code != 0 and "holds a model of a folder" in res.output
