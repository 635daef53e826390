"""The breadth of a report: daily rank IC by calendar year and by board (known values, and a
planted panel where one board carries the signal and the other none), and the predictions
file as CSV or Parquet, read back the same by one function."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.evaluation.scoring import ic_by_board, ic_by_year, report_board, score_run
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.metrics import daily_ic, ic_summary
from forecaster.models.panel.baselines import FactorScore, FeatureRegressor
from forecaster.portfolio.backtest import BacktestConfig
from forecaster.reporting import report as report_module
from forecaster.reporting.report import read_predictions, write_predictions, write_report


@pytest.mark.parametrize("code, board", [
    ("sh.600000", "main"), ("sz.000157", "main"), ("sz.003816", "main"), ("sz.002415", "sme"),
    ("sz.300124", "chinext"), ("sz.301269", "chinext"), ("sh.688981", "star"), ("sh.689009", "star"),
    ("bj.430047", "bse"), ("syn.000001", "main"), ("syn.sz.002001", "sme"), ("syn.sz.300001", "chinext"),
])
def test_report_board(code, board):
    assert report_board(code) == board


def _frames(codes, dates, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(rng.standard_normal((len(dates), len(codes))), index=dates, columns=codes)


def test_ic_by_year_known_values():
    """A forecast equal to the outcome in 2021 and its negative in 2022: IC +1 and -1 per year,
    with the year's days counted."""
    dates = pd.bdate_range("2021-06-01", "2022-03-31", name="date")
    actual = _frames([f"sh.6000{i:02d}" for i in range(10)], dates)
    sign = np.where(dates.year == 2021, 1.0, -1.0)[:, None]
    table = ic_by_year(daily_ic(actual * sign, actual))
    assert list(table["year"]) == [2021, 2022]
    assert table["mean_ic"].tolist() == pytest.approx([1.0, -1.0])
    assert table["n_days"].tolist() == [int((dates.year == 2021).sum()), int((dates.year == 2022).sum())]
    assert table["icir"].isna().all()  # a constant daily IC has no ICIR


def test_ic_by_board_planted_board():
    """ChiNext's forecast is its outcome (IC 1), SME's the negative (-1), the main board's pure
    noise (about 0); STAR has 3 stocks, fewer than a day's cross-section needs."""
    dates = pd.bdate_range("2022-01-03", periods=300, name="date")
    boards = {"main": [f"sh.6000{i:02d}" for i in range(12)],
              "sme": [f"sz.0020{i:02d}" for i in range(1, 9)],
              "chinext": [f"sz.3000{i:02d}" for i in range(1, 9)],
              "star": [f"sh.6880{i:02d}" for i in range(1, 4)]}
    codes = [c for cs in boards.values() for c in cs]
    actual = _frames(codes, dates, seed=1)
    forecast = _frames(codes, dates, seed=2)  # noise everywhere ...
    forecast[boards["chinext"]] = actual[boards["chinext"]]  # ... but a perfect ChiNext ranking
    forecast[boards["sme"]] = -actual[boards["sme"]]
    forecast.iloc[:5, 0] = np.nan  # a stock with missing days still counts
    table = ic_by_board(forecast, actual).set_index("board")
    assert list(table.index) == ["main", "sme", "chinext", "star"]  # BOARDS order, no empty bse
    assert table.loc["chinext", "mean_ic"] == pytest.approx(1.0)
    assert table.loc["sme", "mean_ic"] == pytest.approx(-1.0)
    assert abs(table.loc["main", "mean_ic"]) < 0.05
    assert table.loc["main", "n_days"] == table.loc["chinext", "n_days"] == 300
    assert table.loc["main", "icir"] == pytest.approx(ic_summary(daily_ic(forecast[boards["main"]],
                                                                          actual[boards["main"]]))["icir"])
    assert table["n_stocks"].to_dict() == {"main": 12, "sme": 8, "chinext": 8, "star": 3}
    assert table.loc["star", "n_days"] == 0 and np.isnan(table.loc["star", "mean_ic"])
    # The pooled daily IC, near 0 here, hides a perfect board and a perfectly wrong one.
    assert abs(ic_summary(daily_ic(forecast, actual))["mean_ic"]) < 0.1


def _renamed(frames: dict, prefix: str) -> dict:
    out = {}
    for i, frame in enumerate(frames.values()):
        code = f"{prefix}{i + 1:03d}"
        out[code] = frame.assign(code=code)
    return out


