"""The report's figures say what they show: A-share colours (red up, green down), titles that
match what is drawn, captions that match the axes, statistics that match the tables, and
tick labels that never overlap."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb

import forecaster.reporting.figures as figures
import forecaster.reporting.plots as plots
from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.metrics import summarise
from forecaster.portfolio.next_day import ranked_list
from forecaster.reporting.compare import COLUMNS, plot_comparison, shown_ticklabels
from forecaster.reporting.figures import GAIN, LOSS, NEUTRAL, plural
from forecaster.reporting.html import _figure_caption, _table_caption, write_html


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions make, kept after they are written (and closed)."""
    kept = []
    save = figures.save_figure

    def keep(fig, path, *args, **kwargs):
        kept.append(fig)
        return save(fig, path, *args, **kwargs)

    monkeypatch.setattr(plots, "_save", keep)
    monkeypatch.setattr(figures, "save_figure", keep)
    return kept


def _rgb(artist) -> tuple:
    return tuple(round(c, 3) for c in to_rgb(artist.get_facecolor()))


def _col(color) -> tuple:
    return tuple(round(c, 3) for c in to_rgb(color))


def test_a_share_colours_are_red_up_green_down():
    gain, loss = to_rgb(GAIN), to_rgb(LOSS)
    assert gain[0] > gain[1] and loss[1] > loss[0]
    assert figures.sign_colors([0.3, -0.2, 0.0, np.nan]) == [GAIN, LOSS, NEUTRAL, NEUTRAL]


def test_model_colours_of_return_bars_are_never_gain_or_loss(drawn, tmp_path):
    summary = {f"m{i}": {"mean": [0.001 * (q - 2) for q in range(5)], "spread_t_stat": 1.0,
                         "monotonicity": 1.0} for i in range(9)}
    plots.plot_quantile_returns(summary, tmp_path / "q.png")
    colours = {_rgb(b) for b in drawn[-1].axes[0].patches}
    assert len(colours) >= 8
    assert _col(GAIN) not in colours and _col(LOSS) not in colours


def test_plural():
    assert plural(1, "stock") == "1 stock"
    assert plural(0, "stock") == "0 stocks"
    assert plural(12, "stock") == "12 stocks"


# ------------------------------------------------------------------------------------------------
# next_day.png


class _Scores:
    window = 20

    def __init__(self, scores):
        self.scores = scores

    def predict_next(self, panel):
        return pd.Series(self.scores).reindex(panel.codes).dropna()


def _ranked(n_stocks: int, seed: int = 0) -> tuple[pd.DataFrame, Panel]:
    panel = Panel.from_frames(synthetic_panel(n_stocks=n_stocks, n_days=60, seed=seed))
    values = np.linspace(0.6, -0.5, n_stocks)  # gains first, then losses
    return ranked_list(_Scores(dict(zip(panel.codes, values, strict=True))), panel, min_history=1), panel


def test_ranked_list_bars_are_red_for_gains_green_for_losses(drawn, tmp_path):
    table, _ = _ranked(12)
    plots.plot_ranked_list(table, tmp_path / "next_day.png")
    ax = drawn[-1].axes[0]
    bars = ax.patches
    assert len(bars) == 12
    for bar in bars:
        width = bar.get_width()
        assert width != 0
        assert _rgb(bar) == _col(GAIN if width > 0 else LOSS)
    assert any(b.get_width() > 0 for b in bars) and any(b.get_width() < 0 for b in bars)


def test_ranked_list_title_gives_the_count_shown_and_the_dates(drawn, tmp_path):
    table, panel = _ranked(12)
    plots.plot_ranked_list(table, tmp_path / "a.png", signal_date=panel.dates[-1],
                           train_end=pd.Timestamp("2021-03-31"))
    title = drawn[-1].axes[0].get_title()
    assert "all 12 scored stocks" in title and "top and bottom" not in title
    assert len(drawn[-1].axes[0].patches) == 12
    assert f"signal date {panel.dates[-1].date()}" in title
    assert "2021-03-31" in title

    big, _ = _ranked(30, seed=1)
    plots.plot_ranked_list(big, tmp_path / "b.png", n=10)  # the old call: no dates
    title = drawn[-1].axes[0].get_title()
    assert "top 10 and bottom 10 of 30 scored stocks" in title
    assert len(drawn[-1].axes[0].patches) == 20
    assert "signal date" not in title and "trained" not in title


def test_ranked_list_title_counts_unscored_and_one_stock(tmp_path):
    table, _ = _ranked(3)
    table.loc[table.index[-1], "score"] = np.nan
    title = plots.ranked_list_title(table.iloc[1:])
    assert "the one scored stock" in title and "1 stock without a score" in title
    assert "1 stocks" not in title


# ------------------------------------------------------------------------------------------------
# forecaster compare


