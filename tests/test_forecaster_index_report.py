"""The report an index manager reads (issue 80): an enhanced run on an index universe whose
series the data hold writes ``index_book.csv`` (the book against the index day by day) and the
index figures, and its ``report.html`` opens with the book judged against the index, every
number there ``metrics.json``'s; a run without an index universe is unchanged; ``predict
--strategy enhanced`` says the book's predicted tracking error, largest active weights and
the trades' cost, and draws ``next_day_active.png``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.data import write_synthetic_panel
from forecaster.reporting.tables import fmt_pct, fmt_ratio

ENHANCED = ["--strategy", "enhanced", "--tracking-error", "0.03", "--rebalance-every", "5",
            "--active-bound", "0.1", "--style-bound", "0.6", "--max-turnover", "0.2", "--alpha-ic", "0.04",
            "--risk-aversion", "5", "--benchmark-weights", "float_mv"]
DIVIDEND = 0.03  # a cash dividend of 3 % of the price on one day of each of ten members
FIGURES = ("index_excess.png", "tracking_error.png", "active_weights.png", "active_industries.png",
           "risk_split.png")
CLASSES = ("C39计算机、通信和其他电子设备制造业", "J66货币金融服务", "K70房地产业")


def _folder(tmp_path):
    """30 synthetic members, the 31st file turned into the series of sh.000300, and ten
    members paying a dividend (their preclose below the previous close) so that the
    total-return index can be estimated."""
    data = tmp_path / "syn"
    paths = write_synthetic_panel(data, n_stocks=31, n_days=320, seed=2)
    codes = sorted(p.name[:-4] for p in paths)
    (data / "sh.000300.csv").write_text(paths[-1].read_text().replace(codes[-1], "sh.000300"))
    paths[-1].unlink()
    for path in sorted(data.glob("syn.*.csv"))[:10]:
        frame = pd.read_csv(path)
        row = 250
        frame.loc[row, "preclose"] = round(frame.loc[row - 1, "close"] * (1 - DIVIDEND), 2)
        frame.to_csv(path, index=False)
    universe = tmp_path / "csi300.txt"
    universe.write_text("".join(f"{c.upper()}\t2010-01-04\t2099-12-31\n" for c in codes[:-1]))
    industries = tmp_path / "stock_industry.csv"  # baostock's export, GBK, names in code_name
    rows = [f"2026-03-09,{c},名称{i},{CLASSES[i % 3]},证监会行业分类" for i, c in enumerate(codes[:-1])]
    head = "updateDate,code,code_name,industry,industryClassification"
    industries.write_bytes("\n".join([head, *rows, ""]).encode("gbk"))
    return data, universe, industries


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The enhanced run on the index universe, and the same data without a universe (top-k)."""
    from test_forecaster_universe import QUICK

    tmp = tmp_path_factory.mktemp("index_report")
    data, universe, industries = _folder(tmp)
    out, plain = tmp / "enhanced", tmp / "plain"
    res = CliRunner().invoke(main, ["backtest", str(data), "--out", str(out), "--universe", str(universe),
                                    "--industries", str(industries), *ENHANCED, *QUICK])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["backtest", str(data), "--out", str(plain), *QUICK])
    assert res.exit_code == 0, res.output
    return out, plain


def test_index_book_csv_has_its_columns_and_the_books_returns(runs):
    out, _ = runs
    daily = pd.read_csv(out / "index_book.csv", parse_dates=["date"])
    assert list(daily.columns) == ["date", "book", "index_price", "index_total_return", "benchmark_weights",
                                   "equal_weight", "active", "excess_total_return", "excess_price",
                                   "predicted_active_sd", "turnover"]
    equity = pd.read_csv(out / "equity.csv", index_col="date", parse_dates=["date"])
    capital = 1_000_000.0
    book = equity["transformer"] / equity["transformer"].shift(1).fillna(capital) - 1
    assert np.allclose(daily["book"], book.to_numpy(), atol=1e-12)
    index = equity["index"] / equity["index"].shift(1).fillna(capital) - 1
    assert np.allclose(daily["index_price"], index.to_numpy(), atol=1e-12)
    assert np.allclose(daily["excess_price"], daily["book"] - daily["index_price"], atol=1e-15)
    assert np.allclose(daily["active"], daily["book"] - daily["benchmark_weights"], atol=1e-15)
    # the dividends planted: the total-return index lies above the price index on those days only
    added = daily["index_total_return"] - daily["index_price"]
    assert added.min() >= -1e-15 and 0 < (added > 1e-9).sum() <= 10
    assert added.max() < DIVIDEND
    # the enhanced book's forecast in force: its daily sd near the 3 % budget a year
    sd = daily["predicted_active_sd"].dropna() * np.sqrt(252)
    assert len(sd) > 0.5 * len(daily) and sd.max() <= 0.0301


