"""What the loader says is missing or implausible (forecaster.data.daily.quality): impossible bars,
jumps beyond the daily limit that no preclose explains, an adjustflag unlike the other
files', each counted and named (file, line, date) in the load summary and an error with
``strict``; stocks whose files lack columns the others have are named, and their features
are NaN with a warning from the panel model, the other stocks' features unchanged."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.app.experiment import DataConfig
from forecaster.app.pipeline import load_data
from forecaster.data import DataError, SyntheticConfig, load_csv, load_dir, synthetic_prices
from forecaster.data.minute.features import INTRADAY_FEATURES
from forecaster.data.panel import Panel
from forecaster.features.factors import (
    MARKET_FEATURES,
    NEEDS,
    available_features,
    feature_tensor,
    features_note,
    missing_inputs,
    missing_inputs_text,
)
from forecaster.models.panel.model import PanelTransformer

N_DAYS = 60
CODES = [f"sz.00000{i}" for i in range(1, 6)]
BAR = "impossible bars (high below low, or open or close outside low..high)"
JUMP = "prices beyond the board's daily limit that no preclose explains"
KEPT = "(kept as they are; --strict stops instead)"


def bars(i: int, n_days: int = N_DAYS) -> pd.DataFrame:
    """Stock ``i``'s baostock export (synthetic bars: inside the limits, on the tick)."""
    return synthetic_prices(SyntheticConfig(n_days=n_days, seed=i)).assign(code=CODES[i])


def trading_row(frame: pd.DataFrame, at: int) -> int:
    """The first trading row at or after ``at`` (suspended rows are not checked for jumps)."""
    return int(np.flatnonzero((frame["tradestatus"] == 1).to_numpy() & (np.arange(len(frame)) >= at))[0])


def write_folder(folder: Path, change=None, n_days: int = N_DAYS) -> dict[str, pd.DataFrame]:
    """Five stocks' files; ``change(i, frame)`` returns stock ``i``'s frame as written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for i in range(len(CODES)):
        frame = bars(i, n_days)
        if change is not None:
            frame = change(i, frame)
        frame.to_csv(folder / f"{CODES[i]}.csv", index=False)
        written[CODES[i]] = frame
    return written


def clause(loaded, start: str) -> str:
    """The load summary's clause that starts with ``start`` (checked to be in the summary)."""
    text = next(part for part in loaded.quality() if part.startswith(start))
    assert f"; {text}" in loaded.summary()
    return text


# ----------------------------------------------------------------------------- clean files


def test_clean_folder_is_quiet_and_loads_strict(tmp_path, caplog):
    def rounding(i, frame):  # a hair outside low..high is rounding, not an impossible bar
        frame.loc[3, "open"] = frame.loc[3, "high"] + 0.004
        return frame

    write_folder(tmp_path, rounding)
    with caplog.at_level(logging.WARNING):
        loaded = load_dir(tmp_path)
    assert loaded.flagged() == [] and loaded.lacking == {} and loaded.adjust == {}
    assert loaded.quality() == [] and "kept" not in loaded.summary()
    assert loaded.usual_adjust == "3" and not caplog.records
    strict = load_dir(tmp_path, strict=True)
    assert strict.summary() == loaded.summary()


# ----------------------------------------------------------------------------- impossible bars


@pytest.mark.parametrize("column, plant, expected", [
    ("high", lambda f, r: f.loc[r, "low"] - 0.5, "a high at or above the low"),
    ("open", lambda f, r: f.loc[r, "high"] + 0.3, "an open within low..high"),
    ("close", lambda f, r: f.loc[r, "low"] - 0.05, "a close within low..high"),
])
def test_impossible_bar_is_counted_named_and_strict_raises(tmp_path, column, plant, expected):
    row = {}

    def bad(i, frame):
        if i == 1:
            row["at"] = r = trading_row(frame, 10)
            frame.loc[r, column] = round(plant(frame, r), 2)
        return frame

    written = write_folder(tmp_path, bad)
    frame, r = written["sz.000002"], row["at"]
    date, line = frame.loc[r, "date"], r + 2
    loaded = load_dir(tmp_path)
    value = f"{frame.loc[r, column]:g}"
    low, high = f"{frame.loc[r, 'low']:g}", f"{frame.loc[r, 'high']:g}"
    want = (f"{expected} {low}" if column == "high" else f"{expected} {low}..{high}")
    assert clause(loaded, "1 file with impossible") == (
        f"1 file with {BAR} {KEPT}: sz.000002.csv line {line} ({date}): {column} {value}, expected {want}")
    [(path, flag)] = loaded.flagged()
    assert Path(path).name == "sz.000002.csv" and (flag.kind, flag.line, flag.date, flag.rows) == (
        "bar", line, date, 1)
    # the row is kept as it is
    assert loaded.frames["sz.000002"].loc[pd.Timestamp(date), column] == frame.loc[r, column]
    with pytest.raises(DataError, match=rf"sz\.000002\.csv: line {line} \({date}\), column '{column}': "
                                        rf"expected {expected}.*got {value}"):
        load_dir(tmp_path, strict=True)
    with pytest.raises(DataError, match=rf"line {line} \({date}\)"):
        load_data(DataConfig(path=str(tmp_path), strict=True))
    assert "1 file with impossible" in load_data(DataConfig(path=str(tmp_path))).summary