def _overlaps(fig) -> list[tuple[str, str]]:
    canvas = FigureCanvasAgg(fig)  # the figure is closed: give it a canvas to lay out text again
    canvas.draw()
    renderer = canvas.get_renderer()
    labels = [t for ax in fig.axes for t in shown_ticklabels(ax)]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


@pytest.mark.parametrize("n", [3, 40])
def test_comparison_tick_labels_never_overlap(drawn, tmp_path, n):
    rng = np.random.default_rng(n)
    table = pd.DataFrame({c: rng.normal(0, 0.02, n) for c in COLUMNS if c not in ("model", "best_baseline")},
                         index=[f"runs/experiment_{i:02d}_with_a_long_name" for i in range(n)])
    table["rank_ic"] = rng.normal(0.012, 0.003, n)  # the values whose ticks ran into each other
    table["turnover"] = rng.uniform(5, 40, n)
    plot_comparison(table, tmp_path / "compare.png")
    fig = drawn[-1]
    assert _overlaps(fig) == []
    names = [t.get_text() for t in shown_ticklabels(fig.axes[0], "y")]
    assert names == [f"experiment_{i:02d}_with_a_long_name" for i in range(n)]
    width, height = fig.canvas.get_width_height()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        assert len(shown_ticklabels(ax, "x")) >= 2  # values still readable, not thinned away
        for t in shown_ticklabels(ax):
            box = t.get_window_extent(renderer)
            assert 0 <= box.x0 and box.x1 <= width and 0 <= box.y0 and box.y1 <= height


def test_comparison_keeps_reports_of_the_same_name_apart(drawn, tmp_path):
    table = pd.DataFrame({c: [0.01, 0.02] for c in COLUMNS if c not in ("model", "best_baseline")},
                         index=["a/demo", "b/demo"])
    plot_comparison(table, tmp_path / "compare.png")
    assert len(drawn[-1].axes[0].patches) == 2


# ------------------------------------------------------------------------------------------------
# rolling_ic.png


def test_rolling_ic_axis_matches_caption_and_legend_only_lists_lines(drawn, tmp_path):
    days = pd.bdate_range("2022-01-03", periods=150)
    rng = np.random.default_rng(0)
    daily = pd.DataFrame({"transformer": rng.normal(0.05, 0.1, len(days)), "zero": np.nan}, index=days)
    plots.plot_rolling_ic(pd.DataFrame(), daily, tmp_path / "rolling_ic.png")
    ax = drawn[-1].axes[0]
    label = ax.get_ylabel()
    assert label == "63-day rolling mean of daily rank IC"
    assert label.lower() in _figure_caption("rolling_ic.png", "", panel=True).lower()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["transformer"]
    assert "zero" in ax.get_title()  # said, not listed with no line

    # one stock: the time-series correlation, and a constant forecast has none
    pred = pd.concat([
        pd.DataFrame({"model": name, "forecast": f, "actual": rng.normal(0, 0.02, len(days))}, index=days)
        for name, f in (("ridge", rng.normal(0, 0.01, len(days))), ("zero", np.zeros(len(days))))])
    plots.plot_rolling_ic(pred, pd.DataFrame(), tmp_path / "rolling_one.png")
    ax = drawn[-1].axes[0]
    assert ax.get_ylabel() == "63-day rolling correlation of forecast and actual"
    assert ax.get_ylabel().lower() in _figure_caption("rolling_ic.png", "", panel=False).lower()
    assert "daily rank IC" not in _figure_caption("rolling_ic.png", "", panel=False).replace(
        "no daily rank IC", "")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["ridge"]
    for line in ax.get_lines():
        if line.get_label() in ("ridge",):
            assert np.isfinite(np.asarray(line.get_ydata(), dtype=float)).any()


# ------------------------------------------------------------------------------------------------
# dm_pvalues.png


def test_dm_bars_coloured_by_significance_and_direction(drawn, tmp_path):
    dm = pd.DataFrame({"baseline": ["zero", "ridge", "ar5", "seed", "hist_mean"],
                       "dm_stat": [-3.0, 3.0, -0.01, 0.6, -2.0],
                       "p_value": [0.003, 0.004, 0.99, 0.55, np.nan]})
    plots.plot_dm(dm, "transformer", tmp_path / "dm_pvalues.png")
    ax = drawn[-1].axes[0]
    assert [_rgb(b) for b in ax.patches] == [_col(c) for c in (GAIN, LOSS, NEUTRAL, NEUTRAL, NEUTRAL)]
    legend = " | ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "significantly better" in legend and "significantly worse" in legend
    assert "no significant difference" in legend
    handles = ax.get_legend().legend_handles
    colours = {t.get_text(): h for t, h in zip(ax.get_legend().get_texts(), handles, strict=True)}
    assert _rgb(colours["transformer significantly better (p < 0.05)"]) == _col(GAIN)
    assert _rgb(colours["transformer significantly worse (p < 0.05)"]) == _col(LOSS)


