"""``report.html``: one self-contained page per report folder (figures embedded as data
URIs, no scripts, no network): the verdict first, the model-vs-baselines table, the figures,
the universe, failures, the configuration and the data caveats."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from seq2seq.core import atomic_write

# Figures in the order a reader wants them, with what each shows.
FIGURES = (
    ("equity.png", "Equity after costs against the benchmark, with drawdown"),
    ("rolling_ic.png", "Rolling daily rank IC"),
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


def _figure(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure id="{html.escape(path.stem)}"><img alt="{html.escape(path.name)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{html.escape(path.name)}: '
            f"{html.escape(caption)}</figcaption></figure>")


def write_html(report, result, out: str | Path) -> Path:
    """Write ``out/report.html`` from a :class:`~forecaster.reporting.report.Report` and the figures
    already written into ``out`` (and ``out/experiment.toml`` when the run has one)."""
    out = Path(out)
    table = report.summary_table()
    table.index.name = "model"
    notes = [n for n in report.notes]
    caveats = [n for n in notes if "SYNTHETIC" in n or "survivorship" in n or "not scored" in n]
    other_notes = [n for n in notes if n not in caveats]
    parts = [f"<h1>Walk-forward report: {html.escape(report.model)}</h1>",
             f'<p class="muted">{len(result.folds)} folds, {result.predictions["code"].nunique()} stocks, '
             f"{result.predictions.index.min().date()} to {result.predictions.index.max().date()}; "
             f"label: {html.escape(result.config.label)}, horizon {result.config.horizon}</p>",
             "<h2>Verdict</h2>", '<ul class="verdict">',
             *(f"<li>{html.escape(line)}</li>" for line in report.verdict), "</ul>"]
    if caveats:
        parts += ["<h2>Data caveats</h2>", "<ul>",
                  *(f'<li class="caveat">{html.escape(c)}</li>' for c in caveats), "</ul>"]
    parts += ["<h2>Model against baselines</h2>",
              '<p class="muted">– : not computed (see the notes). daily_rank_ic, icir and q_spread on the '
              "label above; ic_diff_p: Newey-West test of the daily rank-IC difference.</p>",
              _table(table, highlight=report.model)]
    figures = [(out / name, text) for name, text in FIGURES if (out / name).is_file()]
    if figures:
        parts += ["<h2>Figures</h2>", *(_figure(p, t) for p, t in figures)]
    if len(report.universe):
        counts = report.universe_counts
        parts += ["<h2>Universe</h2>",
                  f"<p>{counts['loaded']} stocks loaded, {counts['used']} used, "
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
