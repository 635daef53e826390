"""One experiment, one file: data, features, model, walk-forward and backtest settings.

An experiment file (TOML) has the sections below; every key is a field of the config class
that defines it, with that class's default and validation, and the CLI's ``backtest``
options are the same fields (:func:`option_fields`):

=================  ==========================================================================
``[data]``         :class:`DataConfig` (path, bad rows, index constituents)
``[features]``     :class:`FeaturesConfig` (the inputs of the Transformer and the feature regressions)
``[model]``        parameters of the Transformer: :class:`~forecaster.models.panel.model.PanelTransformer`
                   for a folder, :class:`~forecaster.models.stock.estimator.CausalTransformerForecaster`
                   for one stock (walk-forward preset:
                   :func:`forecaster.models.presets.single_stock_transformer`)
``[models]``       :class:`ModelsConfig` (which baselines run beside it)
``[walk_forward]`` :class:`~forecaster.evaluation.folds.WalkForwardConfig`
``[strategy]``     :class:`~forecaster.portfolio.strategy.StrategyConfig`
``[costs]``        :class:`~forecaster.portfolio.rules.CostModel`
``[market]``       :class:`~forecaster.portfolio.rules.MarketRules`
``[backtest]``     :class:`~forecaster.portfolio.backtest.BacktestConfig` (capital, execution, tolerance)
=================  ==========================================================================

Keys left out take their defaults; some defaults depend on the data (label and portfolio rule
for one stock vs a panel, the rebalance period = the horizon). :func:`resolve` fills them in and
:func:`to_toml` writes the fully resolved experiment, which the report folder keeps as
``experiment.toml``: running that file again reproduces the report's numbers (a weights file
with its path and SHA-256: :mod:`forecaster.app.weights_record`).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import tomli_w

from forecaster.app.fields import (
    OPTIONS,
    ConfigError,
    baseline_keys,
    check_device,
    check_features,
    check_model_params,
    check_named_model,
    config_error,
    field_help,
    model_fields,
    model_params,
    type_hints,
    type_name,
    type_ok,
)
from forecaster.app.weights_record import STRATEGY_RECORDED, read_weights_record, record_weights
from forecaster.configs import documented, option, same_option
from forecaster.evaluation.folds import WalkForwardConfig
from forecaster.models.registry import DEFAULT_MODEL, registered
from forecaster.portfolio.backtest import BacktestConfig
from forecaster.portfolio.rules import CostModel, MarketRules
from forecaster.portfolio.strategy import StrategyConfig

log = logging.getLogger(__name__)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@documented
@dataclass
class DataConfig:
    """Where the prices come from."""

    path: str = option("",
        "a CSV (one stock) or a folder of CSVs (a panel), plain or .csv.gz; empty: the embedded synthetic "
        "series. Relative paths are read from the experiment file's folder.")
    on_bad: str = option("raise", 'bad rows: "raise" (stop with an error) or "drop" (drop and count them).')
    strict: bool = option(False,
        "implausible rows (a high below the low, an open or close outside low..high, a price beyond the "
        "board's daily limit that no preclose explains, a file whose adjustflag differs from the other "
        "files') stop with an error naming the file, line and date; otherwise they are kept, counted and "
        "named in the load summary.")
    index_constituents: bool = option(False,
        "the folder holds an index's current constituents, so the report states the survivorship bias as a "
        "fact (otherwise as a condition).")
    cache: bool = option(False,
        "keep a columnar copy of a folder's CSVs in FOLDER/.forecaster_cache and read it while the files are "
        "unchanged (a second run of thousands of files starts in seconds).")
    trust_code_column: bool = option(False,
        "a file named for one stock (sz.300001.csv) whose code column says another is loaded as the column's "
        "stock with a warning, instead of stopping with an error naming both codes.")
    max_file_mb: float = option(256.0,
        "a data file larger than this many MB is not read: one stock's file is refused, a folder's is "
        "skipped, counted and named in the load summary (a gzip file decompressing past it is refused too).")
    synthetic_stocks: int = option(0,
        "> 0 and no path: a generated panel of that many stocks (codes syn.*, a planted signal) instead of "
        "files.")
    synthetic_days: int = option(750, "its trading days, planted rank IC and seed.")
    synthetic_ic: float = option(0.05, "its trading days, planted rank IC and seed.")
    synthetic_seed: int = option(0, "its trading days, planted rank IC and seed.")
    intraday: str = option("",
        "a folder of minute-bar files (baostock or akshare exports, one per stock) beside a folder of daily "
        "files: each day's realised volatility, last-30-minute return, VWAP deviation and first/last-bar "
        "volume shares, from that day's bars, join the panel's features.")
    universe: str = option("",
        "the stocks scored and traded, by day: a Qlib instruments file (CODE<TAB>start<TAB>end, several "
        "spans per stock), a CSV code,start,end or a list of codes (always members); or an index's name "
        "(csi300, csi500): a Qlib data folder's instruments/csi300.txt if it has one, else the point-in-time "
        "members of the index-constitution package, on any data. The list is checked (days short of the "
        "index's size, members shared with a disjoint index, spans that end before the next review: warnings "
        "in the run's notes). Scores, IC, quantiles, verdict, backtest (benchmark: the day's members, equal "
        "weight) and predict's list and orders cover only the day's members; models still train on every "
        "stock (see train_universe). Empty: every stock.")
    train_universe: str = option("",
        "the stock-days models learn from, in the same forms as universe (only the labels of the day's "
        "members are learnt; features see every stock). Empty: every stock of the data (the whole market's "
        "breadth).")
    train_outside_weight: float = option(0.0,
        "with train_universe, the weight of the labels of the stocks outside it that day, against 1 for its "
        "members: 0 (the default) learns the members' labels only; 1 learns every label alike (as without "
        "train_universe); between, training leans toward the members (the Transformer's per-day loss weights "
        "each stock; gradient boosting, LightGBM and ridge weight their rows).")

    def __post_init__(self):
        if not 0.0 <= self.train_outside_weight <= 1.0:
            raise ValueError(f"train_outside_weight must be within 0..1, got {self.train_outside_weight!r}")
        if self.train_outside_weight > 0 and not self.train_universe:
            raise ValueError("train_outside_weight weights the labels outside train_universe: give "
                             "train_universe too")
        if self.on_bad not in ("raise", "drop"):
            raise ValueError(f"on_bad must be 'raise' or 'drop', got {self.on_bad!r}")
        if not self.max_file_mb > 0:
            raise ValueError(f"max_file_mb must be > 0, got {self.max_file_mb!r}")
        if self.synthetic_stocks < 0 or self.synthetic_days < 1:
            raise ValueError("synthetic_stocks must be >= 0 and synthetic_days >= 1")
        if self.synthetic_stocks and self.path:
            raise ValueError("give either path or synthetic_stocks, not both")


@documented
@dataclass
class FeaturesConfig:
    """The inputs of the Transformer and, on a panel, of the feature regressions (gradient
    boosting, LightGBM, ridge), so that every learnt model of a run sees the same features.
    """

    names: tuple[str, ...] = option((),
        "feature names, or a set of Qlib's (alpha158, alpha360: its columns the data allow), for the "
        "Transformer and the feature regressions; empty: panel: every price, volume and valuation feature "
        "the data's columns allow; one stock: log_return.")
    blend: tuple[str, ...] | None = option(None,
        "panel Transformer only: a second set of inputs, named the same way (e.g. alpha158): --blend-seeds "
        "(by default as many as on the first set) more networks are trained on it and the forecast averages "
        "the two sets' per-day standardised scores; empty: one set; unset: the preset's (market: alpha158, "
        "one network on each set; panel: one set).")

    def __post_init__(self):
        self.names = tuple(self.names)
        self.blend = None if self.blend is None else tuple(self.blend)


@documented
@dataclass
class ModelsConfig:
    """Which models run beside the Transformer."""

    baselines: bool = option(True,
        "the baselines (panel: factor scores, composite, gradient boosting, ridge and the per-stock "
        "time-series ones at horizon 1; one stock: zero, mean, AR(5), ridge).")
    seed_recipe: bool | None = option(None,
        "also the seed recipe baseline (horizon 1 only); unset: for one stock yes, for panels no (it is slow "
        "there).")
    per_stock: bool = option(False, "panels: also one single-stock Transformer per stock (slow).")
    time_series: bool | None = option(None,
        "panels: with baselines, also the per-stock time-series forecasts (zero, historical mean, AR(5), "
        "ridge on 60 returns; horizon 1 only); unset: up to 500 stocks yes, beyond no (the panel and market "
        "presets).")


@documented
@dataclass
class RunConfig:
    """How a run is carried out, apart from what it computes: a rerun with other values is the
    same experiment, with the same forecasts (so ``experiment.toml`` leaves them out;
    ``metrics.json`` records them).
    """

    n_jobs: int = same_option(WalkForwardConfig, "n_jobs")
    threads_per_task: int = same_option(WalkForwardConfig, "threads_per_task")
    resume: bool = same_option(WalkForwardConfig, "resume")
    backend: str = same_option(WalkForwardConfig, "backend")
    address: str = same_option(WalkForwardConfig, "address")

    def __post_init__(self):
        # the one validation of these values: the walk-forward's
        WalkForwardConfig(**dataclasses.asdict(self))


RUN_FIELDS = tuple(f.name for f in dataclasses.fields(RunConfig))
# Fields that another section decides: the label's execution is the backtest's execution,
# progress bars are the caller's business, how the folds are run is [run]'s.
DERIVED = {"walk_forward": ("execution", "progress", *RUN_FIELDS),
           "backtest": ("strategy", "market", "costs")}
SECTIONS: dict[str, type] = {
    "data": DataConfig, "features": FeaturesConfig, "models": ModelsConfig,
    "walk_forward": WalkForwardConfig, "strategy": StrategyConfig, "costs": CostModel,
    "market": MarketRules, "backtest": BacktestConfig, "run": RunConfig,
}


@dataclass
class Experiment:
    """A fully resolved experiment (every value explicit)."""

    data: DataConfig
    features: FeaturesConfig
    model: dict
    models: ModelsConfig
    walk_forward: WalkForwardConfig
    backtest: BacktestConfig
    panel: bool = False
    source: str = "<options>"
    model_name: str = DEFAULT_MODEL  # the model under test; ``model`` holds its parameters
    run: RunConfig = dataclasses.field(default_factory=RunConfig)  # how, not what: not in the file
    # with another model under test: the Transformer baseline's parameters given in [model]
    baseline: dict = dataclasses.field(default_factory=dict)

    def sections(self) -> dict[str, dict]:
        """``{section: {key: value}}`` as an experiment file holds them."""
        def plain(obj, section):
            skip = DERIVED.get(section, ())
            return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name not in skip}

        return {"data": plain(self.data, "data"), "features": plain(self.features, "features"),
                "model": {"name": self.model_name, **self.model, **self.baseline},
                "models": plain(self.models, "models"),
                "walk_forward": plain(self.walk_forward, "walk_forward"),
                "strategy": plain(self.backtest.strategy, "strategy"),
                "costs": plain(self.backtest.costs, "costs"),
                "market": plain(self.backtest.market, "market"),
                "backtest": plain(self.backtest, "backtest")}


# ------------------------------------------------------------------ field descriptions


def option_fields(section: str) -> list[tuple[str, object, object, str]]:
    """``(name, default, type hint, help)`` of each option of ``section`` (derived fields
    left out): the field's resolved type hint and its metadata's description."""
    cls = SECTIONS[section]
    helps, hints, skip = field_help(cls), type_hints(cls), DERIVED.get(section, ())
    out = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        out.append((f.name, default, hints[f.name], helps.get(f.name, "")))
    return out


# ------------------------------------------------------------------ checking values


def build_section(section: str, values: Mapping, source: str = "<options>"):
    """The config object of ``section`` from ``{key: value}``: unknown keys, wrong types and
    invalid values stop with an error naming the file, section and key."""
    cls = SECTIONS[section]
    allowed = {name: hint for name, _, hint, _ in option_fields(section)}
    for key, value in values.items():
        if key not in allowed:
            raise config_error(source, section, f"unknown key {key!r}; expected one of: "
                               f"{', '.join(sorted(allowed))}")
        if not type_ok(value, allowed[key]):
            raise config_error(source, section, f"{key} = {value!r}: expected {type_name(allowed[key])}",
                               allowed)
    try:
        return cls(**values)
    except (ValueError, TypeError) as exc:
        raise config_error(source, section, str(exc), allowed) from exc


# ------------------------------------------------------------------ resolving


def read_toml(path: str | Path) -> dict:
    """The raw sections of an experiment file (relative ``[data] path`` and ``intraday`` made
    absolute, read from the file's folder)."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such experiment file") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    unknown = [k for k in raw if k not in (*SECTIONS, "model")]
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {unknown}; expected: "
                          f"{', '.join([*SECTIONS, 'model'])}")
    for name, section in raw.items():
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: {name} must be a [{name}] section, got a value")
    data = raw.get("data", {})
    for key in ("path", "intraday"):
        if isinstance(data.get(key), str) and data[key] and not Path(data[key]).is_absolute():
            given = data[key]
            data[key] = str((path.parent / given).resolve())
            if not Path(data[key]).exists():  # named as written in the file, and where it was looked for
                raise ConfigError(f"{path}: [data] {key} = {given!r}: no such file or folder (relative "
                                  f"paths are read from the experiment file's folder: {data[key]})")
        elif isinstance(data.get(key), str) and data[key] and not Path(data[key]).exists():
            raise ConfigError(f"{path}: [data] {key} = {data[key]!r}: no such file or folder")
    for key in ("universe", "train_universe"):  # a file beside the experiment (else a market's name)
        if isinstance(data.get(key), str) and data[key] and (path.parent / data[key]).is_file():
            data[key] = str((path.parent / data[key]).resolve())
    read_weights_record(raw.get("backtest", {}), path)
    read_weights_record(raw.get("strategy", {}), path, STRATEGY_RECORDED, "strategy")
    return raw


