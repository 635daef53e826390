"""``scripts/bench_enhanced.py --cells``: the protocol that chooses the enhanced book's defaults
(issue 88; the rule in :mod:`forecaster.evaluation.default_choice`).

Each index (``--cell-index``, CSI 300 and CSI 500) is loaded once in its own worker process
(members by day from its universe, the benchmark its own series from the data, fitted weights),
with the Transformer forecasts of its report (``--cell-report INDEX=DIR``); every candidate runs
once per index over both periods (2019-2026; its days cut into 2019-2022 and 2023-2026), the two
indices in parallel, each against its total-return estimate. The dimensions are walked in
order (:data:`DIMENSIONS`: the alpha shape, the trade aversion, the rebalance cadence, the
turnover cap), from the incumbent (:data:`INCUMBENT`, the z-score book with trade aversion 1):
a dimension's candidates are the incumbent with that one setting changed, and the setting the
protocol keeps is the incumbent of the next dimension.

Lines (each one line, wrapped here)::

    cell index=csi300 period=2019-2022 name=zscore_a1_d1_c0.1 excess_ann=+0.0612 te=0.0450 ir=1.32
        turnover=14.1
    verdict name=tails_a1_d1_c0.1 against=zscore_a1_d1_c0.1 leads=2 of 4 t=+0.85 p=0.198 replaces=no
    default dimension=alpha_shape kept=zscore

Each run's daily figures are kept in ``--out``/cells/INDEX/NAME.csv (``date, returns, equity,
traded, bench``) beside NAME.json (its settings); a later call with the same settings reads them
instead of running again.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import time
from pathlib import Path

import pandas as pd

from forecaster.evaluation.default_choice import PERIODS, cell_figures, cell_line, choose, verdict_line

# the incumbent's settings and the dimensions walked, in order, with each one's candidate values
INCUMBENT = {"alpha_shape": "zscore", "trade_aversion": 1.0, "rebalance_every": 1, "max_turnover": 0.1}
DIMENSIONS = (("alpha_shape", ("rank", "tails")), ("trade_aversion", (0.5, 1.5)),
              ("rebalance_every", (5,)), ("max_turnover", (0.05, 0.2)))
DEFAULT_REPORTS = {"csi300": "runs/csi300_pit_one_set", "csi500": "runs/csi500_pit_one_set"}


def name_of(s: dict) -> str:
    """A setting's short name: ``zscore_a1_d1_c0.1`` (shape, aversion, days between rebalances, cap)."""
    return f"{s['alpha_shape']}_a{s['trade_aversion']:g}_d{s['rebalance_every']}_c{s['max_turnover']:g}"


# ---- one index's worker process: the data loaded once, candidates run on request ----
_STATE: dict = {}


def _load(index: str, data: str, report: str) -> None:
    import bench_enhanced as b
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # two workers share two cores
    pred = b.read_predictions(Path(report))
    pred = pred[pred["model"] == "transformer"]
    forecast = pred.pivot_table(index=pred.index, columns="code", values="forecast", aggfunc="first")
    forecast = forecast.sort_index()
    _, loaded = b.prepare({"data": {"path": data, "universe": index, "cache": True}})
    panel = loaded.panel
    panel.members = loaded.universe.mask(panel.dates, panel.codes)
    code = b.index_for(loaded.universe.name, loaded.indices)
    if code is None:
        raise SystemExit(f"the data hold no series of {index}'s index")
    _STATE.update(panel=panel, forecast=forecast.reindex(columns=[str(c) for c in panel.codes]),
                  code=code, frame=loaded.indices[code], n=int(panel.members.sum(axis=1).max()))


def _run(settings: dict) -> pd.DataFrame:
    """One candidate's ``[date]`` frame: ``returns`` (after costs), ``equity``, ``traded`` (the
    filled trades' absolute value) and ``bench`` (the index's total-return estimate)."""
    import bench_enhanced as b

    s = _STATE
    base = b.BacktestConfig.for_universe(s["n"], capital=1e8)
    strategy = b.StrategyConfig(rule="enhanced", tracking_error=0.05, **settings)
    config = dataclasses.replace(base, strategy=strategy)
    result = b.attach_index({"enhanced": b.run_backtest(s["panel"], s["forecast"], config)}, s["code"],
                            s["frame"], base.execution, base.capital)["enhanced"]
    price = b.daily_returns(result.index_equity, base.capital)
    if "bench" not in s:
        s["bench"] = b.total_return(s["panel"], price, b.benchmark_weights(s["panel"], None).weights)[0]
    trades = result.trades
    done = trades[trades["status"] != "blocked"]
    traded = done.assign(value=done["value"].abs()).groupby(pd.to_datetime(done["date"]))["value"].sum()
    days = result.returns.index
    return pd.DataFrame({"returns": result.returns, "equity": result.equity,
                         "traded": traded.reindex(days).fillna(0.0), "bench": s["bench"].reindex(days)},
                        index=days).rename_axis("date")