@pytest.fixture(scope="module")
def two_boards(tmp_path_factory):
    """ChiNext stocks with a planted signal (rank IC 0.3), main-board stocks with none, on one
    calendar; a ridge on the features and a factor score, walked forward and scored."""
    kw = dict(n_stocks=25, n_days=560, start="2018-01-02")
    frames = {**_renamed(synthetic_panel(signal_ic=0.3, seed=5, **kw), "syn.sz.300"),
              **_renamed(synthetic_panel(signal_ic=0.0, seed=6, **kw), "syn.sh.600")}
    panel = Panel.from_frames(frames)
    models = {"ridge": FeatureRegressor("ridge"), "low_vol_20d": FactorScore("low_vol_20d")}
    config = WalkForwardConfig(train_days=250, retrain_every=150, min_stock_days=60, margin_days=80,
                               progress=False, n_jobs=1)
    result = walk_forward(frames, models, config, panel=panel)
    report = score_run(result, panel, models, "ridge", BacktestConfig(predictions_format="parquet"))
    return result, report, tmp_path_factory.mktemp("report")


def test_report_ic_by_board_finds_the_planted_board(two_boards):
    _, report, _ = two_boards
    boards = report.ic_boards.set_index(["model", "board"])
    assert set(report.ic_boards["board"]) == {"main", "chinext"}
    assert boards.loc[("ridge", "chinext"), "mean_ic"] > 0.15  # the planted board
    assert abs(boards.loc[("ridge", "main"), "mean_ic"]) < 0.04  # nothing planted there
    assert boards.loc[("ridge", "chinext"), "n_stocks"] == 25
    # Each board's IC is the daily rank IC within its stocks.
    assert boards.loc[("ridge", "chinext"), "mean_ic"] > report.ic["ridge"]["mean_ic"] + 0.05


def test_report_ic_by_year_splits_the_daily_ic(two_boards):
    _, report, _ = two_boards
    years = report.ic_years[report.ic_years["model"] == "ridge"].set_index("year")
    daily = report.daily_ic["ridge"].dropna()
    assert list(years.index) == sorted(set(daily.index.year)) and len(years) >= 2
    assert years["n_days"].sum() == report.ic["ridge"]["n_days"]
    for year, row in years.iterrows():
        assert row["mean_ic"] == pytest.approx(daily[daily.index.year == year].mean())


def test_report_folder_has_the_breakdown(two_boards):
    result, report, out = two_boards
    files = write_report(report, result, out)
    names = {p.name for p in files}
    assert {"ic_by_year.csv", "ic_by_board.csv", "predictions.parquet"} <= names
    assert not (out / "predictions.csv").exists()  # the backtest configuration said Parquet
    by_board = pd.read_csv(out / "ic_by_board.csv")
    assert list(by_board.columns) == ["model", "board", "n_stocks", "mean_ic", "icir", "n_days"]
    metrics = json.loads((out / "metrics.json").read_text())
    chinext = metrics["ic_by_board"]["ridge"]["chinext"]
    assert chinext["mean_ic"] == pytest.approx(report.ic_boards.set_index(["model", "board"])
                                               .loc[("ridge", "chinext"), "mean_ic"])
    assert set(metrics["ic_by_year"]["ridge"]) == {str(y) for y in report.ic_years["year"].unique()}
    assert metrics["predictions_file"] == "predictions.parquet"
    page = (out / "report.html").read_text()
    assert "Daily rank IC by year and by board" in page and "chinext (25 stocks)" in page


def test_predictions_round_trip_csv_and_parquet(two_boards, tmp_path, monkeypatch):
    result, _, _ = two_boards
    pred = result.predictions
    as_csv = write_predictions(pred, tmp_path, "csv")
    from_csv = read_predictions(tmp_path)
    as_parquet = write_predictions(pred, tmp_path, "parquet")
    assert as_csv.name == "predictions.csv" and as_parquet.name == "predictions.parquet"
    assert not as_csv.exists()  # one predictions file per folder
    from_parquet = read_predictions(tmp_path)
    pd.testing.assert_frame_equal(from_csv, from_parquet)
    pd.testing.assert_frame_equal(from_parquet, pred, check_dtype=False, check_index_type=False,
                                  check_freq=False)
    assert from_csv["code"].str.startswith("syn.").all()
    # "auto": CSV at this size, Parquet above the threshold.
    assert write_predictions(pred, tmp_path, "auto").name == "predictions.csv"
    monkeypatch.setattr(report_module, "PARQUET_ROWS", len(pred) - 1)
    assert write_predictions(pred, tmp_path, "auto").name == "predictions.parquet"
    with pytest.raises(ValueError, match="predictions format"):
        write_predictions(pred, tmp_path, "xlsx")
    with pytest.raises(ValueError, match="no predictions"):
        read_predictions(tmp_path / "nothing")


def test_predictions_format_is_a_backtest_option():
    from forecaster.app.experiment import option_fields

    assert BacktestConfig().predictions_format == "auto"
    with pytest.raises(ValueError, match="predictions_format"):
        BacktestConfig(predictions_format="xlsx")
    fields = {name: (default, text) for name, default, _, text in option_fields("backtest")}
    assert fields["predictions_format"][0] == "auto" and "Parquet" in fields["predictions_format"][1]