def resolve(raw: Mapping[str, Mapping], n_stocks: int, source: str = "<options>") -> Experiment:
    """Fill in every default (some depend on the data: ``n_stocks`` > 1 is a panel) and
    validate; returns the experiment with every value explicit."""
    raw = {k: dict(v) for k, v in raw.items()}
    panel = n_stocks > 1
    data = build_section("data", raw.get("data", {}), source)
    features = build_section("features", raw.get("features", {}), source)
    if features.blend and not panel:
        raise config_error(source, "features", "blend: a second set of inputs needs a panel (DATA a "
                           "folder of stocks); a single-stock Transformer has one", ("blend",))
    from forecaster.models.panel.model import PanelTransformer

    model_raw = dict(raw.get("model", {}))
    name = model_raw.pop("name", DEFAULT_MODEL)
    baseline: dict = {}  # with another model under test: what [model] sets of the Transformer baseline
    if name == DEFAULT_MODEL:
        model = {**model_params(panel), **check_model_params(model_raw, panel, source)}
    else:  # another model under test: [model] holds its parameters, and the Transformer's it lacks
        theirs = baseline_keys(name, model_raw, panel)
        model = check_named_model(name, {k: v for k, v in model_raw.items()
                                         if k not in theirs or k == "preset"}, panel, source)
        baseline = check_model_params({k: model_raw[k] for k in theirs}, panel, source)
    transformer = model if name == DEFAULT_MODEL else {**model_params(panel), **baseline}
    if panel:  # the regime of the defaults, by name: recorded, so a rerun keeps it at any breadth
        try:  # an unknown name is refused, never read as "panel"
            transformer["preset"] = PanelTransformer.rules.preset(n_stocks, transformer["preset"])
        except ConfigError as exc:
            raise config_error(source, "model", str(exc), model_fields()) from None
        if name != DEFAULT_MODEL:  # the run's regime: the baseline's, and the model's where it takes one
            baseline["preset"] = transformer["preset"]
            model.update({"preset": transformer["preset"]} if "preset" in model else {})
    market = panel and transformer["preset"] == "market"
    if features.blend is None:  # the preset's second set of inputs, and the networks on each set
        blend = PanelTransformer.rules.default_blend(n_stocks, transformer["preset"]) if panel else ()
        features = dataclasses.replace(features, blend=tuple(blend))
    if panel and transformer.get("n_seeds") is None:
        transformer["n_seeds"] = PanelTransformer.rules.default_seeds(n_stocks, transformer["preset"],
                                                                      bool(features.blend))
    models = build_section("models", {"seed_recipe": not panel, "time_series": not market,
                                      **raw.get("models", {})}, source)
    wf_raw = raw.get("walk_forward", {})
    bt_raw = raw.get("backtest", {})
    execution = bt_raw.get("execution", BacktestConfig.execution)
    wf_raw.setdefault("label", "tradeable" if panel else "close")
    # from the data alone (never n_jobs or the machine): the same experiment forecasts alike anywhere
    wf_raw.setdefault("warm_start", PanelTransformer.rules.warm_start(n_stocks, transformer["preset"])
                      if panel else 0)
    window = transformer["window"]
    wf_raw.setdefault("margin_days", max(130, 2 * int(window) + 10))
    run = build_section("run", _run_keys(raw, wf_raw, source), source)
    walk = dataclasses.replace(build_section("walk_forward", wf_raw, source), **dataclasses.asdict(run))
    walk.execution = execution
    st_raw = raw.get("strategy", {})
    st_raw.setdefault("rebalance_every", walk.horizon)
    defaults = dataclasses.asdict(StrategyConfig.for_universe(n_stocks))  # then the file's keys
    strategy = build_section("strategy", {**defaults, **st_raw}, source)
    costs = build_section("costs", raw.get("costs", {}), source)
    market = build_section("market", raw.get("market", {}), source)
    backtest = dataclasses.replace(build_section("backtest", bt_raw, source), strategy=strategy,
                                   market=market, costs=costs)
    if not features.names and not panel:
        features = FeaturesConfig(("log_return",), ())
    return Experiment(data, features, model, models, walk, backtest, panel, source, name, run, baseline)