# ----------------------------------------------------------------------------- jumps


def test_close_far_beyond_the_limit_is_named(tmp_path):
    row = {}

    def spike(i, frame):
        if i == 2:
            row["at"] = r = trading_row(frame, 20)
            frame.loc[r, ["close", "high"]] = frame.loc[r, "close"] * 100
        return frame

    written = write_folder(tmp_path, spike)
    frame, r = written["sz.000003"], row["at"]
    loaded = load_dir(tmp_path)
    text = clause(loaded, "1 file with prices")
    assert text.startswith(f"1 file with {JUMP} {KEPT}: sz.000003.csv line {r + 2} ({frame.loc[r, 'date']}): "
                           f"close {frame.loc[r, 'close']:g}, expected a close within the daily limit of 10% "
                           f"around preclose {frame.loc[r, 'preclose']:g}")
    [(_, flag)] = loaded.flagged()
    assert flag.rows == 1  # the next day's preclose is the true close: no second jump
    with pytest.raises(DataError, match=rf"sz\.000003\.csv: line {r + 2} .*column 'close'"):
        load_dir(tmp_path, strict=True)


def test_without_preclose_the_spike_and_its_return_are_jumps(tmp_path):
    def spike(i, frame):
        frame = frame.drop(columns="preclose")
        if i == 2:
            r = trading_row(frame, 20)
            frame.loc[r, ["close", "high"]] = frame.loc[r, "close"] * 100
        return frame

    write_folder(tmp_path, spike)
    loaded = load_dir(tmp_path)
    [(_, flag)] = loaded.flagged()
    assert flag.kind == "jump" and flag.rows == 2 and "around the previous close" in flag.expected
    assert loaded.lacking == {}  # no file has preclose: nothing lacks it


@pytest.mark.parametrize("preclose", [True, False])
def test_an_ex_rights_gap_is_explained_by_the_preclose(tmp_path, preclose):
    def split(i, frame):  # a 10-for-10 bonus issue on day 30: prices halve
        if i == 0:
            r = trading_row(frame, 30)
            prices = ["open", "high", "low", "close", "preclose"]
            frame.loc[r:, prices] = (frame.loc[r:, prices] * 0.5).round(2)
            frame.loc[r:, "volume"] *= 2  # twice the shares trade for the same amount
        return frame if preclose else frame.drop(columns="preclose")

    write_folder(tmp_path, split)
    flags = load_dir(tmp_path).flagged()
    if preclose:
        assert flags == []
    else:  # nothing says the gap is no return
        [(path, flag)] = flags
        assert Path(path).name == "sz.000001.csv" and flag.kind == "jump" and flag.column == "close"


def test_listing_and_relisting_days_have_no_limit_but_a_mismatched_preclose_does_not_explain(tmp_path):
    def listing(i, frame):
        if i == 0:  # a new listing: the first day trades at three times its issue price
            frame.loc[0, "preclose"] = round(frame.loc[0, "close"] / 3, 2)
        if i == 1:  # suspended for 25 days, relisted at four times the last price
            last = frame.loc[9, "close"]
            frame.loc[10:34, ["open", "high", "low", "close", "preclose"]] = last
            frame.loc[10:34, ["volume", "amount", "tradestatus"]] = 0
            frame.loc[10:34, "turn"] = np.nan
            prices = ["open", "high", "low", "close", "preclose"]
            frame.loc[35:, prices] = frame.loc[35:, prices] * 4
            frame.loc[35:, "amount"] *= 4  # the same shares at four times the price
            frame.loc[35, "preclose"] = last
        if i == 2:  # a preclose that does not explain a tripled close mid-file
            r = trading_row(frame, 30)
            frame.loc[r, "preclose"] = round(frame.loc[r, "close"] / 3, 2)
        return frame

    write_folder(tmp_path, listing)
    loaded = load_dir(tmp_path)
    assert [(Path(p).name, f.kind) for p, f in loaded.flagged()] == [("sz.000003.csv", "jump")]


