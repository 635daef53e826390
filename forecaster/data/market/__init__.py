"""Facts of the market: codes, boards and price limits (``exchange``), and point-in-time
universes, index membership lists and their ``[days, stocks]`` mask (``universe``), the known
indices by name and the checks of a membership list (``indices``)."""
