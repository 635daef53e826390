"""Facts of the market: codes, boards and price limits (``exchange``), the exchange's trading
calendar (``calendar``: the next trading day, holidays included), and point-in-time
universes, index membership lists and their ``[days, stocks]`` mask (``universe``), the known
indices by name and the checks of a membership list (``indices``)."""
