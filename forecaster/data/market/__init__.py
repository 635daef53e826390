"""Facts of the market: codes, boards and price limits (``exchange``), and point-in-time
universes, index membership lists and their ``[days, stocks]`` mask (``universe``)."""
