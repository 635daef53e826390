"""What the tool says is what happened (issue 57): stocks delisted before the forecast period,
a report folder without a manifest, held stocks a figure does not draw, help and error texts in
the user's terms, and a panel run's printed summary without lines that never apply to it."""

from __future__ import annotations

import pandas as pd
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.evaluation.universe import universe_counts, universe_line, universe_table
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.models.panel.baselines import FactorScore


def _gone_run(n_stocks=8, gone=3, last_day=200):
    """A walk-forward of a factor score on a panel whose first ``gone`` stocks have no bar after
    day ``last_day`` (the first forecast day is 220)."""
    frames = synthetic_panel(n_stocks=n_stocks, n_days=300, seed=7)
    first = min(f.index[0] for f in frames.values())
    codes = sorted(c for c, f in frames.items() if f.index[0] == first)[:gone]
    for code in codes:
        frames[code] = frames[code].iloc[:last_day]
    config = WalkForwardConfig(train_days=220, retrain_every=40, min_stock_days=60, n_jobs=1,
                               progress=False)
    grid = Panel.from_frames(frames)
    result = walk_forward(frames, {"low_vol": FactorScore("low_vol_20d")}, config, panel=grid)
    return grid, result, codes


def test_stocks_delisted_before_the_forecast_period_are_said_to_be():
    grid, result, gone = _gone_run()
    start = result.folds["test_start"].min().date()
    table = universe_table(grid, result, "low_vol").set_index("code")
    for code in gone:
        assert table.loc[code, "status"] == "left out"
        assert table.loc[code, "reason"] == f"delisted before the forecast period (last bar before {start})"
        assert table.loc[code, "last_date"] < pd.Timestamp(start)
    line = universe_line(universe_counts(table.reset_index()))
    assert line == (f"universe: 8 stocks loaded, 5 used, 3 left out: 3 stocks delisted before the forecast "
                    f"period (last bar before {start}): {', '.join(gone)}")
    assert "produced no forecast" not in line


def test_overwrite_of_a_folder_without_a_manifest_says_so_and_removes_nothing(tmp_path):
    from forecaster.app.outputs import OutputError, check_output

    out = tmp_path / "old report"  # a report of a version before the manifest: its own files only
    (out / "folds").mkdir(parents=True)
    names = ["equity.png", "experiment.toml", "metrics.json", "report.html", "folds/fold_000.pkl"]
    for name in names:
        (out / name).write_text("x")
    for overwrite in (False, True):
        try:
            check_output(out, overwrite=overwrite)
        except OutputError as exc:
            text = str(exc)
        else:
            raise AssertionError("a folder without a manifest was accepted")
        assert text == (f"--out {out}: already holds files but no .manifest.tsv (written before this tool "
                        f"kept one, or not by this tool), so its 5 file(s) cannot be told from yours: "
                        f"equity.png, experiment.toml, folds/fold_000.pkl, metrics.json, report.html. "
                        f"--overwrite removes only the files a .manifest.tsv lists: move them away (e.g. "
                        f"mv '{out}' '{out}.old') or choose another --out")
        assert "no run of this tool wrote" not in text
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted(names)


def test_plot_names_the_held_stocks_it_does_not_draw(tmp_path):
    from forecaster.data import write_synthetic_panel
    from forecaster.reporting.run_figures import held_not_shown, ranked_list_title

    folder = tmp_path / "data"
    write_synthetic_panel(folder, n_stocks=8, n_days=220, signal_ic=0.1, seed=4)
    files = sorted(folder.glob("*.csv"))
    gone = []
    for path in files[:2]:  # their bars stop 40 days before the data's end (delisted)
        frame = pd.read_csv(path)
        frame.iloc[:-40].to_csv(path, index=False)
        gone.append((str(frame["code"].iloc[0]), str(frame["date"].iloc[-41])))
    run = tmp_path / "run"
    tiny = ["--window", "8", "--d-model", "8", "--heads", "2", "--layers", "1", "--epochs", "1",
            "--n-seeds", "1"]
    (tmp_path / "members.txt").write_text("".join(f"{p.stem}\n" for p in files))
    res = CliRunner().invoke(main, ["train", str(folder), "--out", str(run), *tiny,
                                    "--train-universe", str(tmp_path / "members.txt")])
    assert res.exit_code == 0, res.output
    # the list is echoed under the option the user typed
    assert f"--train-universe members.txt: members by day from {tmp_path / 'members.txt'}" in res.output
    assert "--universe members.txt" not in res.output
    scored = str(pd.read_csv(files[2])["code"].iloc[0])
    book = "".join(f"{code},100\n" for code, _ in gone)
    (tmp_path / "h.csv").write_text(f"code,shares\n{book}{scored},100\ncash,1000\n")
    res = CliRunner().invoke(main, ["plot", "--run", str(run), "--holdings", str(tmp_path / "h.csv")])
    assert res.exit_code == 0, res.output
    # delisting decided by bars that stop for good: the list's reason, the day of the last bar
    line = next(x for x in res.output.splitlines() if "held stocks have no score" in x)
    assert line.startswith("next_day.png: 2 held stocks have no score, not shown: ")
    for code, day in gone:
        assert code in line and day in line
    # the same sentence is the figure's note; a scored held stock ranked out of view has its rank
    table = pd.DataFrame({"code": ["a", "b", "c", "d", "e"], "score": [0.3, 0.2, 0.1, None, None],
                          "rank": [1, 2, 3, None, None], "buyable": [True] * 5,
                          "reason": ["", "", "", "delisted (last day 2021-09-10: 退 name)",
                                     "no bar on the last day; no score (missing inputs)"],
                          "last_date": [None, None, None, "2021-09-10", "2021-10-08"],
                          "held": [False, True, False, True, True]})
    assert held_not_shown(table, n=1) == [
        "2 held stocks have no score, not shown: d (delisted (last day 2021-09-10: 退 name)), "
        "e (no bar since 2021-10-08)",
        "1 held stock ranked between the top and bottom 1, not shown: b (rank 2 of 3)"]
    assert ranked_list_title(table, n=1).endswith("\n".join(held_not_shown(table, n=1)))


