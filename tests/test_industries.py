"""Industry classes from users' files (issue 87, forecaster.data.daily.industries.py): the
three layouts in UTF-8, BOM and GBK, the real baostock export, point in time, levels, small
groups merged, the unclassified kept, and each bad file's one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_forecaster_policy import world  # noqa: F401 (a fixture)

from forecaster.data.daily.industries import OTHER, UNCLASSIFIED, at_level, groups, letter_of, read_industries
from forecaster.data.sources import DataError

SHARED = Path(__file__).resolve().parents[2] / "shared/data/industry/stock_industry.csv"
CODES = ["sh.600000", "sh.600004", "sh.600006", "sz.000001", "sz.000002", "sz.300750"]
BAOSTOCK = """updateDate,code,code_name,industry,industryClassification
2026-03-09,sh.600000,浦发银行,J66货币金融服务,证监会行业分类
2026-03-09,sh.600004,白云机场,G56航空运输业,证监会行业分类
2026-03-09,sh.600006,东风股份,C36汽车制造业,证监会行业分类
2026-03-09,sz.000001,平安银行,J66货币金融服务,证监会行业分类
2026-03-09,sz.000002,万科Ａ,K70房地产业,证监会行业分类
2026-03-09,sh.600001,邯郸钢铁,,证监会行业分类
"""


def _write(tmp_path, text, encoding="utf-8", name="ind.csv"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "gbk"])
def test_baostocks_export_reads_alike_in_each_encoding(tmp_path, encoding):
    ind = read_industries(_write(tmp_path, BAOSTOCK, encoding), CODES)
    assert ind.snapshot == pd.Timestamp("2026-03-09") and not ind.point_in_time
    assert ind.names["sz.000002"] == "万科Ａ"
    days = pd.bdate_range("2019-01-02", periods=3)
    classes = ind.classes(days, CODES)
    assert classes[0].tolist() == ["J66货币金融服务", "G56航空运输业", "C36汽车制造业", "J66货币金融服务",
                                   "K70房地产业", ""]
    text = ind.describe(days)
    assert "snapshot" in text and "2026-03-09" in text and "2019-01-02..2019-01-04" in text
    assert any("sh.600001" in n for n in ind.notes)  # a code the data lack: counted, not an error


def test_a_plain_file_under_chinese_headers_and_any_code_form(tmp_path):
    text = "股票代码,所属行业\n600000.SH,银行\n000001,银行\nSZ000002,房地产\n"
    ind = read_industries(_write(tmp_path, text, "gbk"), CODES)
    classes = ind.classes(pd.bdate_range("2020-01-01", periods=2), CODES)
    assert classes[1].tolist() == ["银行", "", "", "银行", "房地产", ""]
    assert "undated" in ind.describe(pd.bdate_range("2020-01-01", periods=2))
    assert at_level("银行", 1) == at_level("银行", 2) == "银行"  # a name without a code: one level


def test_a_dated_file_is_point_in_time(tmp_path):
    text = ("date,code,industry\n2019-01-01,sh.600000,C39\n2021-01-01,sh.600000,I65\n"
            "2020-01-01,sz.000001,J66\n")
    ind = read_industries(_write(tmp_path, text), CODES)
    assert ind.point_in_time and ind.snapshot is None
    days = pd.DatetimeIndex(["2019-06-03", "2020-06-01", "2021-06-01"])
    c = ind.classes(days, CODES)
    assert c[:, 0].tolist() == ["C39", "C39", "I65"]
    assert c[:, 3].tolist() == ["", "J66", "J66"]  # before its first row: no class
    assert "point in time" in ind.describe(days)


def test_levels_and_small_groups_merged_into_their_letter_or_other():
    assert letter_of("C39计算机") == "C" and letter_of("银行") is None
    assert at_level("C39计算机", 1) == "C制造业" and at_level("C39计算机", 2) == "C39计算机"
    classes = np.array([["C39", "C39", "C39", "C36", "J66", "", "银行"]] * 2, dtype=object)
    members = np.ones(classes.shape, bool)
    members[1, 6] = False
    labels, names, counts = groups(classes, members, level=2, min_members=3)
    day0 = [names[i] for i in labels[0]]
    assert day0 == ["C39", "C39", "C39", "C制造业", "J金融业", UNCLASSIFIED, OTHER]
    assert counts == {"unclassified": 2, "merged": 5}  # C36, J66, 银行 on day 0; C36, J66 on day 1
    assert labels[1, 6] == -1  # not a member
    labels1, names1, counts1 = groups(classes, members, level=1, min_members=3)
    assert [names1[i] for i in labels1[0]][:5] == ["C制造业"] * 4 + [OTHER]
    assert counts1["merged"] == 3  # J (one member) each day, 银行 on day 0


def test_the_shared_baostock_export_reads(tmp_path):
    if not SHARED.is_file():
        pytest.skip("the shared industry export is not beside the checkout")
    ind = read_industries(SHARED, ["sh.600000", "sz.000001", "sh.600519", "sz.300750"])
    c = ind.classes(pd.DatetimeIndex(["2020-01-02"]), ["sh.600000", "sh.600519"])
    assert c[0, 0] == "J66货币金融服务" and c[0, 1].startswith("C15")
    assert ind.snapshot == pd.Timestamp("2026-03-09")
    assert any("no stock of the data" in n for n in ind.notes)


@pytest.mark.parametrize("text, message", [
    ("", "not a readable CSV"),
    ("code,name\nsh.600000,浦发\n", "no industry column"),
    ("code,industry\n", "holds no row"),
    ("date,code,industry\n2020-01-01,sh.600000,J66\n2020-13-45,sz.000001,J66\n", "line 3"),
    ("date,code,industry\n2020-01-01,sh.600000,J66\n2020-01-01,sh.600000,C39\n",
     "lines 2 and 3, column industry: sh.600000 has two classes on 2020-01-01"),
    (",industry\n,J66\n", "no code column"),
])
def test_a_bad_industry_file_is_one_line(tmp_path, text, message):
    with pytest.raises(DataError, match=message.replace("(", r"\(")) as err:
        read_industries(_write(tmp_path, text), CODES)
    assert str(tmp_path / "ind.csv") in str(err.value) and "\n" not in str(err.value)


def test_bytes_neither_utf8_nor_gbk_name_their_offset(tmp_path):
    path = tmp_path / "ind.csv"
    path.write_bytes(b"code,industry\nsh.600000,J66\nsz.000001,\x80\xff\n")
    with pytest.raises(DataError, match=r"line 3: byte b'\\x80' at offset 38"):
        read_industries(path, CODES)


def test_a_repeated_row_is_read_once_and_counted(tmp_path):
    ind = read_industries(_write(tmp_path, "code,industry\nsh.600000,J66\nsh.600000,J66\n"), CODES)
    assert len(ind.table) == 1 and any("1 repeated row" in n for n in ind.notes)


def test_a_large_file_is_read_in_seconds_or_refused(tmp_path):
    import time

    rows = "".join(f"sh.{600000 + i % 5000:06d},C{i % 37:02d}\n" for i in range(400_000))
    path = _write(tmp_path, "code,industry\n" + rows)
    t0 = time.perf_counter()
    with pytest.raises(DataError, match="two classes"):  # 80 rows of each code, different classes
        read_industries(path, CODES)
    assert time.perf_counter() - t0 < 10
    with pytest.raises(DataError, match="MB"):
        read_industries(path, CODES, max_file_mb=1)


# ---------------------------------------------------------------- the book's industry bound


def _industry_world(tmp_path, world):  # noqa: F811
    """The policy world's panel (40 stocks) in three CSRC classes, a forecast that wants the
    first class (stocks 0-9) far above the benchmark, and the classes' file."""
    import dataclasses

    panel, forecast = world
    codes = [str(c) for c in panel.codes]
    classes = ["C39计算机"] * 10 + ["J66货币金融服务"] * 15 + ["K70房地产业"] * 15
    path = tmp_path / "industries.csv"
    path.write_text("code,industry\n" + "".join(f"{c},{k}\n" for c, k in zip(codes, classes, strict=True)))
    tilt = forecast.copy()
    tilt.iloc[:, :10] += 3.0  # a strong view on the whole first class
    return dataclasses.replace(panel, _cache={}), tilt, path


