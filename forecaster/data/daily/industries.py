"""Industry classes from the files users hold (``--industries FILE``), by day and level.

Read are, UTF-8 (with or without a BOM) or GBK, codes in every form the loaders read:

* baostock's ``query_stock_industry`` export: ``updateDate,code,code_name,industry,
  industryClassification`` (CSRC classes ``J66货币金融服务``, one snapshot date);
* a plain ``code,industry`` file, the columns under any of the usual names (:data:`CODE_NAMES`,
  :data:`INDUSTRY_NAMES`; a name column, :data:`NAME_NAMES`, is kept for the report);
* a dated ``date,code,industry`` file: point in time, each row holding from its date until the
  code's next row (what a user builds from yearly snapshots).

A file with one date (a snapshot) or none is applied to every day; on the days before its date
that is a look-ahead (a class that changed is not known), which :meth:`Industries.describe`
says with the word ``snapshot`` and the date. A dated file is used point in time: a stock's
days before its first row have no class.

Levels: a CSRC class carries a letter and a division (``C39...``): level 1 is the letter (the
section, named by :data:`CSRC_SECTIONS`), level 2 the division (the class as written). A name
without a code (Shenwan's ``银行``) is one level. On each day a group with fewer than
``min_members`` of the day's members merges into its letter's group, or into :data:`OTHER`
where it has none; a member without a class (no row, an empty industry) is in
:data:`UNCLASSIFIED`, never dropped. Both are counted (member-days).

Bad input is one :class:`~forecaster.data.sources.DataError` naming the file, line and column:
no industry column, no row, a date that is not a date, one code with two classes on one date
(both lines named), bytes neither UTF-8 nor GBK (the offset). Codes the data do not hold are
counted and listed in the notes, not an error.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.daily.dates import read_date_column
from forecaster.data.market.exchange import canonical_code
from forecaster.data.sources import MAX_FILE_MB, DataError, decode_text, too_large

OPTION = "--industries"
CODE_NAMES = ("code", "股票代码", "证券代码", "ts_code", "instrument", "symbol", "stock_code")
INDUSTRY_NAMES = ("industry", "行业", "所属行业", "行业名称", "industry_name")
DATE_NAMES = ("date", "updateDate", "日期", "in_date", "start_date", "trade_date")
NAME_NAMES = ("code_name", "name", "股票名称", "证券简称", "股票简称")
UNCLASSIFIED = "unclassified"
OTHER = "other"
LEVELS = (1, 2)
# CSRC 2012 sections (门类), the letter of a division's class
CSRC_SECTIONS = {
    "A": "农、林、牧、渔业", "B": "采矿业", "C": "制造业", "D": "电力、热力、燃气及水生产和供应业",
    "E": "建筑业", "F": "批发和零售业", "G": "交通运输、仓储和邮政业", "H": "住宿和餐饮业",
    "I": "信息传输、软件和信息技术服务业", "J": "金融业", "K": "房地产业", "L": "租赁和商务服务业",
    "M": "科学研究和技术服务业", "N": "水利、环境和公共设施管理业", "O": "居民服务、修理和其他服务业",
    "P": "教育", "Q": "卫生和社会工作", "R": "文化、体育和娱乐业", "S": "综合",
}
_CODED = re.compile(r"^([A-Z])(\d{2})")  # a CSRC class: its letter and division


def letter_of(industry: str) -> str | None:
    """A CSRC class's section letter (``"C39计算机..."`` -> ``"C"``), None for a plain name."""
    m = _CODED.match(industry)
    return m.group(1) if m else None


def at_level(industry: str, level: int) -> str:
    """The group of a class at ``level``: the section (``"C制造业"``) at 1, the class itself at 2;
    a name without a code is itself at both."""
    letter = letter_of(industry)
    if letter is None or level == 2:
        return industry
    return letter + CSRC_SECTIONS.get(letter, "")