def test_every_index_figure_is_written_and_shown(runs):
    out, _ = runs
    page = (out / "report.html").read_text()
    for name in FIGURES:
        assert (out / name).stat().st_size > 10_000, name
        assert f'alt="{name}"' in page
    top = pd.read_csv(out / "active_weights.csv")
    assert list(top.columns) == ["code", "name", "industry", "mean_active_weight"]
    codes = sorted(p.name[:-4] for p in (out.parent / "syn").glob("syn.*.csv"))
    for code, name, industry in top[["code", "name", "industry"]].itertuples(index=False):
        i = codes.index(code)  # named from the industries file's code_name, grouped by its class
        assert name == f"名称{i}" and industry == {0: "C制造业", 1: "J金融业", 2: "K房地产业"}[i % 3]
    assert (top["mean_active_weight"] != 0).all()
    assert top["mean_active_weight"].is_monotonic_decreasing
    split = pd.read_csv(out / "risk_split.csv")
    assert (split["total"] <= 0.0301).all() and (split[["styles", "specific"]] > 0).all().all()
    metrics = json.loads((out / "metrics.json").read_text())
    assert "index_book" in metrics


def _row(html: str, label: str) -> list[str]:
    """The cells of the first screen's row ``label``: the book, the top-k book, the equal weight."""
    screen = html.split('<h2 id="index">')[1].split('<h2 id="verdict">')[0]
    match = re.search(r"<tr[^>]*><td>" + re.escape(label) + r"</td>(.*?)</tr>", screen)
    assert match, label
    return re.findall(r"<td[^>]*>(.*?)</td>", match.group(1))


def test_the_first_screen_judges_the_book_with_metrics_json_numbers(runs):
    out, _ = runs
    html = (out / "report.html").read_text()
    assert html.index('<h2 id="index">Against sh.000300</h2>') < html.index('<h2 id="verdict">')
    book = json.loads((out / "metrics.json").read_text())["index_book"]
    total, price, topk = book["against_total_return"], book["book"], book["enhanced"]["topk"]
    last = max(total["years"], key=int)
    head = html.split('<h2 id="index">')[1].split("</thead>")[0]
    order = [head.index(name) for name in ("transformer&#x27;s enhanced book", "top-k book (dropout, top 10)",
                                           "the members&#x27; equal weight (no costs)")]
    assert order == sorted(order)  # the members' equal weight stays, as a further column
    daily = pd.read_csv(out / "index_book.csv")
    since = float(np.prod(1 + daily["book"]) / np.prod(1 + daily["index_total_return"]) - 1)
    tr, pr = "sh.000300 with dividends (est.)", "sh.000300 (price index)"
    this = f"this year ({last}, to date)"
    assert _row(html, f"since the start, over {tr}")[0] == fmt_pct(since)
    assert _row(html, f"a year, over {tr}")[0] == fmt_pct(total["excess"])
    assert _row(html, f"{this}, over {tr}")[0] == fmt_pct(total["years"][last])
    assert _row(html, f"a year, over {pr}")[:2] == [fmt_pct(price["excess"]), fmt_pct(topk["excess"])]
    assert _row(html, f"{this}, over {pr}")[:2] == [fmt_pct(price["years"][last]),
                                                    fmt_pct(topk["years"][max(topk["years"])])]
    assert _row(html, "tracking error")[0] == fmt_pct(total["te"], sign=False)
    assert _row(html, "information ratio")[0] == fmt_ratio(total["ir"])
    assert _row(html, "a year, over sh.000300 (price index)")[2] == fmt_pct(book["equal_weight"]["excess"])
    e = book["enhanced"]
    assert (f"Tracking error {fmt_pct(e['te_realised_against_weights'], sign=False)} realised against the "
            f"members at float_mv weights") in html
    assert f"the budget of {fmt_pct(0.03, sign=False)}" in html and "bias statistic" in html
    # the tables gain the index's columns
    glance = html.split("at a glance")[1].split("</table>")[0]
    assert "over sh.000300 with dividends, a year" in glance and "over sh.000300 (price), a year" in glance
    strategies = html.split('<h2 id="strategy">')[1].split("</table>")[0]
    assert "over sh.000300 with dividends, a year" in strategies


def test_a_run_without_an_index_universe_has_no_index_files(runs):
    _, plain = runs
    index_files = ("index_book.csv", "active_weights.csv", "risk_split.csv", "active_styles.csv", *FIGURES)
    assert not any((plain / name).exists() for name in index_files)
    html = (plain / "report.html").read_text()
    assert 'id="index"' not in html and "with dividends, a year" not in html
    assert "index_book" not in json.loads((plain / "metrics.json").read_text())


