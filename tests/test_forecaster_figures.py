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
import forecaster.reporting.tearsheet_figures as sheet_figures
from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.metrics import summarise
from forecaster.portfolio.next_day import ranked_list
from forecaster.reporting.compare import COLUMNS, plot_comparison, shown_ticklabels
from forecaster.reporting.figures import GAIN, LOSS, NEUTRAL, plural
from forecaster.reporting.html import _figure_caption, write_html


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
    monkeypatch.setattr(sheet_figures, "save_figure", keep)
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


def _fake_run(codes: list[str], panel: bool):
    days = pd.bdate_range("2023-01-02", periods=5)
    predictions = pd.DataFrame({"code": np.repeat(codes, len(days)), "model": "transformer",
                                "forecast": 0.0, "actual": 0.0},
                               index=pd.DatetimeIndex(np.tile(days, len(codes)), name="date"))
    overall = pd.DataFrame({"model": ["transformer", "ridge"], "rank_ic": [0.1, 0.05],
                            "hit_rate": [0.52, 0.5],
                            "r2_oos_zero": [np.nan, np.nan] if panel else [0.01, -0.02]})
    ic = ({m: {"mean_ic": v, "icir": v * 10} for m, v in (("transformer", 0.04), ("ridge", 0.05))}
          if panel else {})
    quantiles = ({m: {"spread": 0.001, "monotonicity": 1.0} for m in ("transformer", "ridge")}
                 if panel else {})
    tests = pd.DataFrame({"baseline": ["ridge"], "p_value": [0.2]}) if panel else pd.DataFrame()
    dm = pd.DataFrame() if panel else pd.DataFrame({"baseline": ["ridge"], "p_value": [0.3]})
    report = _Report(model="transformer", notes=[], verdict=["fine"], universe=pd.DataFrame(),
                     overall=overall, ic=ic, quantiles=quantiles, ic_close={}, ic_tests=tests, dm=dm,
                     not_computed={}, backtests={}, bars=False, index_view=None)
    result = SimpleNamespace(folds=[{"fold": 0}], predictions=predictions, failed={},
                             config=SimpleNamespace(label="tradeable", horizon=1))
    return report, result


def test_skill_table_explains_only_the_columns_shown(tmp_path):
    report, result = _fake_run(["sh.600000"], panel=False)
    text = write_html(report, result, tmp_path).read_text()
    caption = text[text.index("Sorted by"):text.index("</p>", text.index("Sorted by"))]
    for absent in ("daily rank IC:", "ICIR:", "top - bottom quintile", "p, IC vs"):
        assert absent not in caption
    assert "sign hit rate:" in caption and "p, DM vs transformer:" in caption
    assert "Sorted by R² vs zero" in caption  # one stock: the verdict reads R^2 against zero
    report, result = _fake_run(["a", "b"], panel=True)
    text = write_html(report, result, tmp_path).read_text()
    caption = text[text.index("Sorted by"):text.index("</p>", text.index("Sorted by"))]
    for present in ("daily rank IC:", "ICIR:", "top - bottom quintile", "p, IC vs transformer:",
                    "sign hit rate:"):
        assert present in caption
    assert "Sorted by daily rank IC" in caption and "p, DM vs" not in caption
    assert "Columns left out" in text and "R² vs zero: no model here forecasts" in text  # ranks only


def test_html_one_stock_page_counts_and_captions(tmp_path):
    report, result = _fake_run(["sh.600000"], panel=False)
    days = pd.bdate_range("2022-01-03", periods=80)
    pred = pd.DataFrame({"model": "ridge", "forecast": np.linspace(-1, 1, 80),
                         "actual": np.sin(np.arange(80))}, index=days)
    plots.plot_rolling_ic(pred, pd.DataFrame(), tmp_path / "rolling_ic.png")
    text = write_html(report, result, tmp_path).read_text()
    assert "1 stock, 1 fold," in text and "1 stocks" not in text
    assert "rolling correlation of forecast and actual" in text
    assert "<th>ICIR</th>" not in text and "top - bottom quintile" not in text.split("Columns left out")[0]

    report, result = _fake_run(["a", "b"], panel=True)
    text = write_html(report, result, tmp_path).read_text()
    assert "2 stocks," in text and "rolling mean of daily rank IC" in text and "top - bottom quintile" in text


# ------------------------------------------------------------------------------------------------
# one style per model, legends outside the data, folds, resolution (issue 52)


def _drawn_again(fig):
    canvas = FigureCanvasAgg(fig)  # the figure is closed: give it a canvas to lay out again
    canvas.draw()
    return canvas.get_renderer()


def _legends_clear_of_data(fig) -> None:
    renderer = _drawn_again(fig)
    boxes = [ax.get_window_extent(renderer) for ax in fig.axes if ax.get_visible() and ax.has_data()]
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent(renderer)
        for data in boxes:
            assert not box.overlaps(data), (ax.get_title(), [t.get_text() for t in legend.get_texts()])


def _line_styles(fig) -> dict:
    return {line.get_label(): (_col(line.get_color()), line.get_linewidth(), line.get_zorder())
            for ax in fig.axes for line in ax.get_lines() if not line.get_label().startswith("_")}


