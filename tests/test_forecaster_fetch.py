"""`forecaster fetch` with baostock and akshare, replaying recorded responses (tests/recorded)
in place of the libraries: the files written load with load_csv (daily and minute), the
queries ask for what the user asked, and a folder fetch resumes, waits between requests and
reports the codes that failed without stopping."""

from __future__ import annotations

import types
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.data import load_csv
from forecaster.data.fetch import BAOSTOCK_MINUTE_FIELDS

RECORDED = Path(__file__).parent / "recorded"


class Replay:
    """Stand-ins for the ``akshare`` and ``baostock`` modules that answer from the recordings
    and log every call; codes in ``empty`` get no rows."""

    def __init__(self, empty=()):
        self.calls, self.empty = [], set(empty)
        self.akshare = types.SimpleNamespace(
            stock_zh_a_hist=self._ak_daily, stock_zh_a_hist_min_em=self._ak_min
        )
        ok = types.SimpleNamespace(error_code="0", error_msg="success")
        self.baostock = types.SimpleNamespace(
            login=lambda: ok, logout=lambda: None, query_history_k_data_plus=self._bs_query
        )

    def _read(self, name, symbol):
        frame = pd.read_csv(RECORDED / name, dtype=str)
        return frame.iloc[:0] if symbol in self.empty else frame

    def _ak_daily(self, **kwargs):
        self.calls.append(("stock_zh_a_hist", kwargs))
        return self._read("akshare_stock_zh_a_hist_000001.csv", kwargs["symbol"]).assign(
            股票代码=kwargs["symbol"]
        )

    def _ak_min(self, **kwargs):
        self.calls.append(("stock_zh_a_hist_min_em", kwargs))
        return self._read(f"akshare_stock_zh_a_hist_min_em_000001_{kwargs['period']}.csv", kwargs["symbol"])

    def _bs_query(self, code, fields, **kwargs):
        self.calls.append(("query_history_k_data_plus", {"code": code, "fields": fields, **kwargs}))
        frame = self._read(f"baostock_{kwargs['frequency']}_sz.000001.csv", code).assign(code=code)
        rows = iter(frame.values.tolist())
        state = {}

        def next_row():
            state["row"] = next(rows, None)
            return state["row"] is not None

        return types.SimpleNamespace(
            error_code="0",
            error_msg="",
            fields=list(frame.columns),
            next=next_row,
            get_row_data=lambda: state["row"],
        )


@pytest.fixture
def replay(monkeypatch):
    rec = Replay(empty={"000002", "sz.000002"})
    monkeypatch.setitem(__import__("sys").modules, "akshare", rec.akshare)
    monkeypatch.setitem(__import__("sys").modules, "baostock", rec.baostock)
    return rec


def _fetch(*args):
    return CliRunner().invoke(main, ["fetch", *args, "--start", "2024-01-02", "--end", "2024-01-08"])


def test_akshare_daily_and_minute_files_load(replay, tmp_path):
    res = _fetch(
        "sz.000001", "--source", "akshare", "--adjustflag", "2", "--out", str(tmp_path / "sz.000001.csv")
    )
    assert res.exit_code == 0, res.output
    assert replay.calls[-1] == (
        "stock_zh_a_hist",
        {
            "symbol": "000001",
            "period": "daily",
            "start_date": "20240102",
            "end_date": "20240108",
            "adjust": "qfq",
        },
    )
    frame, report = load_csv(tmp_path / "sz.000001.csv")
    assert report.format == "akshare" and len(frame) == 5 and frame["code"].iloc[0] == "sz.000001"
    assert frame["volume"].iloc[0] == 1495436 * 100  # lots -> shares
    res = _fetch(
        "000001.SZ", "--source", "akshare", "--frequency", "5", "--out", str(tmp_path / "m" / "sz.000001.csv")
    )
    assert res.exit_code == 0, res.output
    assert replay.calls[-1][1]["start_date"] == "2024-01-02 09:30:00" and replay.calls[-1][1]["period"] == "5"
    bars, report = load_csv(tmp_path / "m" / "sz.000001.csv")
    assert report.format == "akshare_minute" and report.bar_minutes == 5 and len(bars) == 48
    assert bars.index.name == "time" and bars["code"].iloc[0] == "sz.000001"


def test_baostock_minute_bars_ask_for_the_minute_fields(replay, tmp_path):
    res = _fetch("sz.000001", "--frequency", "5", "--out", str(tmp_path / "sz.000001.csv"))
    assert res.exit_code == 0, res.output
    name, call = replay.calls[-1]
    assert call["fields"] == BAOSTOCK_MINUTE_FIELDS and call["frequency"] == "5" and call["adjustflag"] == "3"
    # which adjustment it fetched, and what that means for minute returns (no preclose)
    assert "5-minute bars, unadjusted (adjustflag 3): the prices traded. A minute file has no preclose" in (
        " ".join(res.output.split()))
    bars, report = load_csv(tmp_path / "sz.000001.csv")
    assert report.format == "baostock_minute" and len(bars) == 48 and bars["first_bar"].sum() == 1
    res = _fetch("sz.000001", "--frequency", "1", "--out", str(tmp_path / "one.csv"))
    assert res.exit_code == 1 and "baostock has no 1-minute bars" in res.output


def test_a_folder_fetch_resumes_waits_and_reports_failures(replay, tmp_path, monkeypatch):
    waits = []
    monkeypatch.setattr("forecaster.data.fetch.time.sleep", waits.append)
    codes = tmp_path / "codes.txt"
    codes.write_text("# my universe\nsz.000001\n000002\n300001.SZ\n")
    out = tmp_path / "bars"
    res = _fetch("--codes-file", str(codes), "--source", "akshare", "--pause", "1.5", "--out", str(out))
    assert res.exit_code == 1, res.output
    assert "2 file(s) written, 0 already there (kept), 1 failed" in res.output
    assert "sz.000002: FetchError: akshare returned no rows" in res.output
    assert sorted(p.name for p in out.iterdir()) == ["sz.000001.csv", "sz.300001.csv"]
    assert waits == [1.5, 1.5]  # between the three requests
    # again: the two files are kept, only the failed code is asked for
    replay.calls.clear()
    res = _fetch("--codes-file", str(codes), "--source", "akshare", "--out", str(out))
    assert [c[1]["symbol"] for c in replay.calls] == ["000002"]
    assert "0 file(s) written, 2 already there (kept), 1 failed" in res.output


def test_a_missing_library_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "akshare", None)  # import fails
    res = _fetch("sz.000001", "--source", "akshare", "--out", str(tmp_path / "x.csv"))
    assert res.exit_code == 1 and "akshare is not installed" in res.output and "[akshare]" in res.output
    assert not (tmp_path / "x.csv").exists()
