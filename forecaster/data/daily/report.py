"""What a load of one file read, dropped and flagged (:class:`LoadReport`), said in one line."""

from __future__ import annotations

from dataclasses import dataclass, field

from forecaster.data.daily.quality import KINDS, Flag, as_flags
from forecaster.data.minute.bars import bar_clauses


@dataclass
class LoadReport:
    """What :func:`~forecaster.data.daily.loading.load_csv` read, dropped and flagged.

    Attributes:
        compression: ``"gzip"`` for a compressed file, else ``""``.
        name_code: where the file's name says another stock than its code column and the
            column was trusted (``trust_code_column``): the code the name says; else ``""``.
        bar_minutes, trading_days: minute bars (0 for daily files): the bars' length and the
            days they cover.
        flags: implausible rows, kept as they are
            (:class:`~forecaster.data.daily.quality.Flag`: the first of each kind and how many):
            impossible bars, jumps beyond the daily limit, and (for
            :func:`~forecaster.data.daily.loading.load_csv`) rows whose adjustflag differs from
            the file's others.
        adjust_flags: ``{adjustflag: [rows, line, date]}`` of the file's ``adjustflag`` column
            (the first row of each value), compared across a folder by
            :func:`~forecaster.data.daily.folders.load_dir`.
        adjustment: what a TDX title says of the prices (``"unadjusted"``...), else ``""``.

    Minute files (:mod:`forecaster.data.minute.bars`, :mod:`forecaster.data.minute.returns`):
    ``stamped`` (``"close"``, or ``"start"``: re-stamped), ``auction_bars`` merged,
    ``missing_bars`` on ``short_days``, ``zero_price_bars`` and ``suspended_bars``,
    ``volume_unit`` and ``volume_ratio`` (``amount / (volume x close)``), ``gaps`` (days of the
    overnight gaps flagged as likely corporate actions) or ``gap_check`` (why not checked), and
    the daily file whose ``preclose`` the first bars return from (``daily_file``,
    ``preclose_days``, ``exrights_days``; ``daily_note``: why one beside the file was not used).
    """

    path: str
    format: str
    encoding: str
    rows_read: int = 0
    rows_kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    reordered_rows: int = 0
    suspended_days: int = 0
    st_days: int = 0
    delisting_days: int = 0
    missing_values: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    compression: str = ""
    name_code: str = ""
    bar_minutes: int = 0
    trading_days: int = 0
    flags: list[Flag] = field(default_factory=list)
    adjust_flags: dict[str, list] = field(default_factory=dict)
    adjustment: str = ""
    stamped: str = ""
    auction_bars: int = 0
    missing_bars: int = 0
    short_days: int = 0
    zero_price_bars: int = 0
    suspended_bars: int = 0
    volume_unit: str = ""
    volume_ratio: float = 0.0
    gaps: list[str] = field(default_factory=list)
    gap_check: str = ""
    daily_file: str = ""
    preclose_days: int = 0
    exrights_days: int = 0
    daily_note: str = ""

    def __post_init__(self):
        self.flags = as_flags(self.flags)  # a cache stores them as dicts

    def summary(self) -> str:
        how = f"{self.encoding}, {self.compression}" if self.compression else self.encoding
        parts = [f"{self.path}: {self.format} ({how}{', ' + self.adjustment if self.adjustment else ''}), "
                 f"{self.rows_kept}/{self.rows_read} rows kept"]
        if self.bar_minutes:
            parts.extend(bar_clauses(self))
        if self.dropped:
            parts.append("dropped " + ", ".join(f"{n} {why}" for why, n in self.dropped.items()))
        if self.reordered_rows:
            parts.append(f"{self.reordered_rows} rows out of date order were sorted")
        if not self.bar_minutes:
            parts.append(f"{self.suspended_days} suspended days, {self.st_days} ST days"
                         + (f", {self.delisting_days} delisting-period days" if self.delisting_days else ""))
        if self.missing_values:
            parts.append("empty cells " + ", ".join(f"{c}={n}" for c, n in self.missing_values.items()))
        parts.extend(f"{f.rows} row(s) with {KINDS[f.kind]}, kept: first {f.describe()}" for f in self.flags)
        parts.extend(self.warnings)
        return "; ".join(parts)