def test_predict_enhanced_says_its_risk_weights_and_cost_and_draws_them(tmp_path):
    data, run = tmp_path / "syn", tmp_path / "run"
    write_synthetic_panel(data, n_stocks=31, n_days=400, seed=2)
    tiny = ["--window", "8", "--d-model", "8", "--heads", "2", "--layers", "1", "--epochs", "1"]
    assert CliRunner().invoke(main, ["train", str(data), "--out", str(run), *tiny]).exit_code == 0
    res = CliRunner().invoke(main, ["predict", "--run", str(run), str(data), "--capital", "100000000",
                                    "--strategy", "enhanced", "--tracking-error", "0.03", "--active-bound",
                                    "0.05", "--style-bound", "0.6", "--max-turnover", "0.3", "--alpha-ic",
                                    "0.04", "--risk-aversion", "5", "--benchmark-weights", "equal"])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("enhanced book: predicted tracking error"))
    te = float(line.split("tracking error ")[1].split("%")[0]) / 100
    assert 0.005 < te <= 0.0301 and "largest active weights: syn." in line
    # the largest active weight named first: 1/30 of the benchmark less or more, at most the bound
    first = float(line.split("largest active weights: ")[1].split(" ")[1].rstrip(",%")) / 100
    assert 0 < abs(first) <= 0.0501
    orders = pd.read_csv(run / "orders.csv")
    live = orders[orders["status"].isin(["order", "partial", "limit_order"])]
    cost = next(x for x in res.output.splitlines() if x.startswith("trades' estimated cost"))
    assert cost.startswith(f"trades' estimated cost {live['est_costs'].sum():,.0f} CNY")
    assert (run / "next_day_active.png").stat().st_size > 10_000


CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.skipif(not CHROMIUM.is_file(), reason="needs Chromium (apt-get install chromium)")
def test_the_first_screen_and_its_figures_fit_1280_px_and_a4(runs, tmp_path):
    """In Chromium at 1280 px and under the print stylesheet at A4's 710 px: the first screen's
    tables and every figure stay inside the page."""
    from test_forecaster_report_page import _render

    out, _ = runs
    for width, print_css in ((1280, False), (710, True)):
        check = _render(out / "report.html", width, tmp_path, print_css=print_css)
        mine = [t for t in check["tables"] if t["first"] in ("after costs, against sh.000300", "at a glance")]
        assert len(mine) == 2
        for t in mine:
            assert t["scroll"] <= t["container"] + 1 and t["right"] <= t["body"] + 1, t
        shown = {i["alt"] for i in check["images"]}
        assert set(FIGURES) <= shown
        for i in check["images"]:
            assert i["ok"] and i["right"] <= i["body"] + 1, i


def test_next_day_active_draws_chinese_names_with_the_packaged_font(tmp_path, recwarn):
    """The names of next_day_active.png (and active_weights.png's, by the same font) draw in
    Noto Sans CJK: no glyph is missing."""
    from forecaster.reporting.figures import CJK_FONT
    from forecaster.reporting.index_figures import plot_next_day_active

    assert CJK_FONT is not None
    table = pd.DataFrame({"code": ["sh.600000", "sz.000001", "sh.600519"],
                          "label": ["sh.600000 浦发银行", "sz.000001 平安银行", "sh.600519 贵州茅台"],
                          "target": [0.05, 0.0, 0.02], "benchmark": [0.02, 0.01, 0.04]})
    path = plot_next_day_active(table, tmp_path / "next_day_active.png", "tomorrow")
    assert path.stat().st_size > 5_000
    assert not [w for w in recwarn if "missing from" in str(w.message)]


def test_an_enhanced_run_writes_what_it_held_each_day_with_its_cash(runs):
    """holdings.csv (issue 86 item 10): date,code,weight after each close, a CASH row, each
    day summing to 1; its stocks' value is the equity less the cash."""
    out, _ = runs
    held = pd.read_csv(out / "holdings.csv", parse_dates=["date"])
    assert list(held.columns) == ["date", "code", "weight"]
    sums = held.groupby("date")["weight"].sum()
    assert np.allclose(sums, 1.0, atol=1e-9)
    equity = pd.read_csv(out / "equity.csv", index_col="date", parse_dates=["date"])
    assert set(sums.index) == set(equity.index)
    cash = held[held["code"] == "CASH"].set_index("date")["weight"]
    assert len(cash) == len(equity) and (cash >= -1e-12).all() and cash.iloc[5:].max() < 0.05
