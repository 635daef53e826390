"""``report.html``: one self-contained page per report folder (figures embedded as data
URIs, no scripts, no network): the verdict first, the model-vs-baselines table, the figures,
the universe, failures, the configuration and the data caveats."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from forecaster.reporting.figures import plural
from seq2seq.core import atomic_write

# Figures in the order a reader wants them, with what each shows.
FIGURES = (
    ("equity.png", "Equity after costs against the benchmark, with drawdown"),
    ("rolling_ic.png", "Rolling daily rank IC"),  # _figure_caption words it as the figure's axis
    ("bar_position_ic.png", "Rank IC by bar of the day"),
    ("quantile_returns.png", "Mean tradeable return per score quintile (monotone = the ranking works)"),
    ("ic_by_horizon.png", "Rank IC of the score against labels 1, 5 and 20 days ahead"),
    ("fold_metrics.png", "Scores per walk-forward fold"),
    ("predicted_vs_actual.png", "Forecasts against outcomes"),
    ("dm_pvalues.png", "Diebold-Mariano p-values against each baseline"),
)

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;
color:#222;line-height:1.45;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
.verdict li{margin:.3rem 0}.verdict{background:#f6f8fa;border-left:4px solid #0969da;padding:.6rem 1.2rem}
table{border-collapse:collapse;font-size:.82rem;margin:.5rem 0}
th,td{border:1px solid #d0d7de;padding:.2rem .45rem;text-align:right}th{background:#f6f8fa}
td:first-child,th:first-child{text-align:left}tr.main td{font-weight:600;background:#fff8c5}
figure{margin:1rem 0}figure img{max-width:100%;border:1px solid #eee}figcaption{color:#555;font-size:.9rem}
pre{background:#f6f8fa;padding:.8rem;overflow:auto;font-size:.8rem}.caveat{color:#8a4600}
.muted{color:#666;font-size:.85rem}.scroll{overflow-x:auto}
"""


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _table(frame: pd.DataFrame, highlight: str | None = None, fmt: str = "{:+.4f}") -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in [frame.index.name or "", *frame.columns])
    rows = []
    for idx, row in frame.iterrows():
        cells = []
        for v in row:
            if isinstance(v, float):
                cells.append("<td>–</td>" if pd.isna(v) else f"<td>{fmt.format(v)}</td>")
            else:
                cells.append(f"<td>{html.escape(str(v))}</td>")
        cls = ' class="main"' if idx == highlight else ""
        rows.append(f"<tr{cls}><td>{html.escape(str(idx))}</td>{''.join(cells)}</tr>")
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            "</table></div>")


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


def _table_caption(columns) -> str:
    """What the columns of the model-vs-baselines table mean: only those it has (a one-stock
    table has no cross-sectional columns)."""
    names = [str(c) for c in columns]

    def has(key: str) -> bool:
        return any(n == key or n.startswith(key + "(") for n in names)

    parts = ["– : not computed (see the notes)"]
    if has("hit_rate"):
        parts.append("hit_rate: share of the rows with a nonzero forecast and outcome whose signs agree")
    pooled = [c for c in ("pearson_ic", "rank_ic") if has(c)]
    if pooled:
        parts.append(f"{' and '.join(pooled)}: correlation of forecast and outcome over every scored row")
    cross = [c for c in ("daily_rank_ic", "icir", "q_spread") if has(c)]
    if cross:
        parts.append(f"{', '.join(cross)}: across the stocks of each day, on the label above")
    if has("position_ic"):
        parts.append("position_ic and position_rank_ic: the IC and rank IC of each bar of the day across "
                     "days, averaged over the day's bars (bar_position_metrics.csv)")
    if has("rank_ic_close"):
        parts.append("rank_ic_close: the daily rank IC against the close-to-close return")
    if has("ic_diff_p"):
        parts.append("ic_diff_p: Newey-West test of the daily rank-IC difference")
    if has("dm_p"):
        parts.append("dm_p: Diebold-Mariano test of the squared-error difference")
    if has("excess_vs_bench"):
        parts.append("excess_vs_bench: annual return minus that of its benchmark")
    return "; ".join(parts) + "."


def _figure(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure id="{html.escape(path.stem)}"><img alt="{html.escape(path.name)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{html.escape(path.name)}: '
            f"{html.escape(caption)}</figcaption></figure>")