def _run_keys(raw: Mapping, wf_raw: dict, source: str) -> dict:
    """``[run]``'s keys; the same keys in ``[walk_forward]`` (where files before ``[run]`` held
    them) are moved there, with a warning, and refused when both give one."""
    run = dict(raw.get("run", {}))
    moved = [k for k in RUN_FIELDS if k in wf_raw]
    for key in moved:
        if key in run:
            raise config_error(source, "walk_forward", f"{key} is also given in [run]; give it once, "
                               "in [run]", (key,))
        run[key] = wf_raw.pop(key)
    if moved and source != OPTIONS:
        log.warning("%s: [walk_forward] %s: how a run is carried out now lives in [run]; read from "
                    "there", source, ", ".join(moved))
    return run


def build_models(exp: Experiment) -> dict:
    """``{name: estimator}``: the model under test first (``[model] name``, by default the
    Transformer, named ``transformer``), then the baselines; the Transformer is one of them
    when another model is under test (with its defaults)."""
    from forecaster.models.presets import panel_models, single_stock_transformer
    from forecaster.models.stock.baselines import PerStock, default_baselines

    horizon = exp.walk_forward.horizon
    own = exp.model_name == DEFAULT_MODEL
    params = {**(exp.model if own else exp.baseline), "features": exp.features.names or None}
    if exp.panel:
        params["blend_features"] = exp.features.blend
        models = panel_models(horizon=horizon, execution=exp.backtest.execution,
                              time_series=exp.models.baselines and exp.models.time_series is not False,
                              **params)
        if not exp.models.baselines:
            models = {"transformer": models["transformer"]}
        if exp.models.per_stock:
            models["transformer_per_stock"] = PerStock(single_stock_transformer(horizon=horizon))
        if exp.models.seed_recipe and horizon == 1:
            models["seed"] = default_baselines(seed=True)["seed"]
    else:
        net = single_stock_transformer(horizon=horizon, **params)
        models = {"transformer": net}
        if exp.models.baselines:
            models.update(default_baselines(window=net.window, horizon=horizon,
                                            seed=exp.models.seed_recipe and horizon == 1))
    check_features(exp.features.names, exp.panel, exp.source)
    check_features(exp.features.blend, exp.panel, exp.source, "blend")
    try:
        models["transformer"]._validate_params()
    except ValueError as exc:
        raise config_error(exp.source, "model", str(exc), model_fields()) from exc
    if own:
        check_device(exp.model.get("device", "auto"), exp.source)
        main = models.pop(DEFAULT_MODEL)
    else:
        run = {"horizon": horizon, "execution": exp.backtest.execution,
               "features": exp.features.names or None}
        main = registered(exp.model_name, exp.panel).build(exp.panel, run, **exp.model)
        models.pop(exp.model_name, None)  # its baseline twin: the model under test replaces it
        if not exp.models.baselines:
            models.pop(DEFAULT_MODEL)
    return {exp.model_name: main, **models}


