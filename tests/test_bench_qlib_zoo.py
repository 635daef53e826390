"""The pure parts of scripts/bench_qlib_zoo.py: its options, the yearly folds, the ``zoo`` lines
(a contract of issue 58) and reading a score report's metrics. Qlib itself is not needed."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _load():
    sys.path.insert(0, str(SCRIPTS))
    try:
        spec = importlib.util.spec_from_file_location("bench_qlib_zoo", SCRIPTS / "bench_qlib_zoo.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPTS))
    return module


zoo = _load()


def test_the_zoo_holds_the_issues_models_on_their_benchmark_handlers():
    assert {name: entry[0] for name, entry in zoo.ZOO.items()} == {
        "lightgbm": "Alpha158", "mlp": "Alpha360", "gru": "Alpha360", "alstm": "Alpha360",
        "transformer": "Alpha360", "localformer": "Alpha360"}
    assert zoo.ZOO["gru"][3]["n_epochs"] == 200 and zoo.ZOO["alstm"][3]["rnn_type"] == "LSTM"


def test_models_and_years_options():
    assert zoo.parse_models("lightgbm, mlp") == ["lightgbm", "mlp"]
    with pytest.raises(SystemExit, match=r"--models lightgbm,tra: tra not in the zoo"):
        zoo.parse_models("lightgbm,tra")
    with pytest.raises(SystemExit, match="given twice"):
        zoo.parse_models("gru,gru")
    assert zoo.parse_years("2025") == [2025]
    assert zoo.parse_years("2019-2021") == [2019, 2020, 2021]
    for bad in ("2021-2019", "25", "2019..2021"):
        with pytest.raises(SystemExit, match=f"--years {bad}: expected a year"):
            zoo.parse_years(bad)


def _calendar():
    """Trading days: 80 in 2021 (Jan 4 on), 70 in 2022, 5 in 2023 (dates only need to sort)."""
    days = [f"2021-{1 + i // 28:02d}-{1 + i % 28:02d}" for i in range(80)]
    days += [f"2022-{1 + i // 28:02d}-{1 + i % 28:02d}" for i in range(70)]
    return days + [f"2023-01-{d:02d}" for d in (3, 4, 5, 6, 9)]


def test_yearly_folds_test_on_signal_days_and_purge_the_valid_labels():
    cal = _calendar()
    (fold,) = zoo.zoo_folds(cal, [2023])
    # forecast days 2023-01-03..09: signal days are the trading day before each
    assert fold["test"] == [cal[149], "2023-01-06"]
    # valid: 2022 up to the third day before the first forecast (its label close(t+2)/close(t+1) known)
    assert fold["valid"] == ["2022-01-01", cal[147]]
    # train: from the 61st day (windows full) to the end of 2021
    assert fold["train"] == [cal[60], cal[79]]
    (short,) = zoo.zoo_folds(cal, [2023], train_years=1)
    assert short["train"] == [cal[60], cal[79]]  # 2021 on, but never before the 61st day
    with pytest.raises(SystemExit, match="2022 leaves no training days"):
        zoo.zoo_folds(cal, [2022])
    with pytest.raises(SystemExit, match="2024 and the year before need trading days"):
        zoo.zoo_folds(cal, [2024])


def test_zoo_lines_format_and_read_back():
    lines = [zoo.zoo_line("transformer", 0.0570123, 0.36789, 0.0, math.nan, 37.64),
             zoo.zoo_line("qlib_gru", 0.041, 0.25, -0.0160, 0.0004, 12.0),
             zoo.zoo_line("qlib_mlp", math.nan, math.nan, math.nan, math.nan, math.nan)]
    assert lines[0] == ("zoo model=transformer rank_ic=+0.0570 icir=+0.368 diff_vs_transformer=+0.0000 "
                        "p=nan wall_minutes=37.6")
    assert lines[1] == ("zoo model=qlib_gru rank_ic=+0.0410 icir=+0.250 diff_vs_transformer=-0.0160 "
                        "p=0.000 wall_minutes=12.0")
    best = zoo.best_line({"transformer": 0.057, "qlib_gru": 0.041, "qlib_mlp": math.nan})
    assert best == "zoo best=transformer transformer_rank=1 of 3"
    models, parsed = zoo.parse_lines("\n".join(["# a comment", *lines, best]))
    assert [m["model"] for m in models] == ["transformer", "qlib_gru", "qlib_mlp"]
    assert models[1]["diff"] == -0.016 and models[1]["wall"] == 12.0 and math.isnan(models[2]["rank_ic"])
    assert parsed == {"best": "transformer", "rank": 1, "n": 3}
    assert zoo.best_line({"transformer": 0.03, "a": 0.05, "b": 0.04, "c": 0.03}) == \
        "zoo best=a transformer_rank=3 of 4"  # a tie does not rank above it


def test_scored_values_turn_the_stored_test_around():
    metrics = {"daily_rank_ic": {"qlib_gru": {"mean_ic": 0.04, "icir": 0.3},
                                 "transformer": {"mean_ic": 0.05}},
               "rank_ic_difference_tests": [{"baseline": "qlib_gru", "mean_diff": 0.01, "p_value": 0.02}]}
    assert zoo.scored_values(metrics, "qlib_gru") == (0.04, 0.3, -0.01, 0.02)
    metrics["rank_ic_difference_tests"][0]["p_value"] = None  # identical series: no test
    assert math.isnan(zoo.scored_values(metrics, "qlib_gru")[3])


def test_a_bad_option_is_one_line_before_anything_runs(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPTS / "bench_qlib_zoo.py"), "--models", "gru,tra",
                          "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert out.returncode != 0 and out.stderr.strip().splitlines() == [
        "--models gru,tra: tra not in the zoo; expected names among "
        "lightgbm, mlp, gru, alstm, transformer, localformer"]
    out = subprocess.run([sys.executable, str(SCRIPTS / "bench_qlib_zoo.py"), "--qlib-python",
                          str(tmp_path / "nope"), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert out.stderr.strip().splitlines() == [f"--qlib-python {tmp_path / 'nope'}: no such file (a Python "
                                               "with pyqlib and torch; see --help)"]
    assert not (tmp_path / "o").exists()


def test_the_features_line_counts_the_empty_columns():
    account = {"rows": 288781, "columns": 360, "instruments": 403,
               "all_nan_columns": [f"VWAP{i}" for i in range(59, -1, -1)]}
    assert zoo.features_line("Alpha360", account, 5.0) == (
        "# features Alpha360 rows=288781 stocks=403 columns=360 all_nan_columns=60 (VWAP59..VWAP0) "
        "wall_minutes=5.0")
    account["all_nan_columns"] = []
    assert zoo.features_line("Alpha158", account, math.nan).endswith("all_nan_columns=0 wall_minutes=nan")
