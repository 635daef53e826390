"""``forecaster score`` (issue 58): predictions made elsewhere scored as a run's models are, beside
a run's report (``--report``) or alone on a data folder; Qlib's date convention, instrument names,
and every misaligned row counted and named."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from test_forecaster_trust import QUICK, _invoke

from forecaster.data import write_synthetic_panel


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A data folder of 8 stocks, a report of it (the Transformer alone), and its predictions
    exported as Qlib's pred.pkl: ``pred.pkl`` dated by the day forecast (``--dates target``),
    ``qlib.pkl`` by signal day (the default, Qlib's convention)."""
    root = tmp_path_factory.mktemp("score")
    write_synthetic_panel(root / "data", n_stocks=8, n_days=260, seed=4)
    res = _invoke("backtest", root / "data", "--out", root / "rep", *QUICK)
    assert res.exit_code == 0, res.output
    res = _invoke("export-qlib", root / "rep", "--out", root / "pred.pkl", "--dates", "target")
    assert res.exit_code == 0 and "dated by the day forecast" in res.output, res.output
    res = _invoke("export-qlib", root / "rep", "--out", root / "qlib.pkl")
    assert res.exit_code == 0 and "dated by signal day" in res.output, res.output
    return root


def _metrics(folder) -> dict:
    return json.loads((folder / "metrics.json").read_text())


def _calendar(root) -> pd.DatetimeIndex:
    days = set()
    for path in (root / "data").glob("*.csv"):
        days |= set(pd.read_csv(path, usecols=["date"], parse_dates=["date"])["date"])
    return pd.DatetimeIndex(sorted(days))


def test_the_exported_frame_scored_beside_the_run_reproduces_the_transformer(root):
    res = _invoke("score", root / "pred.pkl", "--report", root / "rep", "--out", root / "s_target",
                  "--dates", "target", "--name", "qlib_model")
    assert res.exit_code == 0, res.output
    assert (
        "qlib_model: scored from" in res.output and "820 of the file's 820 predictions matched" in res.output
    )
    m, run = _metrics(root / "s_target"), _metrics(root / "rep")
    ic = m["daily_rank_ic"]
    assert (
        ic["qlib_model"]["mean_ic"]
        == ic["transformer"]["mean_ic"]
        == run["daily_rank_ic"]["transformer"]["mean_ic"]
    )
    test = next(t for t in m["rank_ic_difference_tests"] if t["baseline"] == "qlib_model")
    assert test["mean_diff"] == 0 and (test["p_value"] is None or test["p_value"] == 1)
    # the same backtest as the run's transformer, in the same report
    bt = m["backtest"]
    assert bt["qlib_model"]["strategy"]["annual_return"] == bt["transformer"]["strategy"]["annual_return"]
    assert m["external"]["dates"] == "target" and m["external"]["not_scored"] == {}
    assert (root / "s_target" / "report.html").is_file()
    assert "qlib_model" in (root / "s_target" / "report.html").read_text()


def test_qlib_signal_dates_are_the_forecast_of_the_next_trading_day(root):
    """Qlib dates a score by the day it was computed (traded the next day): the run's forecast of
    day t written as Qlib would (dated t-1) is, by default, scored as the run's own."""
    frame = pd.read_pickle(root / "pred.pkl")
    calendar = _calendar(root)
    days = frame.index.get_level_values("datetime")
    signal = calendar[calendar.get_indexer(days) - 1]
    frame.index = pd.MultiIndex.from_arrays(
        [signal, frame.index.get_level_values("instrument")], names=["datetime", "instrument"]
    )
    frame.to_pickle(root / "signal.pkl")
    pd.testing.assert_frame_equal(pd.read_pickle(root / "qlib.pkl"), frame)  # export-qlib's default
    res = _invoke("score", root / "signal.pkl", "--report", root / "rep", "--out", root / "s_signal")
    assert res.exit_code == 0, res.output
    assert "dates read as signal days (Qlib's convention" in res.output
    m = _metrics(root / "s_signal")
    assert m["daily_rank_ic"]["signal"]["mean_ic"] == m["daily_rank_ic"]["transformer"]["mean_ic"]
    assert any("signal days (Qlib's convention" in note for note in m["notes"])
    # the target-dated frame read as signal days is a day late: another score, and said so
    res = _invoke("score", root / "pred.pkl", "--report", root / "rep", "--out", root / "s_late")
    assert res.exit_code == 0, res.output
    late = _metrics(root / "s_late")
    assert late["daily_rank_ic"]["pred"]["mean_ic"] != late["daily_rank_ic"]["transformer"]["mean_ic"]
    assert late["external"]["not_scored"]["no_next_day"] == 8  # the data's last day: nothing to trade
    assert "8 prediction row(s) dated on the data's last day" in res.output