@pytest.mark.parametrize("bound", [0.0, 0.02])
def test_the_industry_bound_binds_on_a_planted_industry_bet(tmp_path, world, bound):  # noqa: F811
    from test_forecaster_policy import _config

    from forecaster.portfolio.backtest import run_backtest

    panel, forecast, path = _industry_world(tmp_path, world)
    config = _config()
    config.strategy.industries, config.strategy.industry_bound = str(path), bound
    config.strategy.__post_init__()
    result = run_backtest(panel, forecast, config)
    table = result.enhanced.industry_weights()
    assert set(table["industry"]) == {"C制造业", "J金融业", "K房地产业"}  # level 1: the letters
    sums = table.groupby("date")[["book", "benchmark"]].sum()
    assert np.allclose(sums["benchmark"], 1.0) and sums["book"].between(0.95, 1.0 + 1e-9).all()  # cash aside
    target = result.enhanced.target_active
    rows = target.dropna(how="all").index
    c_active = target.loc[rows].iloc[:, :10].sum(axis=1)
    if bound:
        assert c_active.abs().max() <= bound + 1e-6  # the decision keeps the bound
        assert table.loc[table["industry"] == "C制造业", "active"].abs().max() <= bound + 0.005  # held, lots
    else:
        assert c_active.max() > 0.05  # without a bound the view buys the class well past it
    notes = " | ".join(result.enhanced.notes)
    assert "undated file" in notes and "3 industry group(s) at level 1" in notes


