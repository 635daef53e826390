"""report.html as a portfolio manager reads it: the verdict compares the strategies after
costs first, tables carry units and are sorted by the verdict's column, empty columns are left
out and named, and the page fits a 1280 px screen and A4 paper (rendered in a real headless
Chromium where /usr/bin/chromium is installed; skipped elsewhere)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.evaluation.scoring import score_run
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.models.panel.baselines import FactorScore, FeatureRegressor
from forecaster.models.stock.baselines import ZeroForecast
from forecaster.portfolio.backtest import BacktestConfig
from forecaster.reporting.report import write_report

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny synthetic panel run (seconds): a ridge on the features stands in for the
    Transformer (the page is about rendering), two factor scores and the constant zero
    forecast beside it."""
    frames = synthetic_panel(n_stocks=14, n_days=330, signal_ic=0.15, seed=3)
    panel = Panel.from_frames(frames)
    models = {"transformer": FeatureRegressor("ridge"), "momentum_20d": FactorScore("momentum_20d"),
              "low_vol_20d": FactorScore("low_vol_20d"), "zero": ZeroForecast()}
    config = WalkForwardConfig(train_days=180, retrain_every=80, min_stock_days=60, margin_days=60,
                               progress=False, n_jobs=1)
    result = walk_forward(frames, models, config, panel=panel)
    report = score_run(result, panel, models, "transformer", BacktestConfig.for_universe(panel.n_stocks))
    out = tmp_path_factory.mktemp("page")
    write_report(report, result, out, extra={"data": "synthetic_panel(14, 330)"})
    return report, result, out


