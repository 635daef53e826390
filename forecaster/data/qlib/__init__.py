"""Qlib's binary data folders: read (``reader``), written (``writer``), and their conventions
(``conventions``: instrument names, fields, ``$change`` and ``$volume`` detected from the data)."""
