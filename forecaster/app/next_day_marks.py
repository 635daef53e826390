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


def enhanced_lines_and_figure(orders: pd.DataFrame, source: str, path: Path, n: int = 5
                              ) -> tuple[list[str], Path | None]:
    """``predict --strategy enhanced``: what the console says of tomorrow's book (its predicted
    tracking error against the budget's benchmark, its largest active weights, named where the
    data carry names, the trades' estimated cost) and ``next_day_active.png`` at ``path``
    (tomorrow's target weights against the benchmark weights, drawn by
    :func:`~forecaster.reporting.index_figures.plot_next_day_active`). ``orders``: the orders
    table, its ``attrs["enhanced"]`` from :func:`~forecaster.portfolio.orders.book_orders_for_panel`;
    nothing (``[], None``) for another rule."""
    from forecaster.reporting.figures import CJK_FONT
    from forecaster.reporting.index_figures import plot_next_day_active

    e = orders.attrs.get("enhanced") or {}
    if not e.get("weights"):
        return [], None
    w = pd.DataFrame(e["weights"], columns=["code", "target", "benchmark"])
    w["active"] = w["target"] - w["benchmark"]
    top = w.reindex(w["active"].abs().sort_values(ascending=False).index).head(n)
    names = stock_names(source, list(w.reindex(w["active"].abs().sort_values(ascending=False).index)
                                     ["code"].head(24)))
    if CJK_FONT is None and any(not v.isascii() for v in names.values()):
        names = {}  # no font draws them; the codes alone
    w["label"] = [f"{c} {names[c]}" if c in names else c for c in w["code"]]
    live = orders[orders["status"].isin(["order", "partial", "limit_order"])]
    value = float(live["value"].abs().sum()) if "value" in live else float("nan")
    cost = float(live["est_costs"].sum())
    named = ", ".join(f"{c}{' ' + names[c] if c in names else ''} {a:+.2%}" for c, a in
                      zip(top["code"], top["active"], strict=True))
    lines = [f"enhanced book: predicted tracking error {e.get('predicted_te', float('nan')):.2%} against the "
             f"benchmark weights (styles {e.get('style_te', float('nan')):.2%}, specific "
             f"{e.get('specific_te', float('nan')):.2%}); {len(w[w['target'] > 0])} names held; largest "
             f"active weights: {named or 'none'}",
             f"trades' estimated cost {cost:,.0f} CNY on {value:,.0f} traded "
             f"({cost / value if value > 0 else 0.0:.3%} of the value traded)"]
    groups = sorted(e.get("industries") or [], key=lambda g: -abs(g[1] - g[2]))
    if groups:
        lines.append("industry weights (tomorrow's book vs the benchmark): " + ", ".join(
            f"{name} {book:.1%} vs {bench:.1%} ({book - bench:+.1%})" for name, book, bench in groups))
    te = e.get("predicted_te", float("nan"))
    drawn = plot_next_day_active(w, path, f"tomorrow's target weights against the benchmark weights "
                                          f"(predicted tracking error {te:.2%})")
    return lines, drawn
