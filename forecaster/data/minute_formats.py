"""The text around a minute export's rows: 通达信 (TDX) exports open with a title line
(``000665 湖北广电 5分钟线 不复权``: code, name, bar length, adjustment), put a tab-separated
header over comma-separated rows and end with a footer (``数据来源:通达信``).
:func:`prepare_text` turns such a file into a plain CSV whose rows keep their line numbers in
the file (the header's line is returned), and reads the adjustment off the title.
"""

from __future__ import annotations

from dataclasses import dataclass

# TDX's title names the adjustment of the prices it exports.
TDX_ADJUSTMENTS = {"不复权": "unadjusted", "前复权": "forward-adjusted", "后复权": "backward-adjusted"}
FOOTER_MARK = "数据来源"


@dataclass(frozen=True)
class Prepared:
    """A file's text ready for ``pandas.read_csv``.

    Attributes:
        text: the CSV text (a TDX file without its title line and footer, the header and rows
            comma-separated).
        header_line: the header's line in the file (1-based; 2 under a TDX title line).
        tdx: the file is a TDX export; title: its title line; adjustment: what the title says
            of the prices (``"unadjusted"``...), ``""`` where it says nothing.
        footer: the footer line dropped (``""`` without one).
    """

    text: str
    header_line: int = 1
    tdx: bool = False
    title: str = ""
    adjustment: str = ""
    footer: str = ""


def _lines_at_start(text: str, n: int) -> list[str]:
    out, start = [], 0
    for _ in range(n):
        end = text.find("\n", start)
        out.append(text[start:] if end < 0 else text[start:end])
        if end < 0:
            break
        start = end + 1
    return [line.rstrip("\r") for line in out]


def prepare_text(text: str) -> Prepared:
    """The text of a TDX export as a plain CSV (see the module docstring); any other text as
    it is. Only the first three lines and the last are looked at unless the file is TDX's."""
    head = _lines_at_start(text, 3)
    if len(head) < 3:
        return Prepared(text)
    title, header, row = head
    delimited = ("," in header or "\t" in header) and ("," in row or "\t" in row)
    if "," in title or "\t" in title or not title.strip() or not delimited:
        return Prepared(text)
    lines = text.splitlines()
    footer = ""
    while lines and not lines[-1].strip():
        lines.pop()
    if lines and FOOTER_MARK in lines[-1] and "," not in lines[-1]:
        footer = lines.pop().strip()
    names = [name.strip() for name in header.replace("\t", ",").split(",")]
    rows = lines[2:]
    if "," not in row:  # tab-separated rows too
        rows = [",".join(cell.strip() for cell in line.split("\t")) for line in rows]
    adjustment = next((v for k, v in TDX_ADJUSTMENTS.items() if k in title), "")
    body = "\n".join([",".join(n for n in names if n), *rows]) + "\n"
    return Prepared(body, header_line=2, tdx=True, title=title.strip(), adjustment=adjustment, footer=footer)
