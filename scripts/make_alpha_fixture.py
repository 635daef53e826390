"""Regenerate the stored fixture of Qlib's own Alpha158 / Alpha360 values that
``tests/test_forecaster_alpha.py`` checks :mod:`forecaster.features.alpha` against.

Runs in a Python with ``pyqlib`` (not a dependency of this project)::

    python3 -m venv /tmp/qlibvenv && /tmp/qlibvenv/bin/pip install -c constraints.txt pyqlib==0.9.7
    /tmp/qlibvenv/bin/pip install 'protobuf<4'   # mlflow 1.27, which qlib imports, needs it
    /tmp/qlibvenv/bin/python scripts/make_alpha_fixture.py

It initialises Qlib on ``../shared/data/cn_qlib`` and computes the raw features (no processor)
with ``qlib.data.D.features`` from the expressions of ``Alpha158DL`` (the ``Alpha158`` handler's
configuration) and ``Alpha360DL``, for four stocks over 2020-06-15..2020-12-04: SH600000 (an
ex-date on 2020-07-23), SH600068 (no bars 2020-10-14..27, an ex-date on 2020-08-07), SH600109
(zero-volume bars 2020-09-21..10-12) and SH600317 (no bars 2020-06-22..07-07). Writes

* ``tests/data/qlib_alpha_features.csv.gz``: ``instrument, datetime`` and every Alpha158 column,
  plus the Alpha360 columns of days ``ALPHA360_DAYS`` (the others are the same operator, ``Ref``,
  at other lags), on every other day of the span (the file stays small), 6 significant digits;
* ``tests/data/qlib_alpha_expressions.tsv.gz``: ``name<TAB>expression`` of all 158 + 360 columns.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STOCKS = ["SH600000", "SH600068", "SH600109", "SH600317"]
START, END = "2020-06-15", "2020-12-04"
ALPHA360_DAYS = (0, 1, 2, 5, 10, 20, 30, 59)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(REPO.parent / "shared/data/cn_qlib"))
    p.add_argument("--out", default=str(REPO / "tests/data"))
    args = p.parse_args()

    import pandas as pd
    import qlib
    from qlib.contrib.data.handler import Alpha158
    from qlib.contrib.data.loader import Alpha158DL, Alpha360DL
    from qlib.data import D

    qlib.init(provider_uri=args.data, region="cn", kernels=1)
    fields158, names158 = Alpha158.get_feature_config(None)
    fields360, names360 = Alpha360DL.get_feature_config()
    assert (fields158, names158) == Alpha158DL.get_feature_config(
        {"kbar": {}, "price": {"windows": [0], "feature": ["OPEN", "HIGH", "LOW", "VWAP"]}, "rolling": {}})
    keep360 = [(f, n) for f, n in zip(fields360, names360, strict=True)
               if int(re.sub(r"^[A-Z]+", "", n)) in ALPHA360_DAYS and n not in names158]
    fields = fields158 + [f for f, _ in keep360]
    names = names158 + [n for _, n in keep360]
    frame = D.features(STOCKS, fields, START, END, freq="day")
    frame.columns = names
    days = frame.index.get_level_values("datetime").unique().sort_values()
    frame = frame[frame.index.get_level_values("datetime").isin(days[::2])]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frame.reset_index().to_csv(out / "qlib_alpha_features.csv.gz", index=False, float_format="%.6g",
                               compression={"method": "gzip", "mtime": 0})
    exprs = pd.DataFrame({"name": names158 + names360, "expression": fields158 + fields360})
    exprs.to_csv(out / "qlib_alpha_expressions.tsv.gz", sep="\t", index=False,
                 compression={"method": "gzip", "mtime": 0})
    sizes = [(out / f).stat().st_size for f in ("qlib_alpha_features.csv.gz",
                                                 "qlib_alpha_expressions.tsv.gz")]
    print(f"qlib version={qlib.__version__} rows={len(frame)} columns={len(names)} bytes={sizes}")


if __name__ == "__main__":
    main()
