"""From scores to trades: strategy rules (top-k, top-k dropout), costs and market settings,
the A-share backtest (T+1, price limits, suspensions, lots) and the next-day ranked list."""