# ------------------------------------------------------------------------------------------------
# predicted_vs_actual.png (one stock)


def test_forecast_figure_hit_rate_is_the_tables(drawn, tmp_path):
    days = pd.bdate_range("2023-01-02", periods=200)
    rng = np.random.default_rng(3)
    forecast = pd.Series(rng.normal(0, 0.01, len(days)), index=days)
    actual = pd.Series(rng.normal(0, 0.02, len(days)), index=days)
    actual.iloc[::5] = 0.0        # flat days: no direction to hit
    actual.iloc[3::17] = np.nan   # suspended days: not scored
    forecast.iloc[7::23] = 0.0
    pred = pd.DataFrame({"model": "transformer", "code": "sh.600000", "forecast": forecast,
                         "actual": actual}, index=days).rename_axis("date").reset_index()
    # the report table's path: scored rows only, then summarise per model
    table = summarise(pred[pred["actual"].notna()], by=("model",)).set_index("model")
    hit = table.loc["transformer", "hit_rate"]
    naive = float((np.sign(forecast[actual.notna()]) == np.sign(actual[actual.notna()])).mean())
    assert f"{hit:.1%}" != f"{naive:.1%}"  # the fixture tells the two definitions apart

    plots.plot_forecast_vs_actual(forecast, actual, tmp_path / "predicted_vs_actual.png")
    title = drawn[-1].axes[1].get_title()
    assert f"sign hit rate {hit:.1%}" in title
    assert f"{int(table.loc['transformer', 'n_directional'])} days" in title
    assert f"corr {table.loc['transformer', 'pearson_ic']:+.3f}" in title


# ------------------------------------------------------------------------------------------------
# report.html text


class _Report(SimpleNamespace):
    """A report stand-in: any table it was not given is empty (as in a run without it)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return pd.DataFrame()


def _fake_run(codes: list[str], columns: list[str]):
    days = pd.bdate_range("2023-01-02", periods=5)
    predictions = pd.DataFrame({"code": np.repeat(codes, len(days)), "model": "transformer",
                                "forecast": 0.0, "actual": 0.0},
                               index=pd.DatetimeIndex(np.tile(days, len(codes)), name="date"))
    table = pd.DataFrame({c: [0.1] for c in columns}, index=pd.Index(["transformer"]))
    report = _Report(model="transformer", notes=[], verdict=["fine"], universe=pd.DataFrame(),
                     summary_table=lambda: table.copy(), bars=False)
    result = SimpleNamespace(folds=[{"fold": 0}], predictions=predictions, failed={},
                             config=SimpleNamespace(label="tradeable", horizon=1))
    return report, result


ONE_STOCK_COLUMNS = ["r2_oos_zero", "hit_rate", "pearson_ic", "rank_ic", "dm_p(transformer vs)",
                     "ann_return", "excess_vs_bench", "sharpe", "max_dd"]
PANEL_COLUMNS = [*ONE_STOCK_COLUMNS[:4], "daily_rank_ic", "icir", "ic_diff_p(transformer vs)", "q_spread",
                 *ONE_STOCK_COLUMNS[4:]]


def test_table_caption_explains_only_the_columns_shown():
    one = _table_caption(ONE_STOCK_COLUMNS)
    for absent in ("daily_rank_ic", "icir", "q_spread", "ic_diff_p"):
        assert absent not in one
    assert "hit_rate" in one and "dm_p" in one
    panel = _table_caption(PANEL_COLUMNS)
    for present in ("daily_rank_ic", "icir", "q_spread", "ic_diff_p", "hit_rate", "dm_p"):
        assert present in panel


def test_html_one_stock_page_counts_and_captions(tmp_path):
    report, result = _fake_run(["sh.600000"], ONE_STOCK_COLUMNS)
    days = pd.bdate_range("2022-01-03", periods=80)
    pred = pd.DataFrame({"model": "ridge", "forecast": np.linspace(-1, 1, 80),
                         "actual": np.sin(np.arange(80))}, index=days)
    plots.plot_rolling_ic(pred, pd.DataFrame(), tmp_path / "rolling_ic.png")
    text = write_html(report, result, tmp_path).read_text()
    assert "1 fold, 1 stock," in text and "1 stocks" not in text
    assert "rolling correlation of forecast and actual" in text
    assert "icir" not in text and "q_spread" not in text

    report, result = _fake_run(["a", "b"], PANEL_COLUMNS)
    text = write_html(report, result, tmp_path).read_text()
    assert "2 stocks," in text and "rolling mean of daily rank IC" in text and "q_spread" in text
