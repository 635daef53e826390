"""Data: loading A-share daily and minute bars (formats, plain or gzip CSVs, cleaning, folders
read in parallel, a Parquet cache, fetching), daily features from minute bars, Qlib's binary
folders, the embedded synthetic series and a synthetic panel with a planted signal, the
aligned :class:`Panel` of ``[days, stocks]`` arrays every panel model reads, and the
exchange's facts (boards, price limits) and universes.

Its rooms: ``daily/`` (layouts, one file, a folder, quality flags, the cache), ``minute/``
(layouts, the session, bars, overnight returns, daily features from bars), ``qlib/`` (reader,
writer, conventions), ``market/`` (exchange facts, universes) and ``synthetic/`` (daily and
minute); loose beside them ``sources`` (what a path is: a Qlib folder, a folder of files, a
file in one of the registered layouts), ``panel`` and ``fetch``.
"""

from forecaster.data.daily.folders import FolderLoad, load_dir
from forecaster.data.daily.loading import load_csv
from forecaster.data.daily.report import LoadReport
from forecaster.data.minute.features import attach_intraday, daily_bars, daily_features
from forecaster.data.panel import Panel, PanelFiles
from forecaster.data.qlib.reader import load_qlib, qlib_frames
from forecaster.data.qlib.writer import write_qlib
from forecaster.data.sources import DataError, Skipped, scan_dir
from forecaster.data.synthetic.daily import (
    SyntheticConfig,
    default_series_path,
    synthetic_panel,
    synthetic_prices,
    write_synthetic_panel,
)
from forecaster.data.synthetic.minute import synthetic_intraday, write_minute_csv

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