# ------------------------------------------------------------------ writing


def _toml_value(value):
    """A value as TOML holds it: a date for a timestamp (read back as a date), a list for a tuple."""
    if isinstance(value, pd.Timestamp):
        return value.date()
    if isinstance(value, (list, tuple)):
        return [_toml_value(v) for v in value]
    return value


def to_toml(exp: Experiment) -> str:
    """The experiment as a TOML file (written by tomli-w) with every value explicit; a key
    whose value is ``None`` is left out, which means ``None`` (listed in a comment)."""
    sections = {section: {k: _toml_value(v) for k, v in values.items() if v is not None}
                for section, values in exp.sections().items()}
    sections["backtest"] = record_weights(sections["backtest"])  # a file: its absolute path, SHA-256
    sections["strategy"] = record_weights(sections["strategy"], STRATEGY_RECORDED)
    unset = [f"[{section}] {k}" for section, values in exp.sections().items()
             for k, v in values.items() if v is None]
    source = str(exp.source).replace("\n", " ").replace("\r", " ")  # one comment line
    head = [f"# Fully resolved experiment (from {source}); run it again with:",
            "#   forecaster run THIS_FILE --out NEW_FOLDER"]
    if unset:
        head.append(f"# not set (None): {', '.join(unset)}")
    return "\n".join(head) + "\n\n" + tomli_w.dumps(sections)


def experiment_dict(exp: Experiment) -> dict:
    """The sections as JSON-able dicts, and how the run was carried out (``run``; for
    metrics.json)."""
    sections = {**exp.sections(), "run": dataclasses.asdict(exp.run)}
    sections["backtest"] = record_weights(sections["backtest"])
    sections["strategy"] = record_weights(sections["strategy"], STRATEGY_RECORDED)
    return {s: {k: (list(v) if isinstance(v, tuple) else v) for k, v in vals.items()}
            for s, vals in sections.items()}

