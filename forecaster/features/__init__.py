"""Features of a stock or a panel computed from prices: one stock's input series (log returns,
range, gap, volume and turnover changes), cross-sectional factors, the labels a strategy can
earn, processors fitted on the training rows only, and sliding windows."""