@dataclass
class Industries:
    """A file's classes: ``table`` rows ``code, date, industry, line`` (``date`` NaT in an
    undated file), sorted by code and date; ``names`` ``{code: name}`` where the file gives one;
    ``source`` the path; ``notes`` what reading it counted."""

    table: pd.DataFrame
    source: str
    names: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def dates(self) -> pd.DatetimeIndex:
        return pd.DatetimeIndex(self.table["date"].dropna().unique()).sort_values()

    @property
    def snapshot(self) -> pd.Timestamp | None:
        """The one date of a snapshot file (None: undated or dated point in time)."""
        d = self.dates
        return d[0] if len(d) == 1 else None

    @property
    def point_in_time(self) -> bool:
        return len(self.dates) > 1

    def classes(self, dates: pd.DatetimeIndex, codes) -> np.ndarray:
        """``[days, stocks]`` each stock's class on each day (``""``: none), as the module
        docstring says (a snapshot or an undated file on every day; a dated file from each
        row's date until the code's next row)."""
        codes = [str(c) for c in codes]
        col = {c: j for j, c in enumerate(codes)}
        out = np.full((len(dates), len(codes)), "", dtype=object)
        rows = self.table[self.table["code"].isin(col)]
        if not self.point_in_time:
            for code, industry in zip(rows["code"], rows["industry"], strict=True):
                out[:, col[code]] = industry
            return out
        for code, g in rows.groupby("code", sort=False):
            start = dates.searchsorted(pd.DatetimeIndex(g["date"]))
            ends = np.r_[start[1:], len(dates)]
            for a, b, industry in zip(start, ends, g["industry"], strict=True):
                out[a:b, col[code]] = industry
        return out

    def describe(self, dates: pd.DatetimeIndex) -> str:
        """How the classes are applied over ``dates`` (the look-ahead of a snapshot named)."""
        span = f"{dates[0].date()}..{dates[-1].date()}" if len(dates) else "no days"
        snap = self.snapshot
        if snap is not None and len(dates) and dates[0] < snap:
            return (f"industries from a snapshot of {snap.date()} applied to {span}: class changes before "
                    "it are not known (a look-ahead)")
        if snap is None and not self.point_in_time:
            return (f"industries from an undated file (a snapshot of unknown date) applied to {span}: class "
                    "changes are not known (a look-ahead)")
        if snap is not None:
            return f"industries from a snapshot of {snap.date()} applied to {span} (all on or after it)"
        return (f"industries point in time from {len(self.dates)} dates ({self.dates[0].date()}.."
                f"{self.dates[-1].date()}) over {span}")


def _column(columns, names, at: str, what: str, required: bool = True) -> str | None:
    lower = {c.lower(): c for c in columns}
    for name in names:
        if name.lower() in lower:
            return lower[name.lower()]
    if required:
        raise DataError(f"{at}: no {what} column; expected one named {', '.join(names)} (found "
                        f"{', '.join(columns[:12]) or 'none'})")
    return None


def read_industries(path: str | Path, codes, max_file_mb: float = MAX_FILE_MB) -> Industries:
    """The classes of ``path`` for the data's stocks ``codes`` (module docstring).

    Raises:
        DataError: the file cannot be read or is not an industry file (module docstring)."""
    path = Path(path)
    at = f"{OPTION} {path}"
    if not path.is_file():
        raise DataError(f"{at}: no such file")
    reason = too_large(path, max_file_mb)
    if reason:
        raise DataError(f"{at}: {reason}")
    text = decode_text(path.read_bytes(), at)
    try:
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"{at}: not a readable CSV ({why})") from None
    raw.columns = [str(c).strip() for c in raw.columns]
    columns = list(raw.columns)
    code_col = _column(columns, CODE_NAMES, at, "code")
    industry_col = _column(columns, INDUSTRY_NAMES, at, "industry")
    date_col = _column(columns, DATE_NAMES, at, "date", required=False)
    name_col = _column(columns, NAME_NAMES, at, "name", required=False)
    if raw.empty:
        raise DataError(f"{at}: holds no row (a header only)")
    line = np.arange(len(raw)) + 2
    code = raw[code_col].str.strip().map(lambda c: canonical_code(c) if c else "").to_numpy()
    industry = raw[industry_col].str.strip().to_numpy()
    if date_col is not None:
        lines = pd.Series(line)
        dates, _ = read_date_column(raw[date_col].str.strip(), lambda i: f"{at}: line {lines.iloc[i]}",
                                    date_col, option=None)
        dates = pd.DatetimeIndex(dates).normalize()
    else:
        dates = pd.DatetimeIndex([pd.NaT] * len(raw))
    notes = []
    no_code = code == ""
    if no_code.any():
        first = line[np.flatnonzero(no_code)[0]]
        raise DataError(f"{at}: line {first}, column {code_col}: empty; expected a "
                        "stock code")
    table = pd.DataFrame({"code": code, "date": dates, "industry": industry, "line": line})
    # one code, one date, two classes: which holds is unknown
    same = table.duplicated(["code", "date"], keep=False).to_numpy()
    if same.any():
        d = table[same]
        conflict = d.groupby(["code", "date"], dropna=False, sort=False)["industry"].transform("nunique") > 1
        if conflict.any():
            first = d[conflict.to_numpy()].iloc[0]
            rows = d[(d["code"] == first["code"]) & ((d["date"] == first["date"]) | pd.isna(first["date"]))]
            a, b = rows.iloc[0], rows[rows["industry"] != rows["industry"].iloc[0]].iloc[0]
            when = f" on {a['date'].date()}" if pd.notna(a["date"]) else ""
            raise DataError(f"{at}: lines {a['line']} and {b['line']}, column {industry_col}: {a['code']} "
                            f"has two classes{when} ({a['industry']!r} and {b['industry']!r}); expected one")
    repeated = table.duplicated(["code", "date"]).to_numpy()
    if repeated.any():
        notes.append(f"{int(repeated.sum())} repeated row(s) of {path.name} (same code, date and class) "
                     "read once")
    table = table[~repeated]
    known = {str(c) for c in codes}
    unknown = sorted(set(table["code"]) - known)
    if unknown:
        notes.append(f"{len(unknown)} code(s) of {path.name} are no stock of the data, left out: "
                     f"{', '.join(unknown[:8])}{' and more' if len(unknown) > 8 else ''}")
    empty = int((table["industry"] == "").sum())
    if empty:
        notes.append(f"{empty} row(s) of {path.name} with an empty industry: those stocks are unclassified "
                     "while the row holds")
    names = {}
    if name_col is not None:
        first = raw.loc[~repeated, name_col].str.strip().to_numpy()
        names = {c: n for c, n in zip(table["code"], first, strict=True) if n and c in known}
    table = table.sort_values(["code", "date"], kind="stable").reset_index(drop=True)
    return Industries(table, str(path), names, notes)


