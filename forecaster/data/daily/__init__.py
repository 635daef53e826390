"""Daily files: their layouts (``formats``), one file read into the canonical frame
(``loading``, its ``report``), a folder of them (``folders``), what they hold that cannot be
(``quality``) and the columnar cache (``cache``)."""
