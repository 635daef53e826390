"""Tomorrow's ranked list as a figure (``next_day.png``), drawn by one function for both
``forecaster predict`` and ``forecaster plot`` (:func:`draw_next_day`), and what it marks: the
stocks that closed at a price limit on the signal day, those held (``--holdings``) and each
stock's name where the data files carry one (xbx/efinance-style ``股票名称``, a ``name`` column)."""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd


def draw_next_day(table: pd.DataFrame, grid, source: str, holdings: str | None, path: Path,
                  train_end: pd.Timestamp) -> Path:
    """``next_day.png`` at ``path``: the ranked list ``table`` (its
    :data:`~forecaster.portfolio.next_day.COLUMNS`; any other column is not drawn) marked by
    :func:`mark_ranked_list` and drawn by :func:`~forecaster.reporting.run_figures.plot_ranked_list`,
    titled with the signal day (``grid``'s last) and ``train_end``; each held stock the figure
    leaves out is named on stderr, with why. ``predict`` and ``plot`` both draw it here."""
    from forecaster.portfolio.next_day import COLUMNS
    from forecaster.reporting.plots import plot_ranked_list
    from forecaster.reporting.run_figures import held_not_shown

    marked = mark_ranked_list(table[[c for c in COLUMNS if c in table]], grid, source, holdings)
    drawn = plot_ranked_list(marked, path, signal_date=grid.dates[-1], train_end=train_end)
    for line in held_not_shown(marked):  # a held stock the figure leaves out is named, with why
        click.echo(f"{Path(path).name}: {line}", err=True)
    return drawn


def mark_ranked_list(table: pd.DataFrame, grid, source: str, holdings: str | None = None) -> pd.DataFrame:
    """``table`` (:func:`forecaster.portfolio.next_day.ranked_list` of ``grid``) with the
    columns :func:`forecaster.reporting.run_figures.plot_ranked_list` marks: ``at_limit``
    (``"up"``/``"down"``: closed at that limit on the signal day), ``held`` (with a holdings
    file) and ``name`` (where the files in ``source`` carry names and a font can draw them)."""
    from forecaster.reporting.figures import CJK_FONT

    table = table.copy()
    last = grid.n_days - 1
    up = pd.Series(grid.at_limit_up("close")[last], index=list(grid.codes))
    down = pd.Series(grid.at_limit_down("close")[last], index=list(grid.codes))
    table["at_limit"] = ["up" if up.get(c, False) else "down" if down.get(c, False) else ""
                         for c in table["code"]]
    if holdings:
        from forecaster.portfolio.orders import HoldingsError, read_holdings

        try:
            book = read_holdings(holdings, grid.codes, capital=0.0)
        except HoldingsError as exc:
            raise click.ClickException(str(exc)) from exc
        table["held"] = [book.shares.get(c, 0) != 0 for c in table["code"]]
    names = stock_names(source, shown_codes(table))
    if names and CJK_FONT is None and any(not n.isascii() for n in names.values()):
        click.echo("next_day.png shows codes only: the data's stock names need a CJK font, and matplotlib "
                   "finds none (install one, e.g. apt-get install fonts-noto-cjk)", err=True)
        names = {}
    if names:
        table["name"] = table["code"].map(names).fillna("")
    return table


# Columns that carry a stock's name, in the layouts that have one.
NAME_COLUMNS = ("name", "股票名称", "名称", "证券简称", "code_name", "stock_name", "简称")


def shown_codes(table: pd.DataFrame, n: int = 10) -> list[str]:
    """The codes next_day.png shows: the top and bottom ``n`` scored stocks."""
    scored = table.dropna(subset=["score"])
    return list(dict.fromkeys([*scored["code"].head(n), *scored["code"].tail(n)]))


def stock_names(folder: str, codes: list[str]) -> dict[str, str]:
    """``{code: name}`` for ``codes`` where the data folder's files carry a name column (the last
    row's name: today's, with its ST mark); empty when they do not (baostock daily exports,
    Qlib folders). Only the files of ``codes`` are read."""
    from forecaster.data.market.exchange import canonical_code
    from forecaster.data.sources import code_in_name, data_stem, scan_dir

    folder = Path(folder)
    if not folder.is_dir():
        return {}
    try:
        files, _ = scan_dir(folder)
    except (OSError, ValueError):
        return {}
    by_code = {}
    for path in files:  # a file named after its stock (sh.600000.csv, syn.000001.csv)
        code = code_in_name(path.name)
        by_code.setdefault(canonical_code(code) if code is not None else data_stem(path.name), path)
    names = {}
    for code in codes:
        path = by_code.get(code)
        name = name_in_file(path) if path is not None else ""
        if name:
            names[code] = name
        elif not names and path is not None:  # the first file has no name column: none has
            return {}
    return names


def name_in_file(path: Path) -> str:
    """The last non-empty value of a name column of a data file ("" without one)."""
    from forecaster.data import DataError
    from forecaster.data.sources import read_table

    try:
        raw = read_table(path).raw
    except (DataError, OSError, ValueError):
        return ""
    column = next((c for c in raw.columns if c.strip().lower() in NAME_COLUMNS), None)
    if column is None:
        return ""
    values = [v.strip() for v in raw[column].astype(str) if v.strip()]
    return values[-1] if values else ""
