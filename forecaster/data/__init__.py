"""Data: loading A-share daily and minute bars (formats, plain or gzip CSVs, cleaning, folders
read in parallel, a Parquet cache, fetching), daily features from minute bars, the
embedded synthetic series and a synthetic panel with a planted signal, the aligned
:class:`Panel` of ``[days, stocks]`` arrays every panel model reads, and the exchange's facts
(boards, price limits)."""

from forecaster.data.folders import FolderLoad, load_dir
from forecaster.data.intraday import attach_intraday, daily_bars, daily_features
from forecaster.data.loading import DataError, LoadReport, Skipped, load_csv, scan_dir
from forecaster.data.panel import Panel, PanelFiles
from forecaster.data.qlib import load_qlib, qlib_frames, write_qlib
from forecaster.data.synthetic import (
    SyntheticConfig,
    default_series_path,
    synthetic_panel,
    synthetic_prices,
    write_synthetic_panel,
)
from forecaster.data.synthetic_bars import synthetic_intraday, write_minute_csv

__all__ = [
    "DataError",
    "attach_intraday",
    "daily_bars",
    "daily_features",
    "synthetic_intraday",
    "write_minute_csv",
    "FolderLoad",
    "LoadReport",
    "Panel",
    "PanelFiles",
    "Skipped",
    "SyntheticConfig",
    "default_series_path",
    "load_csv",
    "load_dir",
    "load_qlib",
    "qlib_frames",
    "write_qlib",
    "scan_dir",
    "synthetic_panel",
    "synthetic_prices",
    "write_synthetic_panel",
]
