"""Loading A-share daily bars: formats, cleaning, and the embedded synthetic series."""

from .loading import DataError, LoadReport, load_csv, load_dir
from .synthetic import SyntheticConfig, default_series_path, synthetic_prices

__all__ = [
    "DataError",
    "LoadReport",
    "SyntheticConfig",
    "default_series_path",
    "load_csv",
    "load_dir",
    "synthetic_prices",
]