def _ic_breakdown(report) -> list[str]:
    """The daily rank IC by calendar year and by board: one row per model, each cell the mean
    IC and the ICIR in brackets (days and stocks: ic_by_year.csv, ic_by_board.csv)."""
    parts = []
    for table, key, title in ((report.ic_years, "year", "year"), (report.ic_boards, "board", "board")):
        if not len(table):
            continue
        cells = table.assign(cell=[("–" if pd.isna(m) else f"{m:+.4f}")
                                   + ("" if pd.isna(r) else f" ({r:+.2f})")
                                   for m, r in zip(table["mean_ic"], table["icir"], strict=True)])
        if key == "board":  # the board's stocks in its column's name
            stocks = table.groupby("board", sort=False)["n_stocks"].max()
            cells["board"] = [f"{b} ({plural(stocks[b], 'stock')})" for b in cells["board"]]
        grid = cells.pivot(index="model", columns=key, values="cell").reindex(
            columns=list(dict.fromkeys(cells[key])), index=list(dict.fromkeys(cells["model"]))).fillna("–")
        grid.index.name, grid.columns.name = "model", None
        grid.columns = [str(c) for c in grid.columns]
        parts += [f"<h3>By {title}</h3>", _table(grid, highlight=report.model, fmt="{}")]
    if not parts:
        return []
    return ["<h2>Daily rank IC by year and by board</h2>",
            '<p class="muted">Each cell: mean daily rank IC (ICIR). A board\'s IC is the daily rank IC '
            "within its stocks (days with fewer than 5 of them scored have none); main excludes the "
            "former SME board (sz.002xxx). Days per cell: ic_by_year.csv, ic_by_board.csv.</p>", *parts]


def write_html(report, result, out: str | Path) -> Path:
    """Write ``out/report.html`` from a :class:`~forecaster.reporting.report.Report` and the figures
    already written into ``out`` (and ``out/experiment.toml`` when the run has one)."""
    out = Path(out)
    n_codes = int(result.predictions["code"].nunique())
    table = report.summary_table()
    table.index.name = "model"
    notes = [n for n in report.notes]
    caveats = [n for n in notes if "SYNTHETIC" in n or "survivorship" in n or "not scored" in n]
    other_notes = [n for n in notes if n not in caveats]
    parts = [f"<h1>Walk-forward report: {html.escape(report.model)}</h1>",
             f'<p class="muted">{_count(len(result.folds), "fold")}, {_count(n_codes, "stock")}, '
             f"{result.predictions.index.min().date()} to {result.predictions.index.max().date()}; "
             f"label: {html.escape(result.config.label)}, horizon {result.config.horizon}</p>",
             "<h2>Verdict</h2>", '<ul class="verdict">',
             *(f"<li>{html.escape(line)}</li>" for line in report.verdict), "</ul>"]
    if caveats:
        parts += ["<h2>Data caveats</h2>", "<ul>",
                  *(f'<li class="caveat">{html.escape(c)}</li>' for c in caveats), "</ul>"]
    parts += ["<h2>Model against baselines</h2>",
              f'<p class="muted">{html.escape(_table_caption(table.columns))}</p>',
              _table(table, highlight=report.model)]
    parts += _ic_breakdown(report)
    figures = [(out / name, _figure_caption(name, text, n_codes > 1, report.bars)) for name, text in FIGURES
               if (out / name).is_file()]
    if figures:
        parts += ["<h2>Figures</h2>", *(_figure(p, t) for p, t in figures)]
    if len(report.universe):
        counts = report.universe_counts
        parts += ["<h2>Universe</h2>",
                  f"<p>{_count(counts['loaded'], 'stock')} loaded, {counts['used']} used, "
                  f"{len(counts['left_out'])} left out (every stock: universe.csv).</p>"]
        left = report.universe[report.universe["reason"] != ""].set_index("code")
        if len(left):
            parts.append(_table(left[["status", "days", "folds", "scored_days", "reason"]], fmt="{}"))
    if result.failed:
        rows = pd.DataFrame([{"fold": f, "model": m, "error": why} for (f, m), why in
                             sorted(result.failed.items())]).set_index("fold")
        parts += ["<h2>Failed model runs</h2>", _table(rows, fmt="{}")]
    if other_notes:
        parts += ["<h2>Notes</h2>", "<ul>", *(f"<li>{html.escape(n)}</li>" for n in other_notes), "</ul>"]
    config = out / "experiment.toml"
    if config.is_file():
        parts += ["<h2>Configuration</h2>",
                  '<p class="muted">experiment.toml: <code>forecaster run experiment.toml --out NEW</code> '
                  "reproduces this report.</p>", f"<pre>{html.escape(config.read_text())}</pre>"]
    page = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(report.model)} walk-forward report</title><style>{_STYLE}</style></head>"
            f"<body>{''.join(parts)}</body></html>")
    path = out / "report.html"
    with atomic_write(path, "w") as f:
        f.write(page)
    return path