def test_misaligned_rows_are_counted_and_named(root):
    pred = pd.read_csv(root / "rep" / "predictions.csv", dtype={"code": str})
    pred = pred[pred["model"] == "transformer"]
    table = pd.DataFrame({"date": pred["date"], "code": pred["code"].str.upper(), "score": pred["forecast"]})
    dropped = table.iloc[:3]  # three stock-days of the run with no score
    extra = pd.DataFrame(
        {
            "date": ["2018-08-01", "2018-08-02", "2018-01-02", "2018-08-01"],
            "code": ["SH600000", "SH600000", "SYN.000001", "SYN.000002"],
            "score": [1.0, 2.0, 3.0, float("nan")],
        }
    )
    table = pd.concat([table.iloc[3:].query("not (date == '2018-08-01' and code == 'SYN.000002')"), extra])
    table.to_csv(root / "mine.csv", index=False)
    res = _invoke(
        "score", root / "mine.csv", "--report", root / "rep", "--out", root / "s_mis", "--dates", "target"
    )
    assert res.exit_code == 0, res.output
    out = res.output
    assert "2 prediction row(s) of codes not in the data, not scored: sh.600000\n" in out
    assert "1 prediction row(s) on days outside the run's forecast days, not scored: 2018-01-02" in out
    assert "1 prediction row(s) with no score (empty or NaN), not scored: syn.000002 2018-08-01" in out
    first = f"{dropped['code'].iloc[0].lower()} {dropped['date'].iloc[0]}"
    assert f"4 of the run's 820 stock-day(s) with no score in the file: {first}" in out
    m = _metrics(root / "s_mis")
    assert m["external"]["not_scored"] == {"unknown_code": 2, "outside_days": 1, "no_score": 1, "missing": 4}
    assert any("codes not in the data" in note for note in m["notes"])


def test_alone_on_data_scores_the_file_as_the_main_model(root):
    pred = pd.read_csv(root / "rep" / "predictions.csv", dtype={"code": str})
    pred = pred[pred["model"] == "transformer"].rename(columns={"forecast": "score"})
    pred[["date", "code", "score"]].to_csv(root / "alone.csv", index=False)
    res = _invoke(
        "score",
        root / "alone.csv",
        root / "data",
        "--out",
        root / "s_alone",
        "--dates",
        "target",
        "--top-k",
        "3",
    )
    assert res.exit_code == 0, res.output
    m, run = _metrics(root / "s_alone"), _metrics(root / "rep")
    assert m["model"] == "alone" and set(m["daily_rank_ic"]) == {"alone"}
    assert m["daily_rank_ic"]["alone"]["mean_ic"] == run["daily_rank_ic"]["transformer"]["mean_ic"]
    assert (
        m["experiment"]["strategy"]["top_k"] == 3 and m["experiment"]["walk_forward"]["label"] == "tradeable"
    )
    assert m["backtest"]["alone"]["strategy"]["annual_return"] is not None