class _Tables(HTMLParser):
    """Each table's header and body cells, and the page's images and head tags."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self.metas, self.title = [], [], [], ""
        self._cell = None
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append({"head": [], "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th"):
            self._cell = [tag, ""]
        elif tag == "img":
            self.images.append(attrs)
        elif tag == "meta":
            self.metas.append(attrs)
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            kind, text = self._cell
            (self.tables[-1]["head"] if kind == "th" else self.tables[-1]["rows"][-1]).append(text.strip())
            self._cell = None
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data
        if self._in_title:
            self.title += data


def _page(out) -> tuple[str, _Tables]:
    text = (out / "report.html").read_text()
    parser = _Tables()
    parser.feed(text)
    return text, parser


def _table(parser, first_header: str) -> dict:
    return next(t for t in parser.tables if t["head"] and t["head"][0] == first_header)


def test_page_head_names_the_data_and_fits_devices(tiny):
    _, _, out = tiny
    text, page = _page(out)
    assert any(m.get("name") == "viewport" and "width=device-width" in m.get("content", "")
               for m in page.metas)
    assert "SYNTHETIC panel" in page.title and "transformer" in page.title
    assert "<h1>Walk-forward report: transformer on SYNTHETIC panel</h1>" in text
    assert "@media print" in text and "@page" in text
    assert {img["alt"] for img in page.images} == {p.name for p in out.glob("*.png")}
    for name in ("equity.png", "excess_return.png", "monthly_returns.png", "holdings_turnover.png",
                 "quantile_cumulative.png", "rolling_ic.png"):
        assert (out / name).is_file(), name


def test_verdict_compares_the_strategies_after_costs_first(tiny):
    report, _, _ = tiny
    first = report.verdict[0]
    assert first.startswith("transformer strategy after costs:") and "%/yr" in first
    second = report.verdict[1]
    assert "best baseline strategy" in second and "after costs by" in second and "%/yr" in second
    assert "paired Newey-West test of the daily returns' difference" in second
    assert re.search(r"p (=|<) 0\.\d{3}", second) and "p = +" not in second


def test_strategy_table_sorted_with_units_and_unsigned_p_values(tiny):
    report, _, out = tiny
    _, page = _page(out)
    table = _table(page, "strategy")
    head = table["head"]
    rows = [r for r in table["rows"] if r]
    after = head.index("after costs, a year")
    vs = head.index("this minus transformer, a year")  # on the days both cover, as the verdict compares
    keys = [0.0 if r[0] == "transformer" else float(r[vs].replace(" %", "")) for r in rows
            if r[0] != "benchmark"]
    assert keys == sorted(keys, reverse=True)  # best first, the model under test at 0
    days = head.index("days")
    assert all(r[days] == f"{len(report.backtests['transformer'].returns):,}" for r in rows)  # all share
    assert all(r[after].endswith(" %") for r in rows)
    assert rows[-1][0] == "benchmark"
    p = head.index("p, paired vs transformer")
    assert all(not r[p].startswith(("+", "-")) for r in rows)
    drawdown = head.index("max drawdown")
    assert all(r[drawdown].startswith("-") for r in rows)  # a fall, as in the figures
    # the numbers are the report's, rendered
    risk = report.strategy.risk
    top = rows[0][0]
    assert rows[0][after] == f"{risk.loc[top, 'annual_return'] * 100:+.2f} %"


def test_skill_table_sorted_by_daily_rank_ic_without_empty_columns(tiny):
    report, _, out = tiny
    text, page = _page(out)
    table = _table(page, "model")
    head, rows = table["head"], [r for r in table["rows"] if r]
    ic = head.index("daily rank IC")
    values = [float(r[ic]) for r in rows if r[ic] != "–"]
    assert values == sorted(values, reverse=True)
    for j in range(1, len(head)):
        assert any(r[j] != "–" for r in rows), head[j]  # no column empty in every row
    assert "p, DM vs transformer" not in head and "Columns left out" in text
    zero = next(r for r in rows if r[0] == "zero")
    assert zero[head.index("top - bottom quintile, a day")] == "–"
    assert zero[head.index("quintile monotonicity")] == "–"
    assert "a constant forecast has no ranking" in text
    assert "zero" not in report.quantiles and report.not_computed["zero"]["q_spread"]


def test_tear_sheet_tables(tiny):
    report, _, out = tiny
    text, page = _page(out)
    risk = _table(page, "risk")
    labels = [r[0] for r in risk["rows"] if r]
    for label in ("volatility, a year", "information ratio (vs the benchmark)", "Sortino ratio",
                  "Calmar ratio (annual return / max drawdown)", "turnover, a year", "costs paid (CNY)",
                  "trades", "blocked trades (limit, suspension, cash)", "annual return before costs"):
        assert label in labels
    drawdowns = _table(page, "#")
    assert drawdowns["head"][1:5] == ["peak", "trough", "recovery", "depth"]
    assert "Returns by year and month" in text
    years = _table(page, "year")
    assert len([r for r in years["rows"] if r]) == len(report.strategy.yearly)
    assert (out / "risk.csv").is_file() and (out / "drawdowns.csv").is_file()


# ------------------------------------------------------------------------------------------------
# a real browser

_CHECK = """<script>
(function () {
  var PRINT = %s;
  if (PRINT) {  // the print stylesheet, applied on screen: @media print's rules appended unconditionally
    for (var s of Array.from(document.styleSheets)) {
      for (var r of Array.from(s.cssRules)) {
        if (r.media && r.media.mediaText.indexOf('print') >= 0) {
          for (var rr of Array.from(r.cssRules)) {
            if (rr.type === 1) s.insertRule(rr.cssText, s.cssRules.length);
          }
        }
      }
    }
  }
  function check() {
    var out = {width: window.innerWidth, doc: document.documentElement.scrollWidth, tables: [], images: []};
    var body = document.body.getBoundingClientRect();
    document.querySelectorAll('table').forEach(function (t) {
      var box = t.getBoundingClientRect(), c = t.parentElement;
      out.tables.push({first: (t.querySelector('th') || {}).textContent, width: box.width,
                       container: c.clientWidth, scroll: c.scrollWidth, right: box.right, body: body.right});
    });
    Array.from(document.images).forEach(function (i) {
      var box = i.getBoundingClientRect();
      out.images.push({alt: i.alt, ok: i.complete && i.naturalWidth > 0, width: box.width, right: box.right,
                       body: body.right});
    });
    document.body.setAttribute('data-check', JSON.stringify(out));
  }
  if (document.readyState === 'complete') check(); else window.addEventListener('load', check);
})();
</script>"""


def _render(page: Path, width: int, tmp_path: Path, print_css: bool = False) -> dict:
    probe = tmp_path / f"probe_{width}_{int(print_css)}.html"
    probe.write_text(page.read_text().replace("</body>", _CHECK % ("true" if print_css else "false")
                                              + "</body>"))
    res = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          f"--window-size={width},900", "--virtual-time-budget=5000", "--dump-dom",
                          probe.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'data-check="([^"]*)"', res.stdout)
    assert found, res.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))


def _assert_fits(check: dict, width: int) -> None:
    assert check["doc"] <= width, f"the page scrolls sideways: {check['doc']} px > {width}"
    for t in check["tables"]:
        assert t["scroll"] <= t["container"] + 1 and t["right"] <= t["body"] + 1, t
    assert check["images"]
    for i in check["images"]:
        assert i["ok"], f"{i['alt']} did not load"
        assert i["right"] <= i["body"] + 1, i


@pytest.mark.skipif(not CHROMIUM.is_file(), reason="needs Chromium (apt-get install chromium)")
def test_page_fits_1280_px_and_a4_in_chromium(tiny, tmp_path):
    _, _, out = tiny
    page = out / "report.html"
    _assert_fits(_render(page, 1280, tmp_path), 1280)
    # A4 portrait less the print margins is about 710 CSS px: the print stylesheet must fit it
    _assert_fits(_render(page, 710, tmp_path, print_css=True), 710)
    assert shutil.which(str(CHROMIUM))