def groups(classes: np.ndarray, members: np.ndarray, level: int = 1, min_members: int = 3
           ) -> tuple[np.ndarray, list[str], dict[str, int]]:
    """Each member's group by day at ``level``: ``(labels [days, stocks] int, group names, counts)``;
    ``labels`` -1 off the members, else an index into the names (:data:`UNCLASSIFIED` where the
    class is empty; a group with fewer than ``min_members`` members that day merged into its
    letter's, or :data:`OTHER`). ``counts``: member-days ``unclassified`` and ``merged``.

    ``classes``: ``[days, stocks]`` (:meth:`Industries.classes`); ``members``: ``[days, stocks]``."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    members = np.asarray(members, bool)
    # hashed, not sorted: days x stocks strings (millions) sort in seconds, hash in a fraction
    class_id, kinds = pd.factorize(np.asarray(classes, dtype=object).ravel(), use_na_sentinel=False)
    kinds = [str(c) for c in kinds]
    class_id = class_id.reshape(members.shape)
    group_of = [UNCLASSIFIED if not c else at_level(c, level) for c in kinds]
    up_of = [UNCLASSIFIED if not c else at_level(c, 1) if level == 2 and letter_of(c) else OTHER
             for c in kinds]
    names = sorted(set(group_of) | set(up_of))
    index = {g: i for i, g in enumerate(names)}
    gid = np.array([index[g] for g in group_of])[class_id]  # [days, stocks]
    up = np.array([index[g] for g in up_of])[class_id]
    n_days, n_groups = members.shape[0], len(names)
    day = np.broadcast_to(np.arange(n_days)[:, None], members.shape)
    size = np.bincount((day * n_groups + gid)[members], minlength=n_days * n_groups).reshape(n_days, n_groups)
    keep = np.zeros(n_groups, bool)
    keep[[index[g] for g in (UNCLASSIFIED, OTHER) if g in index]] = True
    small = (size < min_members) & ~keep  # [days, groups]
    merge = members & small[day, gid]
    labels = np.where(members, np.where(merge, up, gid), -1)
    counts = {"unclassified": int((members & (gid == index.get(UNCLASSIFIED, -1))).sum()),
              "merged": int(merge.sum())}
    used = np.unique(labels[labels >= 0])  # names of the groups that hold a member some day
    renumber = np.full(n_groups, -1)
    renumber[used] = np.arange(len(used))
    labels = np.where(labels >= 0, renumber[np.maximum(labels, 0)], -1)
    return labels, [names[i] for i in used], counts


INDUSTRY_FIELD = "industry_group"  # the Panel field of the industry features: a group index, NaN none
FIELD_LEVEL, FIELD_MIN_MEMBERS = 2, 5  # the features compare within a division, a small one in its letter


def field_labels(classes: np.ndarray, listed: np.ndarray) -> np.ndarray:
    """``[days, stocks]`` float: each listed stock's group for the industry features
    (:data:`FIELD_LEVEL`, groups under :data:`FIELD_MIN_MEMBERS` listed stocks merged as
    :func:`groups` merges), NaN off the listed and for the unclassified (no industry to compare
    with)."""
    labels, names, _ = groups(classes, listed, FIELD_LEVEL, FIELD_MIN_MEMBERS)
    none = names.index(UNCLASSIFIED) if UNCLASSIFIED in names else -2
    return np.where((labels >= 0) & (labels != none), labels, np.nan).astype(float)


__all__ = ["CSRC_SECTIONS", "FIELD_LEVEL", "FIELD_MIN_MEMBERS", "INDUSTRY_FIELD", "Industries", "LEVELS",
           "OPTION", "OTHER", "UNCLASSIFIED", "at_level", "field_labels", "groups", "letter_of",
           "read_industries"]