def test_an_industry_bound_without_industries_names_the_missing_option():
    from forecaster.checks import ConfigError
    from forecaster.portfolio.strategy import StrategyConfig

    with pytest.raises(ConfigError, match=r"--industry-bound\) needs industries \(--industries FILE"):
        StrategyConfig(rule="enhanced", industry_bound=0.05)


def test_backtest_and_predict_take_industries_and_a_bad_file_writes_nothing(tmp_path):
    from test_forecaster_trust import QUICK, _invoke

    from forecaster.data import write_synthetic_panel

    data = tmp_path / "data"
    write_synthetic_panel(data, n_stocks=8, n_days=230, seed=4)
    codes = sorted(p.name[:-4] for p in data.glob("*.csv"))
    universe = tmp_path / "members.txt"
    universe.write_text("\n".join(codes) + "\n")
    good, bad = tmp_path / "ind.csv", tmp_path / "bad.csv"
    classes = ["C39计算机", "C39计算机", "C36汽车", "C36汽车", "J66货币", "J66货币", "J66货币", ""]
    rows = "".join(f"{c},{k}\n" for c, k in zip(codes, classes, strict=True))
    good.write_bytes(("股票代码,所属行业\n" + rows).encode("gbk"))
    bad.write_bytes(b"code,industry\n" + f"{codes[0]},J66\n".encode() + b"\x80\xff,x\n")
    book = ["--strategy", "enhanced", "--universe", universe, "--industry-bound", "0.05",
            "--industry-level", "2", "--industry-min-members", "2"]
    res = _invoke("backtest", data, "--out", tmp_path / "bad_rep", "--industries", bad, *book, *QUICK)
    assert res.exit_code == 1 and "offset" in res.output and "Traceback" not in res.output, res.output
    assert not (tmp_path / "bad_rep").exists()
    res = _invoke("backtest", data, "--out", tmp_path / "rep", *book, *QUICK)
    assert res.exit_code != 0 and "--industries FILE" in res.output  # a bound without a file
    assert not (tmp_path / "rep").exists()
    res = _invoke("backtest", data, "--out", tmp_path / "rep", "--industries", good, *book, *QUICK)
    assert res.exit_code == 0, res.output
    table = pd.read_csv(tmp_path / "rep" / "active_industries.csv")
    assert list(table.columns) == ["date", "industry", "book", "benchmark", "active"]
    assert {"C39计算机", "C36汽车", "J66货币", "unclassified"} == set(table["industry"])
    assert table["active"].abs().max() <= 0.05 + 0.005  # the bound, lots aside
    assert (tmp_path / "rep" / "active_industries.png").stat().st_size > 10_000
    recorded = (tmp_path / "rep" / "experiment.toml").read_text()
    assert f'industries = "{good.resolve()}"' in recorded and "industries_sha256 = " in recorded
    copy = tmp_path / "copy.toml"
    copy.write_text(recorded)
    good.write_bytes(good.read_bytes() + f"{codes[-1]},K70\n".encode("gbk"))  # the file changed
    res = _invoke("run", copy, "--out", tmp_path / "again")
    assert res.exit_code != 0 and "[strategy] industries" in res.output and "has changed" in res.output
    assert not (tmp_path / "again").exists()
    good.write_bytes(("股票代码,所属行业\n" + rows).encode("gbk"))
    res = _invoke("train", data, "--out", tmp_path / "run", *QUICK[:8])
    assert res.exit_code == 0, res.output
    res = _invoke("predict", "--run", tmp_path / "run", data, "--industries", good, *book, "--capital", "1e7",
                  "--out", tmp_path / "n.csv")
    assert res.exit_code == 0 and "undated file" in res.output, res.output
    assert (tmp_path / "orders.csv").is_file() and "industry" in res.output
    (tmp_path / "other").mkdir()
    res = _invoke("predict", "--run", tmp_path / "run", data, "--industries", bad, *book, "--capital", "1e7",
                  "--out", tmp_path / "other" / "m.csv")
    assert res.exit_code == 1 and "offset" in res.output, res.output
    assert not any((tmp_path / "other").iterdir())


