"""Industry groups for the enhanced book: a user's industries file attached to a Panel, and
each day's groups over the members a decision is made for.

:func:`attach_industries` reads the file (:func:`~forecaster.data.daily.industries.read_industries`:
checked whole, one error naming its line) and keeps its classes by day with the Panel;
:func:`industry_groups` gives each day's group of each member at the strategy's level
(``industry_level``; a group under ``industry_min_members`` merged into its letter's or
``other``; a member without a class ``unclassified``), the groups the book's
``industry_bound`` holds (:class:`~forecaster.portfolio.book_constraints.IndustryBound`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.daily.industries import (
    INDUSTRY_FIELD,
    UNCLASSIFIED,
    field_labels,
    groups,
    read_industries,
)
from forecaster.data.sources import MAX_FILE_MB
from forecaster.portfolio.index_weights import decision_members

INDUSTRY_KEY = ("industry_file",)
COLUMNS = ("date", "industry", "book", "benchmark", "active")  # active_industries.csv


def attach_industries(panel, path, max_file_mb: float = MAX_FILE_MB) -> list[str]:
    """Read ``path`` and keep its classes ``[days, stocks]`` with ``panel`` (and the groups the
    industry features compare within as the field ``industry_group``); returns the notes
    (how the classes apply over the panel's days, a snapshot's look-ahead named, and what
    reading counted).

    Raises:
        DataError: a bad file (:func:`~forecaster.data.daily.industries.read_industries`)."""
    industries = read_industries(path, panel.codes, max_file_mb)
    classes = industries.classes(panel.dates, panel.codes)
    panel._cache[INDUSTRY_KEY] = (industries, classes)
    panel.fields[INDUSTRY_FIELD] = field_labels(classes, panel.listed)  # the industry features' groups
    return [industries.describe(panel.dates), *industries.notes]


def industry_groups(panel, members: np.ndarray, strategy) -> tuple[np.ndarray | None, list[str], dict]:
    """``(labels [days, stocks], names, counts)``: each day's group of each of ``members``
    ``[days, stocks]`` (-1 elsewhere) at ``strategy.industry_level``, small groups merged
    (``strategy.industry_min_members``); ``counts``: member-days ``unclassified`` and
    ``merged``. The file ``strategy.industries`` is attached first where none is; ``(None, [],
    {})`` where the strategy has none (a file attached to the panel for another book is not
    this book's)."""
    if not strategy.industries:
        return None, [], {}
    got = panel._cache.get(INDUSTRY_KEY)
    if got is None or Path(got[0].source).resolve() != Path(strategy.industries).resolve():
        attach_industries(panel, strategy.industries)  # none attached, or another file
    industries, classes = panel._cache[INDUSTRY_KEY]
    labels, names, counts = groups(classes, members, strategy.industry_level, strategy.industry_min_members)
    counts["described"] = industries.describe(panel.dates)
    return labels, names, counts


def risk_industries(panel, strategy, next_members: np.ndarray | None = None
                    ) -> tuple[np.ndarray, list[str]] | None:
    """``(labels [days, stocks], names)``: the risk model's industry factors, each day's group
    (:func:`industry_groups`, at the book's level and minimum) of the stocks its regressions
    and decisions read (the day's listed members and the next day's), -1 for the unclassified
    and the others (they load on no industry); None without industries."""
    listed = panel.listed if panel.members is None else panel.members & panel.listed
    labels, names, _ = industry_groups(panel, listed | decision_members(panel, next_members), strategy)
    if labels is None:
        return None
    if UNCLASSIFIED in names:
        drop = names.index(UNCLASSIFIED)
        labels = np.where(labels == drop, -1, labels - (labels > drop))
        names = names[:drop] + names[drop + 1:]
    return labels, names


def industry_names(panel) -> dict[str, str]:
    """``{code: name}`` from the attached industries file where it gives names (baostock's
    ``code_name``); empty without one."""
    got = panel._cache.get(INDUSTRY_KEY)
    return dict(got[0].names) if got is not None else {}


def last_groups(labels: pd.DataFrame, names: list[str], codes) -> dict[str, str]:
    """``{code: group}``: each of ``codes``' group on the last row of ``labels`` (``[date x
    code]``, -1 none) that gives it one."""
    out = {}
    for code in codes:
        if str(code) in labels.columns:
            col = labels[str(code)].to_numpy()
            known = col[col >= 0]
            if len(known):
                out[str(code)] = names[int(known[-1])]
    return out


def industry_notes(counts: dict, names: list[str], level: int) -> list[str]:
    """The notes of a run's industry groups (:func:`industry_groups`'s ``counts``)."""
    if not counts:
        return []
    notes = [counts["described"], f"{len(names)} industry group(s) at level {level}"]
    if counts["unclassified"]:
        notes.append(f"{counts['unclassified']:,} member-day(s) without an industry class: in the group "
                     "'unclassified' (kept, bounded as a group)")
    if counts["merged"]:
        notes.append(f"{counts['merged']:,} member-day(s) of groups under the minimum membership merged into "
                     "their letter's group or 'other'")
    return notes


def group_weights(weights: pd.DataFrame, bench: pd.DataFrame, labels: np.ndarray, names: list[str]
                  ) -> pd.DataFrame:
    """:data:`COLUMNS` rows: on each row of ``weights`` (``[date x code]``, the book's) the sum
    over each group (``labels`` ``[rows, codes]``, -1 none) of the book's and the benchmark's
    (``bench``, the same shape) weights and their difference."""
    w = np.nan_to_num(weights.to_numpy(dtype=float))
    b = np.nan_to_num(bench.to_numpy(dtype=float))
    labels = np.asarray(labels)
    n_rows, n = len(weights), len(names)
    ok = labels >= 0
    cell = (np.arange(n_rows)[:, None] * n + labels)[ok]  # one bin per (row, group)
    book = np.bincount(cell, weights=w[ok], minlength=n_rows * n).reshape(n_rows, n)
    ref = np.bincount(cell, weights=b[ok], minlength=n_rows * n).reshape(n_rows, n)
    row, group = np.nonzero(np.bincount(cell, minlength=n_rows * n).reshape(n_rows, n))
    return pd.DataFrame({"date": weights.index[row], "industry": [names[g] for g in group],
                         "book": book[row, group], "benchmark": ref[row, group],
                         "active": book[row, group] - ref[row, group]}, columns=list(COLUMNS))


def beyond_bound(held: pd.DataFrame, decided: pd.DataFrame, bound: float, slack: float = 0.005) -> str:
    """One line on how the industry bound held: the largest active group weight the book
    decided (``decided``: :data:`COLUMNS` of the targets) and how often, and where most, the
    book held (``held``: at the rebalance days' closes) beyond ``bound + slack`` (the day's
    moves, lots and buys a limit kept from filling)."""
    if held.empty or decided.empty:
        return "industries: no rebalance with industry groups"
    size = held["active"].abs()
    over = held[size > bound + slack]
    line = (f"industries: decided max_active={decided['active'].abs().max():.4f} (bound {bound:g}); held "
            f"beyond {bound + slack:g} on {over['date'].nunique()} of {held['date'].nunique()} rebalance(s)")
    if len(over):
        worst = held.loc[size.idxmax()]
        line += (f", the largest {worst['active']:+.4f} in {worst['industry']} on "
                 f"{pd.Timestamp(worst['date']).date()}")
    return line


__all__ = ["COLUMNS", "INDUSTRY_KEY", "attach_industries", "beyond_bound", "group_weights", "industry_groups",
           "industry_names", "industry_notes", "last_groups", "risk_industries"]