class Cells:
    """The runs of every index, cached on disk (``out``/cells/INDEX/NAME.csv)."""

    def __init__(self, indices: dict[str, str], data: str, out: Path):
        self.out = out / "cells"
        self.indices = indices
        ctx = mp.get_context("spawn")  # a fresh interpreter each: no torch/BLAS state forked
        self.pools = {i: ctx.Pool(1, initializer=_load, initargs=(i, data, r)) for i, r in indices.items()}
        self.frames: dict[str, dict[str, pd.DataFrame]] = {}

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()
            pool.join()

    def _path(self, index: str, name: str) -> Path:
        return self.out / index / f"{name}.csv"

    def run(self, settings: list[dict]) -> None:
        """Run the settings not yet on disk (the indices in parallel) and read them all."""
        jobs = {}
        for s in settings:
            name = name_of(s)
            for index, pool in self.pools.items():
                path = self._path(index, name)
                meta = path.with_suffix(".json")
                if path.is_file() and meta.is_file() and json.loads(meta.read_text()) == s:
                    continue
                jobs[index, name] = (pool.apply_async(_run, (s,)), s, time.perf_counter())
        for (index, name), (job, s, t0) in jobs.items():
            frame = job.get()
            path = self._path(index, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            frame.to_csv(path)
            path.with_suffix(".json").write_text(json.dumps(s))
            print(f"# ran {name} on {index} in {time.perf_counter() - t0:.0f} s", flush=True)
        for s in settings:
            name = name_of(s)
            self.frames[name] = {i: pd.read_csv(self._path(i, name), index_col="date", parse_dates=["date"])
                                 for i in self.indices}

    def figures(self, name: str) -> dict:
        """``{(index, period): cell figures}`` of a run setting."""
        out = {}
        for index, f in self.frames[name].items():
            for period, figs in cell_figures(f["returns"], f["bench"], f["traded"], f["equity"]).items():
                out[index, period] = figs
        return out


def run_protocol(indices: dict[str, str], data: str, out: Path) -> dict:
    """Walk :data:`DIMENSIONS` from :data:`INCUMBENT`, printing every cell and verdict; returns
    the settings kept."""
    cells = Cells(indices, data, out)
    try:
        incumbent = dict(INCUMBENT)
        cells.run([incumbent])
        printed = set()

        def show(s):
            name = name_of(s)
            if name in printed:
                return
            printed.add(name)
            figs = cells.figures(name)
            for index in indices:
                for period, _, _ in PERIODS:
                    print(cell_line(index, period, name, figs[index, period]), flush=True)

        show(incumbent)
        for key, values in DIMENSIONS:
            candidates = [{**incumbent, key: v} for v in values if v != incumbent[key]]
            cells.run(candidates)
            for s in candidates:
                show(s)
            names = [name_of(s) for s in candidates]
            figures = {n: cells.figures(n) for n in [name_of(incumbent), *names]}
            returns = {n: {i: f["returns"] for i, f in cells.frames[n].items()} for n in figures}
            kept, verdicts = choose(name_of(incumbent), names, figures, returns)
            for n, v in verdicts.items():
                print(verdict_line(n, name_of(incumbent), v), flush=True)
            incumbent = next((s for s in candidates if name_of(s) == kept), incumbent)
            print(f"default dimension={key} kept={incumbent[key]:g}" if not isinstance(incumbent[key], str)
                  else f"default dimension={key} kept={incumbent[key]}", flush=True)
        return incumbent
    finally:
        cells.close()


__all__ = ["DEFAULT_REPORTS", "DIMENSIONS", "INCUMBENT", "name_of", "run_protocol"]