# ---------------------------------------------------------------- the industry features


def test_industry_means_and_relative_features_by_hand():
    from forecaster.features.industry import industry_feature, industry_means

    values = np.array([[1.0, 3.0, 10.0, np.nan, 7.0], [2.0, np.nan, 4.0, 6.0, 5.0]])
    groups = np.array([[0, 0, 1, 1, np.nan], [0, 0, 1, 1, 1]])
    means = industry_means(values, groups)
    np.testing.assert_allclose(means, [[2.0, 2.0, 10.0, 10.0, np.nan], [2.0, 2.0, 5.0, 5.0, 5.0]])
    rel = industry_feature("industry_rel_return_1d", values, groups)
    np.testing.assert_allclose(rel, [[-1.0, 1.0, 0.0, np.nan, np.nan], [0.0, np.nan, -1.0, 1.0, 0.0]])
    own = industry_feature("industry_return_1d", values, groups)  # NaN where the stock has no value
    np.testing.assert_allclose(own, [[2.0, 2.0, 10.0, np.nan, np.nan], [2.0, np.nan, 5.0, 5.0, 5.0]])


def test_the_industry_features_need_the_file_and_see_no_later_day(tmp_path):
    import dataclasses

    from forecaster.data import synthetic_panel
    from forecaster.data.panel import Panel
    from forecaster.features.factors import check_available, feature, resolve_features
    from forecaster.portfolio.industry_groups import attach_industries

    panel = Panel.from_frames(synthetic_panel(n_stocks=12, n_days=120, seed=3))
    with pytest.raises(DataError, match=r"industry_rel_return_1d \(needs industry_group\).*--industries"):
        check_available(panel, ["industry_rel_return_1d"])
    classes = ["C39计算机"] * 6 + ["J66货币金融服务"] * 5 + [""]
    path = tmp_path / "ind.csv"
    rows = "".join(f"{c},{k}\n" for c, k in zip(panel.codes, classes, strict=True))
    path.write_text("code,industry\n" + rows)
    attach_industries(panel, path)
    check_available(panel, ["industry"])
    assert resolve_features(panel, ["industry"])[0] == "industry_rel_return_1d"
    rel = feature(panel, "industry_rel_return_20d", cache=False)
    base = feature(panel, "return_20d", cache=False)
    day = 80
    np.testing.assert_allclose(rel[day, :6], base[day, :6] - np.nanmean(base[day, :6]))
    assert np.isnan(rel[:, 11]).all()  # unclassified: nothing to compare with
    later = dataclasses.replace(panel, fields={k: v.copy() for k, v in panel.fields.items()}, _cache={})
    for name in ("close", "open", "high", "low", "volume"):
        tail = later.fields[name][day + 1:]
        tail *= np.random.default_rng(1).lognormal(0, 0.3, tail.shape)
    for name in ("industry_rel_return_1d", "industry_return_20d", "industry_rel_volume_surprise"):
        np.testing.assert_array_equal(feature(panel, name, cache=False)[: day + 1],
                                      feature(later, name, cache=False)[: day + 1], err_msg=name)