@pytest.mark.parametrize(
    "content, args, message",
    [
        (b"not a pickle", ["--report", "rep"], "bad.pkl: cannot be read as a pickle prediction file"),
        (
            b"date,code,value\n2018-08-01,sh.600000,1\n",
            ["--report", "rep"],
            "expected columns date (or datetime), code (or instrument) and score; found date, code, value",
        ),
        (
            b"date,code,score\n2018-08-01,syn.000001,1\n2018-13-01,syn.000001,1\n",
            ["--report", "rep"],
            "line 3, column date: '2018-13-01' is not a date",
        ),
        (
            b"date,code,score\n2018-08-01,syn.000001,high\n",
            ["--report", "rep"],
            "line 2, column score: 'high' is not a number",
        ),
        (
            b"date,code,score\n2018-08-01,syn.000001,1\n2018-08-01,SYN.000001,2\n",
            ["--report", "rep"],
            "2 rows score a stock-day more than once, e.g. syn.000001 on 2018-08-01",
        ),
        (
            b"date,code,score\n2030-08-01,syn.000001,1\n",
            ["--report", "rep"],
            "no prediction falls on a stock-day of the run (--dates signal)",
        ),
        (
            b"date,code,score\n2018-08-01,syn.000001,1\n",
            ["--report", "data"],
            "no experiment.toml or metrics.json",
        ),
        (
            b"date,code,score\n2018-08-01,syn.000001,1\n",
            ["--report", "rep", "--name", "transformer"],
            "--name transformer: the run already has a model of that name",
        ),
        (b"date,code,score\n2018-08-01,syn.000001,1\n", [], "give either DATA or --report"),
        (
            b"date,code,score\n2018-08-01,syn.000001,1\n",
            ["data", "--report", "rep"],
            "give either DATA or --report",
        ),
        (
            b"date,code,score\n2018-08-01,syn.000001,1\n",
            ["--report", "rep", "--top-k", "3"],
            "[strategy] top_k cannot be given with it",
        ),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(root, content, args, message):
    suffix = ".pkl" if content.startswith(b"not") else ".csv"
    path = root / f"bad{suffix}"
    path.write_bytes(content)
    out = root / "refused"
    res = _invoke("score", path, *[root / a if a in ("rep", "data") else a for a in args], "--out", out)
    assert res.exit_code != 0 and message in res.output, res.output
    assert res.output.count("Error:") == 1 and "Traceback" not in res.output
    assert not out.exists() or not any(out.iterdir())


def test_an_earlier_report_is_refused_unless_overwritten(root):
    if not (root / "s_target").exists():
        test_the_exported_frame_scored_beside_the_run_reproduces_the_transformer(root)
    res = _invoke("score", root / "pred.pkl", "--report", root / "rep", "--out", root / "s_target")
    assert (
        res.exit_code == 1 and "already holds an earlier run" in res.output and "--resume" not in res.output
    )
    res = _invoke("score", root / "pred.pkl", "--report", root / "rep", "--out", root / "rep", "--overwrite")
    assert res.exit_code == 1 and "would write over or inside the input" in res.output
    res = _invoke("score", root / "pred.pkl", "--report", root / "rep", "--out", root / "s_target",
                  "--overwrite", "--dates", "target")
    assert res.exit_code == 0, res.output
    assert not math.isnan(_metrics(root / "s_target")["daily_rank_ic"]["pred"]["mean_ic"])


def test_export_qlib_by_signal_day_needs_the_folds_signal_days(root, tmp_path):
    """A report written before folds kept their signal day (or forecasting every other day) cannot
    be dated by signal day: one line saying what to do instead, and nothing written."""
    old = tmp_path / "old"
    old.mkdir()
    for name in ("predictions.csv", "metrics.json"):
        (old / name).write_bytes((root / "rep" / name).read_bytes())
    metrics = _metrics(old)
    for fold in metrics["folds"]:
        del fold["signal_start"]
    (old / "metrics.json").write_text(json.dumps(metrics))
    res = _invoke("export-qlib", old, "--out", tmp_path / "q.pkl")
    assert res.exit_code == 1 and res.output.count("Error:") == 1, res.output
    assert "written before reports kept each fold's signal day" in res.output
    assert "--dates target" in res.output
    assert not (tmp_path / "q.pkl").exists()