# ----------------------------------------------------------------------------- adjustflag


def test_a_forward_adjusted_file_among_unadjusted_ones_is_named(tmp_path):
    def forward(i, frame):
        if i == 3:
            frame["adjustflag"] = 2
        return frame

    written = write_folder(tmp_path, forward)
    loaded = load_dir(tmp_path)
    first = written["sz.000004"].loc[0, "date"]
    assert clause(loaded, "1 file with an adjustflag") == (
        f"1 file with an adjustflag other than the others' 3 (unadjusted) {KEPT}: sz.000004.csv line 2 "
        f"({first}, {N_DAYS} rows): adjustflag 2 (forward-adjusted)")
    expected = r"expected 3 \(unadjusted\) as in the other 4 file\(s\), got 2 \(forward-adjusted\)"
    with pytest.raises(DataError, match=rf"sz\.000004\.csv: line 2 .*column 'adjustflag': {expected}"):
        load_dir(tmp_path, strict=True)


def test_one_file_whose_adjustflag_changes_midway(tmp_path):
    frame = bars(0)
    frame.loc[40:, "adjustflag"] = 1
    path = tmp_path / "sz.000001.csv"
    frame.to_csv(path, index=False)
    _, report = load_csv(path)
    [flag] = report.flags
    assert (flag.kind, flag.line, flag.rows, flag.got) == ("adjustflag", 42, 20, "1 (backward-adjusted)")
    assert "as in the file's other rows" in report.summary()
    with pytest.raises(DataError, match="line 42"):
        load_csv(path, strict=True)


def test_flags_survive_the_cache(tmp_path):
    def forward(i, frame):
        if i == 3:
            frame["adjustflag"] = 2
        if i == 1:
            frame.loc[12, "high"] = frame.loc[12, "low"] - 1
        return frame

    write_folder(tmp_path, forward)
    first = load_dir(tmp_path, cache=True)
    again = load_dir(tmp_path, cache=True)
    assert again.from_cache and again.quality() == first.quality() and len(first.quality()) == 2
    assert again.flagged() == first.flagged() and len(first.flagged()) == 2
    with pytest.raises(DataError, match="sz.000002.csv"):
        load_dir(tmp_path, cache=True, strict=True)


# ----------------------------------------------------------------------------- missing columns


def lacking(i, frame):
    return frame.drop(columns=["turn", "amount"]) if i == 0 else frame


def test_a_stock_lacking_columns_is_named(tmp_path, caplog):
    write_folder(tmp_path, lacking)
    with caplog.at_level(logging.WARNING):
        loaded = load_dir(tmp_path)
    assert loaded.lacking == {"sz.000001": ("amount", "turnover")}
    assert clause(loaded, "1 stock") == ("1 stock lacks columns amount, turn that the others have: "
                                                   "sz.000001; features that need them are missing for it")
    assert any("sz.000001" in r.getMessage() and "amount, turn" in r.getMessage() for r in caplog.records)
    load_dir(tmp_path, strict=True)  # not implausible: strict loads it


def test_lacking_columns_make_that_stocks_features_nan_and_change_no_other(tmp_path):
    write_folder(tmp_path / "intact")
    write_folder(tmp_path / "lacking", lacking)
    intact = Panel.from_frames(load_dir(tmp_path / "intact").frames)
    panel = Panel.from_frames(load_dir(tmp_path / "lacking").frames)
    names = tuple(n for n in MARKET_FEATURES if all(c in intact.fields for c in NEEDS.get(n, ())))
    a, b = feature_tensor(intact, names), feature_tensor(panel, names)
    np.testing.assert_array_equal(a[:, 1:], b[:, 1:])  # the other four stocks: unchanged
    need = {"amount", "turnover"}
    lost = [k for k, n in enumerate(names) if need & set(NEEDS.get(n, ()))]
    kept = [k for k in range(len(names)) if k not in lost]
    assert {names[k] for k in lost} == {"vwap_close", "log_turnover", "log_amount_20d", "turnover_20d",
                                        "illiquidity_20d", "abnormal_turnover"}
    assert np.isnan(b[:, 0, lost]).all()
    np.testing.assert_array_equal(a[:, 0, kept], b[:, 0, kept])
    assert missing_inputs(panel, names) == {"sz.000001": ("amount", "turnover")}
    assert missing_inputs(intact, names) == {}


