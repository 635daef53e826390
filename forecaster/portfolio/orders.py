"""Tomorrow's orders: what to buy and sell at the next open, given what is held.

:func:`next_day_orders` turns a model's scores for the next trading day and a book (shares
held, cash) into orders by the backtest's own code: the strategy rule decides the target
weights (:func:`~forecaster.portfolio.strategy.target_weights`; for top-k dropout the names
held now are the book's), and :func:`~forecaster.portfolio.backtest.trade_towards` sizes
them in whole lots, sells before buys, and blocks what the exchange would refuse (a buy at
limit-up, a sell at limit-down, anything on a suspended stock) -- so the orders are the trades
the backtest would make on that day from that book. Everything held before the day is
sellable (T+1 binds only on shares bought the same day, which an order list never sells).

Prices of the next open are unknown when the orders are made: :func:`book_orders_for_panel`
takes the signal day's close as the next day's previous close, so each order carries the next
day's limit-up and limit-down prices (board and ST rules as in the backtest). A stock that
closed at limit-up on the signal day is likely to open there, where buys queue unfilled, and one
that closed at limit-down likewise for sells: such orders are ``blocked`` ("likely to open at
the limit; would queue"), or, with ``at_limit="limit_order"``, placed as limit orders at the
limit price (status ``limit_order``: they may not fill, and their reference price is that limit
price). Every other order is sized at its reference price, the signal day's close; a stock
without a bar or suspended on the signal day counts as suspended. Orders are estimates; the
open decides the fills. A stock whose delisting is known on the signal day (a ``退`` name, or
delisted: :meth:`~forecaster.data.panel.Panel.delistings`) is not bought, and one held is sold
(as the backtest does); the reason says so. An ST stock on the signal day is not bought under
the strategy's ``exclude_st`` (the one ST rule: :func:`~forecaster.portfolio.strategy.st_no_buy`):
the rule picks no new one, a holding that became ST is kept while still wanted but never added to
(a blocked ``buy``, reason "ST (special treatment) on the signal day: not bought"), and
``attrs["st_skipped"]`` names the ST stocks the rule would have bought but for the mark.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.checks import check_choice
from forecaster.data.market.calendar import next_trading_day
from forecaster.data.market.exchange import canonical_code, limit_matrix
from forecaster.data.panel import Panel
from forecaster.portfolio.backtest import BacktestConfig, trade_towards
from forecaster.portfolio.broker import Broker
from forecaster.portfolio.next_day import delisting_reasons
from forecaster.portfolio.policy import Holding, enhanced_target
from forecaster.portfolio.strategy import ST_BLOCK, ST_REASON, st_no_buy, weights_for_book

ORDER_COLUMNS = ("code", "side", "shares", "requested", "reference_price", "value", "est_costs",
                 "status", "reason", "score", "rank", "held_before", "held_after")
# What book_orders_for_panel adds: the day whose close the scores used, the trading day the
# orders are for, and that day's limits.
NEXT_DAY_COLUMNS = ("signal_date", "trade_date", "limit_up", "limit_down")
AT_LIMIT = ("block", "limit_order")


class HoldingsError(ValueError):
    """A bad holdings file: names the file, row and column."""


@dataclass
class Book:
    """What is held: ``shares`` ``{code: shares}`` and ``cash`` (CNY)."""

    shares: dict[str, int]
    cash: float


def read_holdings(path, codes, capital: float | None = None) -> Book:
    """A holdings CSV (columns ``code``, ``shares``; a row ``cash,AMOUNT`` gives the cash,
    otherwise ``capital``), UTF-8 (with or without a BOM) or GBK. Codes are read in any common
    spelling (``600000.SH``, ``sh600000``); each must be one of ``codes`` (the panel's stocks)."""
    import io
    from pathlib import Path

    from forecaster.data.sources import MAX_FILE_MB, DataError, decode_text, too_large

    try:
        if not Path(path).is_file():
            raise HoldingsError(f"{path}: no such file (a holdings CSV code,shares)")
        reason = too_large(Path(path), MAX_FILE_MB)
        if reason:
            raise HoldingsError(f"{path}: {reason}")
        table = pd.read_csv(io.StringIO(decode_text(Path(path).read_bytes(), str(path))), dtype=str,
                            keep_default_na=False)
    except DataError as exc:
        raise HoldingsError(str(exc)) from None
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise HoldingsError(f"{path}: cannot read holdings ({why})") from None
    table.columns = [c.strip().lower() for c in table.columns]
    missing = [c for c in ("code", "shares") if c not in table.columns]
    if missing:
        raise HoldingsError(f"{path}: holdings need columns code, shares; missing {missing}")
    known, shares, cash = set(codes), {}, None
    for line, (raw_code, raw_shares) in enumerate(zip(table["code"], table["shares"], strict=True), 2):
        code = raw_code.strip()
        try:
            value = float(raw_shares)
        except ValueError:
            value = float("nan")
        if code.lower() == "cash":
            if not np.isfinite(value) or value < 0:
                raise HoldingsError(f"{path}: line {line}: cash {raw_shares!r}: expected an amount >= 0")
            cash = value
            continue
        if not np.isfinite(value) or value < 0 or value != int(value):
            raise HoldingsError(f"{path}: line {line}, column shares: {raw_shares!r}: expected a whole "
                                "number of shares >= 0")
        canon = canonical_code(code)  # any common spelling; unknown spellings come back as given
        if canon not in known:
            raise HoldingsError(f"{path}: line {line}, column code: {code!r} is not a stock of the data")
        if canon in shares:
            raise HoldingsError(f"{path}: line {line}: {canon} listed twice")
        shares[canon] = int(value)
    if cash is None:
        if capital is None:
            raise HoldingsError(f"{path}: no cash given: add a row 'cash,AMOUNT' or pass --capital")
        cash = float(capital)
    return Book(shares, cash)


def next_day_orders(scores: pd.Series, book: Book, config: BacktestConfig, *, date, price, value_price,
                    up, down, suspended, signal_date=None, reasons: dict | None = None,
                    members=None, no_buy=None, target=None) -> pd.DataFrame:
    """Orders for one trading day from ``book``, by the backtest's rules.

    Args:
        scores: ``[stocks]`` the model's scores for ``date``, indexed by code (the order of
            the stocks of every other array).
        reasons: ``{broker reason: text}`` replacing the default wording of blocked orders.
        book: the shares held before ``date`` and the cash.
        config: the strategy, costs and market rules (as the backtest's).
        date: the trading day (stamp duty regime).
        price, value_price, up, down, suspended: ``[stocks]`` execution price, price valuing
            the book, limit prices and suspension on ``date``.
        members: ``[stocks]`` bool, the universe (an index's members); ``None``: every stock.
            A non-member is not bought, and one held is sold.
        no_buy: ``[stocks]`` bool, the ST rule's mask (:func:`~forecaster.portfolio.strategy.st_no_buy`):
            not bought, a holding kept but not added to; ``None``: none.
        target: ``[stocks]`` the target weights when decided elsewhere (the enhanced book,
            :func:`~forecaster.portfolio.policy.enhanced_target`); ``None``: by the rule.

    Returns:
        One row per stock with an order, a blocked wish or a position (``ORDER_COLUMNS``):
        side ``buy``/``sell``/``hold``, ``shares`` the order in shares (whole lots for buys),
        ``status`` ``order``/``partial``/``blocked``/``hold``, ``reason``, and the estimated
        value and costs at the reference price; ``attrs["st_skipped"]``: the codes ``no_buy``
        kept out that the rule would have bought.
    """
    codes = [str(c) for c in scores.index]
    f = scores.to_numpy(dtype=float)
    before = np.array([book.shares.get(c, 0) for c in codes], dtype=np.int64)
    strategy = config.strategy
    w = weights_for_book(f, before > 0, strategy, members, no_buy) if target is None else np.asarray(target)
    skipped = []
    if no_buy is not None and np.any(no_buy) and target is None:  # what the rule wanted but for ST
        free = weights_for_book(f, before > 0, strategy, members)
        kept_out = (free > 0) & (w == 0) & np.asarray(no_buy, bool) & (before <= 0)
        skipped = [codes[i] for i in np.flatnonzero(kept_out)]
    broker = Broker(codes, book.cash, config.costs, config.market.lot_size,
                    allow_short=strategy.mode == "long_short")
    broker.shares[:] = before
    date = pd.Timestamp(date)
    trade_towards(broker, date, w, np.asarray(price, float), np.asarray(value_price, float),
                  np.asarray(up, float), np.asarray(down, float), np.asarray(suspended, bool), config,
                  True, config.rebalance_tolerance, pd.Timestamp(signal_date or date),
                  None if no_buy is None else np.asarray(no_buy, bool))
    trades = broker.trades_frame()
    rank = pd.Series(f, index=codes).rank(ascending=False, method="first")
    rows = []
    for t in trades.itertuples():
        i = codes.index(t.code)
        shares = t.requested if t.status == "blocked" else t.shares
        costs = t.commission + t.stamp_duty + t.transfer_fee + t.slippage_cost
        status = {"filled": "order", "partial": "partial"}.get(t.status, "blocked")
        why = _reason(t.side, t.reason, status, w[i], before[i], reasons)
        rows.append((t.code, t.side, int(shares), int(t.requested), float(price[i]), shares * float(price[i]),
                     costs, status, why, f[i], rank.iloc[i], int(before[i]), int(broker.shares[i])))
    traded = set(trades["code"])
    for i in np.flatnonzero((before != 0) & ~np.isin(codes, list(traded))):
        rows.append((codes[i], "hold", 0, 0, float(price[i]), 0.0, 0.0, "hold",
                     "kept: still wanted at about its target", f[i], rank.iloc[i], int(before[i]),
                     int(before[i])))
    table = pd.DataFrame(rows, columns=list(ORDER_COLUMNS))
    side_order = table["side"].map({"sell": 0, "buy": 1, "hold": 2})
    table = table.assign(_s=side_order).sort_values(["_s", "rank", "code"], kind="stable")
    table = table.drop(columns="_s").reset_index(drop=True)
    table["rank"] = table["rank"].astype("Int64")
    table = table.round({"value": 2, "est_costs": 2, "score": 6})
    table.attrs["st_skipped"] = skipped
    return table


_BLOCKED = {"limit_up": "at limit-up: a buy would queue unfilled", "limit_down": "at limit-down: a sell "
            "would queue unfilled", "suspended": "suspended (or no bar on the signal day)",
            "no_data": "no price", "lot_size": "target worth less than one lot",
            "cash": "not enough cash", "t_plus_1": "bought today (T+1)", "no_position": "nothing held",
            ST_BLOCK: f"{ST_REASON} on the signal day: not bought"}


def _reason(side: str, broker_reason: str, status: str, weight: float, held: int,
            reasons: dict | None = None) -> str:
    if status != "order":
        return {**_BLOCKED, **(reasons or {})}.get(broker_reason, broker_reason)
    if side == "buy":
        return "enters the book" if held == 0 else "resized up to target"
    return "leaves the book" if weight == 0 else "resized down to target"


def book_orders_for_panel(scores: pd.Series, panel: Panel, book: Book, config: BacktestConfig,
                          at_limit: str = "block", trade_date=None, recent: np.ndarray | None = None,
                          next_members: np.ndarray | None = None) -> pd.DataFrame:
    """:func:`next_day_orders` for the trading day after ``panel``'s last day (see the module
    docstring); ``scores`` indexed by the panel's codes.

    Args:
        at_limit: a buy of a stock that closed at limit-up on the signal day (a sell of one
            that closed at limit-down): ``"block"`` (status ``blocked``) or ``"limit_order"``
            (status ``limit_order``, at the limit price).
        trade_date: the day the orders are for (default: the exchange's next trading day after
            the signal day, :func:`~forecaster.data.market.calendar.next_trading_day`); its
            stamp-duty regime and limit rules apply.
        recent: ``[rows, stocks]`` the forecast rows before ``scores``' (the panel's stocks'
            order), read by the enhanced book's alpha at the holding horizon
            (:func:`~forecaster.portfolio.alpha.holding_scores`); None: ``scores`` alone.
        next_members: ``[stocks]`` the index's members on the trade day where a review is
            known (the enhanced book's benchmark and members are those of that day); None: the
            signal day's.

    Returns:
        ``ORDER_COLUMNS`` plus ``NEXT_DAY_COLUMNS``: the signal day, the trade date and each
        stock's limit prices on the trade date.
    """
    check_choice("at_limit", at_limit, AT_LIMIT)
    last = panel.n_days - 1
    close = pd.DataFrame(panel["close"]).ffill().to_numpy()[last]
    listed, suspended = panel.listed[last], panel.suspended[last]
    next_day = pd.Timestamp(next_trading_day(panel.dates[-1]).date if trade_date is None else trade_date)
    up, down = limit_matrix(list(panel.codes), pd.DatetimeIndex([next_day]), close[None],
                            panel.st[last][None])
    up, down = up[0], down[0]
    closed_up = panel.at_limit_up("close")[last] & ~suspended
    closed_down = panel.at_limit_down("close")[last] & ~suspended
    # Every order is sized at the reference price, the signal day's close (the next day's limit
    # prices stay in their own columns). A stock that closed at a limit most likely opens at the
    # next day's limit, where a buy (a sell) queues: blocked by placing the broker's limit at
    # that close, unless it is to go out as a limit order.
    # A buy placed as a limit order is sized at its limit price (what it would pay).
    price = close
    broker_up, broker_down = up, down
    if at_limit == "block":
        broker_up = np.where(closed_up, close, up)
        broker_down = np.where(closed_down, close, down)
    else:  # just beyond the limit, so the order goes through and its fill is capped there
        price = np.where(closed_up, up, close)
        broker_up = np.where(closed_up, up + 2e-9, up)
    gone = delisting_reasons(panel)  # known to delist: neither bought nor kept
    members = None if panel.members is None else np.asarray(panel.members[last], dtype=bool)
    if (gone != "").any():
        members = (np.ones(panel.n_stocks, dtype=bool) if members is None else members) & (gone == "")
    no_buy = st_no_buy(panel.st[last], config.strategy)
    target, enhanced = None, None
    if config.strategy.rule == "enhanced":  # the optimised book: its own target, by the same orders
        held = np.array([book.shares.get(str(c), 0) for c in panel.codes], dtype=float) * np.nan_to_num(close)
        nav = held.sum() + book.cash
        target, enhanced = enhanced_target(panel, scores.reindex(panel.codes).to_numpy(dtype=float),
                                           Holding(held / nav if nav > 0 else held, nav), config, gone == "",
                                           no_buy, date=next_day, recent=recent, next_members=next_members)
        bench = enhanced.pop("bench")  # enhanced["industries"]: (group, book, benchmark) tuples
        # (code, target, benchmark) of every name in either: plain tuples, as attrs are compared
        enhanced = {**enhanced, "weights": [(str(c), float(t), float(b)) for c, t, b in
                                            zip(panel.codes, target, bench, strict=True) if t > 0 or b > 0]}
    table = next_day_orders(scores.reindex(panel.codes), book, config, date=next_day, price=price,
                            value_price=np.nan_to_num(close), up=broker_up, down=broker_down,
                            suspended=suspended | ~listed, signal_date=panel.dates[-1],
                            reasons=_AT_LIMIT_REASONS, members=members, no_buy=no_buy, target=target)
    skipped = table.attrs.get("st_skipped", [])
    where = pd.Index(panel.codes).get_indexer(table["code"])
    at_limit_rows = (((table["side"] == "buy") & closed_up[where]) | ((table["side"] == "sell")
                                                                      & closed_down[where]))
    placed = at_limit_rows & table["status"].isin(["order", "partial"]).to_numpy()
    table.loc[placed, "status"] = "limit_order"
    sells = placed & (table["side"] == "sell").to_numpy()  # a limit sell goes out at limit-down
    table.loc[sells, "reference_price"] = down[where][sells]
    table.loc[sells, "value"] = (table.loc[sells, "shares"] * table.loc[sells, "reference_price"]).round(2)
    table.loc[placed, "reason"] = np.where(
        table.loc[placed, "side"] == "buy",
        "closed at limit-up on the signal day: likely to open at the limit; a limit order there may queue "
        "unfilled", "closed at limit-down on the signal day: likely to open at the limit; a limit order "
        "there may queue unfilled")
    why = gone[where]
    hit = why != ""
    table.loc[hit, "reason"] = [f"{w}; {r}" for w, r in zip(why[hit], table.loc[hit, "reason"], strict=True)]
    table.insert(0, "signal_date", panel.dates[-1].date())
    table.insert(1, "trade_date", next_day.date())
    table["limit_up"] = up[where]
    table["limit_down"] = down[where]
    table.attrs["st_skipped"] = skipped
    if enhanced is not None:
        table.attrs["enhanced"] = enhanced  # the book's predicted tracking error and how it was solved
    return table


_AT_LIMIT_REASONS = {
    "limit_up": "closed at limit-up on the signal day: likely to open at the limit; would queue",
    "limit_down": "closed at limit-down on the signal day: likely to open at the limit; would queue"}