def _curves(days, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    r = pd.Series(rng.normal(0.0005, 0.01, len(days)), index=days)
    b = pd.Series(rng.normal(0.0002, 0.01, len(days)), index=days)
    net, bench = (1 + r).cumprod(), (1 + b).cumprod()
    gross = (1 + r + 0.0004).cumprod()
    return pd.DataFrame({"net": net, "gross": gross, "benchmark": bench, "excess": net / bench - 1,
                         "excess_gross": gross / bench - 1,
                         "excess_drawdown": (net / bench) / (net / bench).cummax() - 1,
                         "excess_drawdown_gross": (gross / bench) / (gross / bench).cummax() - 1,
                         "drawdown": net / net.cummax() - 1, "holdings": 10.0, "turnover": 0.2,
                         "turnover_mean": 0.2})


def test_one_style_per_model_across_figures_the_main_model_on_top(drawn, tmp_path):
    from forecaster.reporting import tearsheet_figures as sheet

    models = ["transformer", "ridge_features", "lightgbm", "composite"]
    styles = figures.model_styles(models, "transformer")
    days = pd.bdate_range("2022-01-03", periods=200)
    rng = np.random.default_rng(0)
    daily = pd.DataFrame({m: rng.normal(0.03, 0.1, len(days)) for m in [*models, "momentum"]}, index=days)
    plots.plot_rolling_ic(pd.DataFrame(), daily, tmp_path / "r.png", styles=styles, shown=models)
    rolling = _line_styles(drawn[-1])
    assert set(rolling) == set(models)  # only the shown models: the rest are in the tables
    assert "1 other model in the tables" in drawn[-1].axes[0].get_title()
    per_fold = pd.DataFrame([{"model": m, "fold": f, "r2_oos_zero": np.nan, "pearson_ic": 0.01,
                              "daily_rank_ic_mean": 0.02 + 0.01 * i}
                             for i, m in enumerate(models) for f in range(3)])
    plots.plot_fold_metrics(per_fold, tmp_path / "f.png", styles=styles, shown=models)
    folds = _line_styles(drawn[-1])
    table = pd.DataFrame({1: [0.03, 0.02, 0.01, 0.0], 5: [0.02, 0.01, 0.0, 0.0]}, index=models)
    plots.plot_ic_by_horizon(table, tmp_path / "h.png", styles=styles)
    horizon = _line_styles(drawn[-1])
    sheet.plot_equity_curves({m: _curves(days, i) for i, m in enumerate(models)}, styles, tmp_path / "e.png",
                             "transformer")
    equity = _line_styles(drawn[-1])
    for m in models:
        assert rolling[m][0] == folds[m][0] == horizon[m][0] == equity[m][0], m
        assert rolling[m][0] not in (_col(GAIN), _col(LOSS))
    assert rolling["transformer"][0] == _col("black")
    assert len({rolling[m][0] for m in models}) == len(models)
    for other in models[1:]:
        assert rolling["transformer"][1] > rolling[other][1] and rolling["transformer"][2] > rolling[other][2]
    legend = [t.get_text() for t in drawn[-1].axes[0].get_legend().get_texts()]
    assert legend[0] == "transformer"  # first in the legend too


def test_legends_are_outside_the_data(drawn, tmp_path):
    from forecaster.reporting import tearsheet_figures as sheet

    models = ["transformer", "ridge_features", "lightgbm"]
    styles = figures.model_styles(models, "transformer")
    days = pd.bdate_range("2022-01-03", periods=250)
    curves = {m: _curves(days, i) for i, m in enumerate(models)}
    sheet.plot_equity_curves(curves, styles, tmp_path / "e.png", "transformer",
                             "equal-weight universe of 60 stocks, daily rebalanced, no costs")
    sheet.plot_excess({m: curves[m] for m in models[:2]}, styles, tmp_path / "x.png", "transformer")
    sheet.plot_holdings_turnover(curves, styles, tmp_path / "t.png", "transformer")
    q = {m: pd.DataFrame({"1": np.linspace(0, -0.2, 250), "2": 0.0, "3": np.linspace(0, 0.2, 250),
                          "long_short": np.linspace(0, 0.4, 250)}, index=days) for m in models}
    sheet.plot_quantile_curves(q, styles, tmp_path / "q.png", "transformer")
    rng = np.random.default_rng(1)
    daily = pd.DataFrame({m: rng.normal(0.03, 0.1, len(days)) for m in models}, index=days)
    plots.plot_rolling_ic(pd.DataFrame(), daily, tmp_path / "r.png", styles=styles)
    summary = {m: {"mean": [-0.001, 0.0, 0.001, 0.002, 0.003], "spread_t_stat": 2.0, "monotonicity": 1.0}
               for m in models}
    plots.plot_quantile_returns(summary, tmp_path / "qr.png", styles=styles)
    for fig in drawn:
        _legends_clear_of_data(fig)


def test_fold_axis_has_integer_ticks_and_marks_short_folds(drawn, tmp_path):
    rows = [{"model": m, "fold": f, "r2_oos_zero": np.nan, "pearson_ic": np.nan,
             "daily_rank_ic_mean": np.nan if m == "zero" else 0.01 * f} for m in ("transformer", "zero")
            for f in range(5)]
    days = {0: 63, 1: 63, 2: 63, 3: 63, 4: 16}
    plots.plot_fold_metrics(pd.DataFrame(rows), tmp_path / "f.png", fold_days=days)
    fig = drawn[-1]
    ax = fig.axes[-1]
    assert list(ax.get_xticks()) == [0, 1, 2, 3, 4]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[4] == "4\n16 d" and labels[0] == "0\n63 d"
    title = fig.axes[0].get_title()
    assert "fold 4 (16 days)" in title and "zero" in title  # a short fold marked, a model without lines named
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["transformer"]
    assert any(p.get_x() < 4 < p.get_x() + p.get_width() for p in ax.patches)  # the short fold shaded
    assert len(fig.axes) == 1  # no R^2 panel: no model here has one


def test_dm_significant_results_are_tall_bars(drawn, tmp_path):
    dm = pd.DataFrame({"baseline": ["zero", "ridge", "ar5"], "dm_stat": [-5.0, 0.3, 4.0],
                       "p_value": [1e-9, 0.7, 0.004]})
    plots.plot_dm(dm, "transformer", tmp_path / "dm.png")
    heights = [b.get_height() for b in drawn[-1].axes[0].patches]
    assert heights[0] > heights[2] > heights[1] > 0
    assert {t.get_text() for t in drawn[-1].axes[0].texts} >= {"p < 0.001", "p = 0.700", "p = 0.004"}


def test_bar_forecasts_in_dates_on_their_own_scale(drawn, tmp_path):
    day_list = pd.bdate_range("2024-01-02", periods=6)
    stamps = pd.DatetimeIndex([d + pd.Timedelta(hours=h) for d in day_list for h in (10.5, 11.5, 14, 15)])
    rng = np.random.default_rng(2)
    forecast = pd.Series(rng.normal(0, 0.001, len(stamps)), index=stamps).clip(-0.003, 0.003)
    actual = pd.Series(rng.normal(0, 0.02, len(stamps)), index=stamps)
    plots.plot_forecast_vs_actual(forecast, actual, tmp_path / "p.png", bars=True)
    fig = drawn[-1]
    forecast_ax = fig.axes[2]
    low, high = forecast_ax.get_ylim()
    assert high - low < 0.02  # the forecast's own scale, not the outcomes' +/- 0.05
    labels = [t.get_text() for t in forecast_ax.get_xticklabels()]
    assert labels and all(pd.Timestamp(t).date() in set(day_list.date) for t in labels)


def test_monthly_heatmap_in_a_share_colours(drawn, tmp_path):
    from forecaster.reporting import tearsheet_figures as sheet

    monthly = pd.DataFrame(np.nan, index=pd.Index([2023], name="year"), columns=list(range(1, 13)))
    monthly.loc[2023, 1], monthly.loc[2023, 2] = 0.05, -0.05
    monthly["year"] = 0.0
    sheet.plot_monthly_returns(monthly, tmp_path / "m.png")
    image = drawn[-1].axes[0].get_images()[0]
    rgba = image.to_rgba(image.get_array())
    gain, loss = rgba[0, 0], rgba[0, 1]
    assert gain[0] > gain[1] and loss[1] > loss[0]  # red up, green down
    assert {t.get_text() for t in drawn[-1].axes[0].texts} == {"+5.0", "-5.0"}


def test_figures_are_saved_at_twice_the_resolution(tmp_path):
    from forecaster.reporting.html import png_size

    fig, ax = figures.plt.subplots(figsize=(6, 3))
    ax.plot([0, 1], [0, 1])
    path = figures.save_figure(fig, tmp_path / "x.png")
    width, height = png_size(path.read_bytes())
    assert figures.DPI == 220 and width > 0.9 * 6 * 220 and height > 0.9 * 3 * 220


def test_panel_training_names_its_loss_and_marks_the_chosen_epoch(drawn, tmp_path):
    history = [{"epoch": e, "train_loss": 1.0 / e, "val_rank_ic": v} for e, v in
               zip(range(1, 6), [0.01, 0.03, 0.05, 0.04, 0.02], strict=True)]
    plots.plot_panel_training([history], tmp_path / "t.png", loss="icir")
    left, right = drawn[-1].axes[:2]
    assert "loss 'icir'" in left.get_ylabel()
    stars = [line for line in right.get_lines() if line.get_marker() == "*"]
    assert len(stars) == 1 and list(stars[0].get_xdata()) == [3]  # the best validation rank IC
    assert "chosen epoch 3" in " ".join(t.get_text() for t in right.get_legend().get_texts())
    plots.plot_history([{"epoch": e, "train_loss": 1.0 / e, "val_loss": abs(e - 2) + 1} for e in range(1, 5)],
                       tmp_path / "h.png", loss="mse")
    ax = drawn[-1].axes[0]
    assert "mean squared error" in ax.get_ylabel()
    assert "chosen epoch (2)" in [t.get_text() for t in ax.get_legend().get_texts()]
