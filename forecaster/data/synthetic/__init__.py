"""Generated data (never market data): daily series and panels with a planted signal
(``daily``) and minute bars with planted effects (``minute``)."""
