"""Minute bars: their layouts and TDX's title and footer (``formats``), the session and the bar
frame (``session``), bars made trustworthy (``bars``: stamps, bar length, suspensions, volume
units), returns across the night (``returns``) and the daily features computed from bars
(``features``)."""