def test_a_few_empty_cells_are_not_a_lacking_column(tmp_path):
    def holes(i, frame):
        if i == 0:
            frame.loc[[5, 17, 33], "turn"] = np.nan
        return frame

    write_folder(tmp_path, holes)
    loaded = load_dir(tmp_path)
    assert loaded.lacking == {} and loaded.reports["sz.000001"].missing_values == {"turnover": 3}
    assert missing_inputs_text(Panel.from_frames(loaded.frames)) == ""


def test_the_panel_model_warns_in_fit_and_predict(tmp_path, caplog):
    write_folder(tmp_path, lacking, n_days=160)
    panel = Panel.from_frames(load_dir(tmp_path).frames)
    model = PanelTransformer(window=5, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_epochs=1, n_seeds=1,
                             days_per_batch=16, device="cpu", random_state=0)
    with caplog.at_level(logging.WARNING, logger="forecaster.models.panel.model"):
        model.fit(panel)
        fit_log = [r.getMessage() for r in caplog.records]
        caplog.clear()
        scores = model.predict(panel)
        predict_log = [r.getMessage() for r in caplog.records]
    for when, messages in (("fit", fit_log), ("predict", predict_log)):
        [text] = [m for m in messages if m.startswith(f"PanelTransformer {when}:")]
        assert ("1 stock without any value of amount, turnover that other stocks have: sz.000001; features "
                in text and "log_turnover" in text and "vwap_close" in text and "missing (NaN)" in text)
    assert "sz.000001" in scores.index.get_level_values("code")  # still scored, and said so


def test_features_the_data_cannot_give_are_left_out_and_said(tmp_path):
    """Data without amount and turnover (Qlib's community folders): their features are left
    out of the defaults, and the note names each with the columns it lacks; the minute-bar
    features are not counted without minute bars."""
    write_folder(tmp_path / "full")
    write_folder(tmp_path / "bare", lambda i, frame: frame.drop(columns=["amount", "turn"]))
    full = Panel.from_frames(load_dir(tmp_path / "full").frames)
    bare = Panel.from_frames(load_dir(tmp_path / "bare").frames)
    daily = [n for n in MARKET_FEATURES if n not in INTRADAY_FEATURES]
    assert features_note(full, MARKET_FEATURES) == (  # these synthetic exports carry no valuation
        f"features: {len(daily) - 3} of {len(daily)} computed; left out, the data lacking their columns: "
        "book_to_price (pb_mrq); earnings_to_price (pe_ttm); sales_to_price (ps_ttm)")
    kept = available_features(bare, MARKET_FEATURES)
    assert not {"vwap_close", "log_amount_20d", "illiquidity_20d", "log_turnover"} & set(kept)
    assert features_note(bare, MARKET_FEATURES) == (
        f"features: {len(kept)} of {len(daily)} computed; left out, the data lacking their columns: "
        "vwap_close, log_amount_20d, illiquidity_20d (amount); log_turnover, turnover_20d, abnormal_turnover "
        "(turnover); book_to_price (pb_mrq); earnings_to_price (pe_ttm); sales_to_price (ps_ttm)")
    assert len(kept) == len(daily) - 9


def test_features_asked_for_by_name_must_be_computable(tmp_path):
    """A feature named on the command line or in the API whose columns the data lack stops
    the run with the feature and the column named (not fed to the network as zeros)."""
    from click.testing import CliRunner

    from forecaster.app.cli import main

    write_folder(tmp_path / "d", n_days=160)
    res = CliRunner().invoke(main, ["backtest", str(tmp_path / "d"), "--out", str(tmp_path / "o"),
                                    "--features", "ret_1d,book_to_price"])
    assert res.exit_code != 0 and "Traceback" not in res.output, res.output
    assert ("Error: --features: the data's columns do not give the features book_to_price (needs pb_mrq)"
            in res.output)  # the option typed, not the config field
    assert not (tmp_path / "o").exists()
    panel = Panel.from_frames(load_dir(tmp_path / "d").frames)
    model = PanelTransformer(features=("ret_1d", "sales_to_price"), max_epochs=1, n_seeds=1, device="cpu")
    with pytest.raises(ValueError, match=r"sales_to_price \(needs ps_ttm\)"):
        model.fit(panel)
    model.set_params(features=("ret_1d", "gap")).fit(panel)  # computable: fits
    assert model.features_ == ("ret_1d", "gap")