def test_help_says_what_the_tool_is_for_in_the_users_terms():
    res = CliRunner().invoke(main, ["--help"])
    assert res.exit_code == 0
    opening = res.output.split("Options:")[0]
    assert "Rank A-share stocks for the next trading day with a panel Transformer" in opening
    for command in ("backtest", "train", "predict", "plot", "compare", "export-qlib", "fetch"):
        assert command in opening
    assert "embedded deterministic synthetic series" not in opening
    text = " ".join(CliRunner().invoke(main, [command, "--help"]).output
                    for command in ("backtest", "train", "predict", "plot"))
    text = " ".join(text.split())  # help wraps lines
    for internal in ("forecaster.", "buy_lots", "module docstring", "SizeRules", "market_context",
                     "warm_from", "checkpoint_dir", "CausalTransformerForecaster", ".warm_start"):
        assert internal not in text, internal
    # another option is named as typed, not as the experiment file's key
    assert "(of --epoch-stock-days each when set)" in text and "days_per_batch" not in text
    assert '"top_k" (hold the --top-k best scores)' in text  # a quoted value stays a value


def test_a_date_out_of_the_data_names_the_option_typed(tmp_path):
    res = CliRunner().invoke(main, ["backtest", "--synthetic-stocks", "6", "--synthetic-days", "200",
                                    "--out", str(tmp_path / "r"), "--start", "2099-01-02"])
    assert res.exit_code == 1
    assert res.output.splitlines()[-1].startswith("Error: --start 2099-01-02 is after the data's last day ")
    assert "[walk_forward]" not in res.output
    toml = tmp_path / "e.toml"  # from a file, the file's section and key
    toml.write_text("[data]\nsynthetic_stocks = 6\nsynthetic_days = 200\n[walk_forward]\nend = 1990-01-02\n")
    res = CliRunner().invoke(main, ["run", str(toml), "--out", str(tmp_path / "r2")])
    assert res.exit_code == 1
    assert f"Error: {toml}: [walk_forward] end 1990-01-02 is before the data's first day " in res.output


def test_a_panel_summary_has_no_columns_it_never_fills_and_a_dated_universe_no_survivorship_guess():
    import numpy as np

    from forecaster.app.console import _not_computed_lines
    from forecaster.evaluation.scoring import score_run
    from forecaster.evaluation.universe import restrict_to_members

    frames = synthetic_panel(n_stocks=8, n_days=300, seed=7)
    frames = {f"sh.6000{i:02d}": f for i, f in enumerate(frames.values())}  # market-like codes
    first = min(f.index[0] for f in frames.values())
    gone = [c for c, f in frames.items() if f.index[0] == first][:2]
    for code in gone:  # delisted before the forecast period
        frames[code] = frames[code].iloc[:200]
    config = WalkForwardConfig(train_days=220, retrain_every=40, min_stock_days=60, n_jobs=1,
                               progress=False)
    models = {"low_vol": FactorScore("low_vol_20d"), "momentum": FactorScore("momentum_20d")}
    grid = Panel.from_frames(frames)
    result = walk_forward(frames, models, config, panel=grid)
    caveat = "if these stocks were chosen by today's index membership"

    report = score_run(result, grid, models, "low_vol")
    table = report.summary_table()
    assert "r2_oos_zero" not in table.columns and not any(c.startswith("dm_p") for c in table.columns)
    assert {"daily_rank_ic", "icir", "ann_return"} <= set(table.columns)
    assert not any("r2_oos_zero" in line or "dm_p" in line for line in _not_computed_lines(table, report))
    assert any(caveat in n for n in report.notes)  # every stock, chosen by whoever made the folder

    # a dated membership list (members join and leave) over data that keep delisted stocks
    members = np.ones((grid.n_days, grid.n_stocks), dtype=bool)
    members[:150, -1] = False  # the last stock joins the index on day 150
    grid.members = members
    kept, _ = restrict_to_members(result, grid)
    notes = score_run(kept, grid, models, "low_vol").notes
    assert not any(caveat in n or "survivorship" in n for n in notes)
    grid.members = np.ones_like(members)  # a plain list: every stock always a member
    assert any(caveat in n for n in score_run(kept, grid, models, "low_vol").notes)
