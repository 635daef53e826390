"""``report.html``: one self-contained page per report folder (figures embedded as data
URIs, no scripts, no network), for a screen 1280 px wide and for A4 paper (a print
stylesheet): for a run on an index universe whose series the data hold, the main book
against the index first (:mod:`forecaster.reporting.index_page`); the verdict, then the
strategies after costs (their table, the excess
return over the benchmark, equity curves, the risk table, returns by month and year, the
worst drawdowns, holdings and turnover), then forecast skill (its table, rolling IC,
quantiles, IC by horizon, year and board, folds), the universe, failures, the notes and the
configuration.

Numbers are rendered, never computed here: percentages carry their unit, p-values have no
sign, each table is sorted by the column the verdict reads, a column without any value is left
out and named with the reason."""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import pandas as pd

from forecaster.reporting.tables import (
    count_text,
    drawdowns_section,
    esc,
    glance_table,
    html_table,
    ic_breakdown_section,
    risk_section,
    skill_section,
    strategy_section,
    years_section,
)
from seq2seq.core import atomic_write

# Figures in the order a reader wants them, with what each shows; the section each belongs to.
FIGURES = (
    ("excess_return.png", "Cumulative excess return over the benchmark, after costs (solid) and before "
                          "costs (dashed), of the main model and the best baseline strategy, and its "
                          "drawdown"),
    ("equity.png", "Equity after costs of the shown strategies against the benchmark, with drawdowns"),
    ("monthly_returns.png", "Returns after costs by month and year"),
    ("holdings_turnover.png", "Stocks held and turnover over time"),
    ("rolling_ic.png", "Rolling daily rank IC"),  # _figure_caption words it as the figure's axis
    ("bar_position_ic.png", "Rank IC by bar of the day"),
    ("quantile_cumulative.png", "Cumulative return of each score quantile and the long-short curve, "
                                "before costs"),
    ("quantile_returns.png", "Mean tradeable return per score quintile (monotone = the ranking works)"),
    ("ic_by_horizon.png", "Rank IC of the score against labels 1, 5 and 20 days ahead"),
    ("fold_metrics.png", "Scores per walk-forward fold (its test days, or bars, under each fold)"),
    ("predicted_vs_actual.png", "Forecasts against outcomes"),
    ("dm_pvalues.png", "Diebold-Mariano p-values against each baseline"),
)
STRATEGY_FIGURES = ("excess_return.png", "equity.png")
SKILL_FIGURES = ("rolling_ic.png", "bar_position_ic.png", "quantile_cumulative.png", "quantile_returns.png",
                 "ic_by_horizon.png")
DETAIL_FIGURES = ("fold_metrics.png", "predicted_vs_actual.png", "dm_pvalues.png")

_STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Noto Sans CJK SC",sans-serif;
margin:1.2rem auto;max-width:1140px;color:#222;line-height:1.45;padding:0 1rem}
h1{font-size:1.5rem;margin:0 0 .2rem}h2{font-size:1.2rem;margin-top:1.8rem;border-bottom:1px solid #ddd}
h3{font-size:1rem;margin:1.1rem 0 .3rem}
nav{font-size:.85rem;margin:.3rem 0 .6rem}nav a{color:#0969da;margin-right:.7rem;text-decoration:none}
.verdict li{margin:.25rem 0}
.verdict{background:#f6f8fa;border-left:4px solid #0969da;padding:.5rem 1.2rem .5rem 2rem;margin:.5rem 0}
.wrap{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;font-size:.8rem;margin:.4rem 0;max-width:100%}
th,td{border:1px solid #d0d7de;padding:.18rem .4rem;text-align:right}
th{background:#f6f8fa;font-weight:600;vertical-align:bottom;white-space:normal}
td{white-space:nowrap;font-variant-numeric:tabular-nums}
td:first-child,th:first-child{text-align:left}td.text,th.text{white-space:normal;text-align:left}
tr.main td{font-weight:700;background:#fff8c5}tr.best td{background:#ddf4ff}
tr.ref td{color:#555;font-style:italic}
.grid2{display:flex;flex-wrap:wrap;gap:0 2rem;align-items:flex-start}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#555;font-size:.88rem}
pre{background:#f6f8fa;padding:.8rem;font-size:.78rem;white-space:pre-wrap;word-break:break-word}
.caveat{color:#8a4600}.muted{color:#666;font-size:.85rem}
@media print{
@page{size:A4;margin:12mm 11mm}
body{max-width:none;margin:0;padding:0;font-size:9.5pt;line-height:1.35}
nav{display:none}
h1{font-size:15pt}h2{font-size:12pt;margin-top:10pt;break-after:avoid}h3{break-after:avoid}
table{font-size:7.4pt}th,td{padding:1px 2px}
figure,table,.verdict,.grid2>div{break-inside:avoid}
figure img{max-width:100%;width:auto !important;border:none}
.verdict,tr.main td,tr.best td,th{-webkit-print-color-adjust:exact;print-color-adjust:exact}
.wrap{overflow:visible}
pre{font-size:7pt}
}
"""

def _figure_caption(name: str, text: str, panel: bool, bars: bool = False) -> str:
    """The caption of figure ``name`` in the words of the figure itself (panel, one stock, or
    one stock's minute bars)."""
    from forecaster.reporting.figures import ROLLING_IC_WINDOW
    from forecaster.reporting.plots import rolling_ic_label

    if name == "bar_position_ic.png":
        from forecaster.reporting.bar_figures import BAR_POSITION_LABEL

        return BAR_POSITION_LABEL[0].upper() + BAR_POSITION_LABEL[1:] + ", per model"
    if name == "rolling_ic.png":
        label = rolling_ic_label(ROLLING_IC_WINDOW, panel)
        why = "" if panel or bars else " (one stock: no cross-section, so no daily rank IC)"
        return label[0].upper() + label[1:] + why + ", per model"
    if name == "predicted_vs_actual.png" and not panel:
        return ("Forecasts and outcomes over time, and their scatter; its sign hit rate is the "
                f"table's ({'bars' if bars else 'days'} with a nonzero forecast and outcome)")
    if name == "dm_pvalues.png":
        return ("Diebold-Mariano p-values against each baseline: red, significantly lower squared "
                "error; green, significantly higher; grey, no significant difference")
    return text


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG, from its header (0, 0 if it is not one)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or len(data) < 24:
        return 0, 0
    return struct.unpack(">II", data[16:24])


def _figure(path: Path, caption: str) -> str:
    """The figure embedded as a data URI, drawn at half its pixels (figures are saved at twice
    the screen resolution), never wider than the page."""
    raw = path.read_bytes()
    width, height = png_size(raw)
    size = f' width="{width // 2}" height="{height // 2}"' if width else ""
    data = base64.b64encode(raw).decode("ascii")
    return (f'<figure id="{esc(path.stem)}"><img alt="{esc(path.name)}"{size} '
            f'src="data:image/png;base64,{data}"><figcaption>{esc(path.name)}: '
            f"{esc(caption)}</figcaption></figure>")


def _index_screen(view, out: Path) -> list[str]:
    """The first screen of a run on an index universe (:mod:`forecaster.reporting.index_page`)."""
    from forecaster.reporting.index_figures import INDEX_FIGURES
    from forecaster.reporting.index_page import first_screen

    has = {name: (out / name).is_file() for name in INDEX_FIGURES}
    return first_screen(view, has, lambda name, caption: _figure(out / name, caption))


def data_label(data: str | None, codes) -> str:
    """What the report is about, in a few words: the data folder's name, or SYNTHETIC."""
    codes = [str(c) for c in codes]
    if codes and all(c.lower().startswith("syn.") for c in codes):
        return "SYNTHETIC panel" if len(codes) > 1 else "SYNTHETIC series"
    if data and not str(data).startswith("synthetic"):
        return Path(str(data).rstrip("/")).name or str(data)
    return codes[0] if len(codes) == 1 else "the data"


def write_html(report, result, out: str | Path, shown: list[str] | None = None,
               data: str | None = None) -> Path:
    """Write ``out/report.html`` from a :class:`~forecaster.evaluation.scoring.Report` and the
    figures already written into ``out`` (and ``out/experiment.toml`` when the run has one).
    ``shown``: the models the line figures draw (named under them); ``data``: the data's
    source (its name heads the page)."""
    from forecaster.evaluation.verdict import best_strategy

    out = Path(out)
    codes = result.predictions["code"].unique()
    n_codes = len(codes)
    label = data_label(data, codes)
    start, end = result.predictions.index.min().date(), result.predictions.index.max().date()
    notes = list(report.notes)
    caveats = [n for n in notes if "SYNTHETIC" in n or "survivorship" in n or "not scored" in n]
    other_notes = [n for n in notes if n not in caveats]
    backtests = report.backtests if isinstance(report.backtests, dict) else {}
    best = best_strategy(backtests, report.model, report.strategy.tests) if backtests else None
    has = {name: (out / name).is_file() for name, _ in FIGURES}
    captions = {name: _figure_caption(name, text, n_codes > 1, report.bars) for name, text in FIGURES}
    if shown:
        drawn = ", ".join(shown)
        for name in ("equity.png", "rolling_ic.png", "quantile_returns.png", "ic_by_horizon.png",
                     "fold_metrics.png", "quantile_cumulative.png"):
            captions[name] += f"; drawn: {drawn} (every model: the tables)"

    def figures(names) -> list[str]:
        return [_figure(out / n, captions[n]) for n in names if has.get(n)]

    sections = []
    view = report.index_view  # the main book against its index: the first screen
    first = [] if view is None else [("index", f"Against {view.code}", _index_screen(view, out))]
    strategy = strategy_section(report, best) if backtests else []
    if strategy:
        sections.append(("strategy", "Strategies after costs", [*strategy, *figures(STRATEGY_FIGURES)]))
        sheet = [*risk_section(report, best)]
        months = years_section(report)
        if months or has.get("monthly_returns.png"):
            sheet += ["<h3>Returns by year and month</h3>", *figures(("monthly_returns.png",)), *months]
        sheet += drawdowns_section(report)
        sheet += figures(("holdings_turnover.png",))
        if sheet:
            sections.append(("tearsheet", f"Tear sheet: {report.model}", sheet))
    skill = skill_section(report)
    if skill or any(has.get(n) for n in SKILL_FIGURES):
        sections.append(("skill", "Forecast skill",
                         [*skill, *figures(SKILL_FIGURES), *ic_breakdown_section(report)]))
    details = figures(DETAIL_FIGURES)
    if details:
        sections.append(("folds", "Folds and tests", details))
    if len(report.universe):
        counts = report.universe_counts
        universe = [f"<p>{count_text(counts['loaded'], 'stock')} loaded, {counts['used']} used, "
                    f"{len(counts['left_out'])} left out (every stock: universe.csv).</p>"]
        left = report.universe[report.universe["reason"] != ""].set_index("code")
        if len(left):
            universe.append(html_table(left[["status", "days", "folds", "scored_days", "reason"]], fmt="{}",
                                   text_columns=("reason",)))
        sections.append(("universe", "Universe", universe))
    if result.failed:
        rows = pd.DataFrame([{"fold": f, "model": m, "error": why} for (f, m), why in
                             sorted(result.failed.items())]).set_index("fold")
        sections.append(("failed", "Failed model runs",
                         [html_table(rows, fmt="{}", text_columns=("error",))]))
    if other_notes:
        sections.append(("notes", "Notes", ["<ul>", *(f"<li>{esc(n)}</li>" for n in other_notes), "</ul>"]))
    config = out / "experiment.toml"
    if config.is_file():
        sections.append(("configuration", "Configuration", [
            '<p class="muted">experiment.toml: <code>forecaster run experiment.toml --out NEW</code> '
            "reproduces this report.</p>", f"<pre>{esc(config.read_text())}</pre>"]))

    heading = f"Walk-forward report: {report.model} on {label}"
    parts = [f"<h1>{esc(heading)}</h1>",
             f'<p class="muted">{esc(data or label)}: {count_text(n_codes, "stock")}, '
             f"{count_text(len(result.folds), 'fold')}, {start} to {end}; "
             f"label: {esc(result.config.label)}, horizon {result.config.horizon}</p>",
             "<nav>" + "".join(f'<a href="#{key}">{esc(title.split(":")[0])}</a>' for key, title, _ in
                               [*first, ("verdict", "Verdict", None), *sections]) + "</nav>",
             *(part for key, title, body in first for part in (f'<h2 id="{key}">{esc(title)}</h2>', *body)),
             '<h2 id="verdict">Verdict</h2>', '<ul class="verdict">',
             *(f"<li>{esc(line)}</li>" for line in report.verdict), "</ul>"]
    if backtests and report.model in report.strategy.risk.index:
        parts.append(glance_table(report, best))
    if caveats:
        parts += ["<h2>Data caveats</h2>", "<ul>", *(f'<li class="caveat">{esc(c)}</li>' for c in caveats),
                  "</ul>"]
    for key, title, body in sections:
        parts += [f'<h2 id="{key}">{esc(title)}</h2>', *body]
    title = f"{report.model} walk-forward report: {label}, {start} to {end}"
    page = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{_STYLE}</style></head>"
            f"<body>{''.join(parts)}</body></html>")
    path = out / "report.html"
    with atomic_write(path, "w") as f:
        f.write(page)
    return path
