"""Loading A-share daily bars: formats, cleaning, the embedded synthetic series and a
synthetic panel with a planted signal."""

from .loading import DataError, LoadReport, load_csv, load_dir
from .synthetic import (
    SyntheticConfig,
    default_series_path,
    synthetic_panel,
    synthetic_prices,
    write_synthetic_panel,
)

__all__ = [
    "DataError",
    "LoadReport",
    "SyntheticConfig",
    "default_series_path",
    "load_csv",
    "load_dir",
    "synthetic_panel",
    "synthetic_prices",
    "write_synthetic_panel",
]