def test_the_risk_models_industries_are_the_books_groups_less_the_unclassified(tmp_path, world):  # noqa: F811
    """risk_industries gives the groups of every listed member at the book's level with the
    unclassified as -1 (no industry factor); a strategy without industries reads none, even where
    another book's file is attached to the panel; the risk model then has one factor a group."""
    from test_forecaster_policy import _config

    from forecaster.portfolio.industry_groups import industry_groups, risk_industries
    from forecaster.portfolio.panel_risk import risk_model_of

    panel, _, path = _industry_world(tmp_path, world)
    codes = [str(c) for c in panel.codes]
    lines = path.read_text().splitlines()  # the last two: no class
    path.write_text("\n".join([lines[0], *lines[1:-2], f"{codes[-2]},", f"{codes[-1]},"]) + "\n")
    config = _config()
    config.strategy.industries = str(path)
    labels, names = risk_industries(panel, config.strategy)
    assert names == ["C制造业", "J金融业", "K房地产业"]
    assert (labels[:, -2:] == -1).all() and (labels[:, :10] == 0).all() and (labels[:, 10:25] == 1).all()
    plain = _config()
    assert industry_groups(panel, panel.listed, plain.strategy)[0] is None  # the file attached is not its
    assert risk_industries(panel, plain.strategy) is None
    model = risk_model_of(panel, (labels, names))
    assert model.factor_names[7:10] == ("industry:C制造业", "industry:J金融业", "industry:K房地产业")
    assert risk_model_of(panel) is not model and len(risk_model_of(panel).factor_names) == 12


def test_train_refuses_the_industry_features_in_one_line(tmp_path):
    from test_forecaster_trust import _invoke

    from forecaster.data import write_synthetic_panel

    data = tmp_path / "data"
    write_synthetic_panel(data, n_stocks=4, n_days=60, seed=1)
    res = _invoke("train", data, "--out", tmp_path / "run", "--features", "ret_1d,industry")
    assert res.exit_code == 1 and "train and predict do not take them yet" in res.output, res.output
    assert not (tmp_path / "run").exists()


def test_the_bounds_line_counts_held_days_beyond_it_and_names_the_largest():
    from forecaster.portfolio.industry_groups import beyond_bound

    days = pd.to_datetime(["2024-10-08", "2024-10-09", "2024-10-10"])
    held = pd.DataFrame({"date": np.repeat(days, 2), "industry": ["C", "J"] * 3, "book": 0.0,
                         "benchmark": 0.0,
                         "active": [-0.062, 0.040, 0.054, -0.050, 0.056, 0.001]})
    decided = held.assign(active=held["active"].clip(-0.05, 0.05))
    line = beyond_bound(held, decided, 0.05)
    assert line == ("industries: decided max_active=0.0500 (bound 0.05); held beyond 0.055 on 2 of 3 "
                    "rebalance(s), the largest -0.0620 in C on 2024-10-08")
    assert "the largest" not in beyond_bound(held.assign(active=0.05), decided, 0.05)
