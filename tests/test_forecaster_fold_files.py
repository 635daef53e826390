"""Fold files hold data and cannot run code (issue 78): JSON, Parquet and npz, never a pickle;
a forged one gives one ResumeError line, never a crash, a traceback or a memory bomb."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import pickle
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from forecaster.evaluation.assembly import fold_part
from forecaster.evaluation.fold_store import FoldOutput, FoldStore, ResumeError, code_fingerprint
from forecaster.models.panel.network import PanelNetConfig
from seq2seq.core import atomic_write
from seq2seq.core.outputs import check_output

DAYS = pd.bdate_range("2021-01-04", periods=4)


def _state():
    """A panel Transformer's warm state as ``warm_state`` makes it, with every kind of value."""
    w = torch.tensor([1.5, -0.0, float("nan"), 3e-39], dtype=torch.float32)  # -0, NaN, a subnormal
    return {"features": ("ret_1d", "vol_20d"), "net_config": PanelNetConfig(n_features=2, d_model=8),
            "nets": [{"w": w.reshape(2, 2), "h": torch.tensor([1.0, 2.0 ** -9, -7.5], dtype=torch.bfloat16),
                      "steps": torch.arange(3, dtype=torch.int64), "mask": torch.tensor([True, False]),
                      "scalar": torch.tensor(0.25)}],
            "blend": {"features": ("a",), "nets": [], "blend": None, "lr": 0.001, 7: [1, None]}}


def _output(fold=3):
    rows = [fold_part(np.repeat(DAYS.values, 2), np.array(["SZ000001", "SH600000"] * 4, dtype=object),
                      "transformer", fold, np.linspace(-1, 1, 8)),
            fold_part(DAYS.values, np.array(["SH600000"] * 4, dtype=object), "low_vol_20d", fold,
                      np.array([0.1, np.nan, -0.3, 1e300]))]
    return FoldOutput(fold, rows, skipped={(fold, "thin"): "too little data: 3 days"},
                      failed={(fold, "bug"): "ValueError: x (at a.py:1 in f)"},
                      excluded={(fold, "ar"): ["SZ000002"]}, seconds={(fold, "transformer"): 1.25},
                      states={"transformer": _state()}, peak_gb=2.5)


def _bits(t: torch.Tensor) -> bytes:
    return t.contiguous().view(torch.uint8).numpy().tobytes() if t.dim() else t.reshape(1).view(
        torch.uint8).numpy().tobytes()


def _same(a, b):
    """``a`` and ``b`` equal, tensors bit for bit with their dtypes, tuples as tuples."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and _bits(a) == _bits(b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        assert a == b


def _store(tmp_path) -> FoldStore:
    store = FoldStore(check_output(tmp_path / "rep").claim() / "folds", {"data": "x", "run": {}})
    store.start(resume=False)
    return store


def test_a_fold_round_trips_bit_for_bit_in_json_parquet_and_npz(tmp_path):
    store, out = _store(tmp_path), _output()
    assert store.save(out) == store.folder / "fold_0003.json"
    assert sorted(p.name for p in store.folder.iterdir()) == [
        "fold_0003.json", "fold_0003.npz", "fold_0003.parquet", "run.json"]
    meta = json.loads((store.folder / "fold_0003.json").read_text())
    assert [t["dtype"] for t in meta["tensors"]] == ["float32", "bfloat16", "int64", "bool", "float32"]
    assert meta["parts"] == [{"rows": 8, "unit": DAYS.unit}, {"rows": 4, "unit": DAYS.unit}]
    assert pq.read_table(store.folder / "fold_0003.parquet").num_rows == 12
    back = store.start(resume=True)[3]
    assert len(back.rows) == 2
    for a, b in zip(out.rows, back.rows, strict=True):
        pd.testing.assert_frame_equal(a, b)
        assert a["forecast"].to_numpy().tobytes() == b["forecast"].to_numpy().tobytes()
    for name in ("skipped", "failed", "excluded", "seconds"):
        assert getattr(back, name) == getattr(out, name), name
    assert back.peak_gb == 2.5 and back.fold == 3
    _same(out.states, back.states)
    assert back.states["transformer"]["net_config"] == PanelNetConfig(n_features=2, d_model=8)


def test_a_resume_never_unpickles(tmp_path, monkeypatch):
    store = _store(tmp_path)
    store.save(_output(0))
    store.save(_output(1))

    def refuse(*args, **kwargs):
        raise AssertionError("a resume unpickled")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    monkeypatch.setattr(pickle._Unpickler, "load", refuse)
    assert sorted(store.start(resume=True)) == [0, 1]


def _forge(store: FoldStore, fold: int = 3, edit=None, parquet: bytes | None = None,
           npz: bytes | None = None):
    """Replace fold ``fold``'s files as a forger would: through the manifest (so their digests
    are recorded) and with the JSON's own SHA-256 of its companions updated."""
    path = store.folder / f"fold_{fold:04d}.json"
    meta = json.loads(path.read_text())
    for ext, data in (("parquet", parquet), ("npz", npz)):
        if data is not None:
            with atomic_write(store.folder / f"fold_{fold:04d}.{ext}") as f:
                f.write(data)
            meta["sha256"][ext] = hashlib.sha256(data).hexdigest()
    if edit is not None:
        edit(meta)
    with atomic_write(path, "w") as f:
        json.dump(meta, f)


def _refused(store: FoldStore, *expected: str) -> str:
    with pytest.raises(ResumeError) as info:
        store.start(resume=True)
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"cannot resume the run in {store.folder}: fold_0003.")
    for part in expected:
        assert part in text, text
    return text


def _set(path: tuple, value):
    def edit(meta):
        target = meta
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


@pytest.mark.parametrize("edit, expected", [
    (_set(("tensors", 0, "dtype"), "complex32"), "tensors[0] has dtype 'complex32', not one of float32"),
    (_set(("tensors", 0, "dtype"), "Tensor"), "tensors[0] has dtype 'Tensor'"),  # getattr(torch, ...) once
    (_set(("tensors", 0, "dtype"), ["float32"]), "tensors[0] has dtype \"['float32']\""),
    (_set(("tensors", 0, "shape"), [10 ** 12, 10 ** 6]), "fewer than the"),  # a huge declared shape
    (_set(("tensors", 1, "shape"), [2]), "t1.npy holds int16 [3], not the bfloat16 [2]"),
    (_set(("parts",), [42]), "parts is not a list of"),  # rows = [42]
    (_set(("parts", 0, "rows"), 10 ** 9), "too few for the 1000000004 rows"),  # rows declared past the file
    (_set(("fold",), "3"), "holds fold '3', not fold 3"),
    (_set(("peak_gb",), "big"), "peak_gb is 'big'"),
    (_set(("skipped",), [[3, 5, "x"]]), "skipped entry [3, 5, 'x'] is not [3, name, str]"),
    (_set(("seconds",), [[3, "m", "1"]]), "seconds entry"),
    (_set(("failed",), {"(3, 'x')": "y"}), "failed is a dict"),
    (_set(("states",), {"os.system": ["echo hi"]}), "states hold a 'os.system' value"),
    (_set(("states",), [1, 2]), "not a tagged value"),
    (_set(("states", "dict", 0, 1, "dict", 1, 1), {"PanelNetConfig": {"n_features": "x"}}),
     "PanelNetConfig whose n_features is 'x', not int"),
    (_set(("states", "dict", 0, 1, "dict", 1, 1), {"PanelNetConfig": {"n_features": 2, "positional": "abs"}}),
     "an invalid PanelNetConfig (positional must be one of"),
    (_set(("states", "dict", 0, 1, "dict", 0, 1), {"tensor": 0}), "not one of the 5 it declares, once"),
    (_set(("version",), 2), "format version 2; this version reads 1"),
    (_set(("extra",), 1), "has fields"),
])
def test_a_forged_fold_json_is_one_resume_error_line(tmp_path, edit, expected):
    store = _store(tmp_path)
    store.save(_output())
    _forge(store, edit=edit)
    _refused(store, expected)


def test_deep_nesting_and_an_oversized_json_are_refused(tmp_path, monkeypatch):
    import forecaster.evaluation.fold_files as fold_files

    store = _store(tmp_path)
    store.save(_output())
    deep = None
    for _ in range(200):
        deep = {"list": [deep]}
    _forge(store, edit=_set(("states", "dict", 0, 1), deep))
    _refused(store, "states nest deeper than 32 levels")
    deeper = "[" * 100_000 + "]" * 100_000  # past the JSON parser's recursion limit
    with atomic_write(store.folder / "fold_0003.json", "w") as f:
        f.write(deeper)
    _refused(store, "fold_0003.json: is not JSON")
    monkeypatch.setattr(fold_files, "MAX_JSON_BYTES", 100)
    _refused(store, "more than a fold's metadata ever holds (100)")


def test_an_npz_with_an_object_array_or_compressed_members_is_refused_unread(tmp_path):
    store = _store(tmp_path)
    store.save(_output())
    buf = io.BytesIO()
    np.savez(buf, t0=np.array([{"a": 1}, None, 3, 4], dtype=object).reshape(2, 2))  # a pickle inside
    _forge(store, npz=buf.getvalue())
    _refused(store, "fold_0003.npz: holds", "not t0.npy .. t4.npy")
    arrays = {f"t{i}": np.zeros(1) for i in range(5)}
    arrays["t0"] = np.array([{"a": 1}, None, 3, 4], dtype=object).reshape(2, 2)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    _forge(store, npz=buf.getvalue())
    _refused(store, "t0.npy holds object [2, 2], not the float32 [2, 2]")
    buf = io.BytesIO()
    np.savez_compressed(buf, **{f"t{i}": np.zeros(10 ** 5) for i in range(5)})  # a zip bomb's shape
    _forge(store, npz=buf.getvalue(), edit=_set(("tensors",), [{"dtype": "float64", "shape": [1]}] * 5))
    _refused(store, "t0.npy is compressed")


def _parquet(table: pa.Table, **kwargs) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **kwargs)
    return sink.getvalue()


def test_a_parquet_with_other_columns_or_encodings_is_refused(tmp_path):
    store = _store(tmp_path)
    store.save(_output())
    n = 12
    good = pq.read_table(store.folder / "fold_0003.parquet")
    wrong = pa.table({"date": good["date"], "code": good["code"], "score": good["forecast"]})
    _forge(store, parquet=_parquet(wrong, compression="none"))
    _refused(store, "fold_0003.parquet: has columns ['date', 'code', 'score']")
    typed = good.set_column(4, "forecast", pa.array(["x"] * n))
    _forge(store, parquet=_parquet(typed, compression="none"))
    _refused(store, "has column types", "string, not timestamp[ns], string, string, int32, double")
    _forge(store, parquet=_parquet(good, compression="zstd"))
    _refused(store, "column date is ZSTD")
    _forge(store, parquet=b"PAR1 not a parquet file PAR1" * 20)
    _refused(store, "fold_0003.parquet: cannot be read")
    other = good.set_column(3, "fold", pa.array(np.full(n, 9, np.int32)))
    _forge(store, parquet=_parquet(other, compression="none", use_dictionary=["code", "model"]))
    _refused(store, "holds rows of fold 9 in fold 3's file")


def test_a_swapped_file_is_refused_by_the_manifest_and_outside_one_by_the_json(tmp_path):
    store = _store(tmp_path)
    store.save(_output())
    victim = store.folder / "fold_0003.parquet"
    victim.write_bytes(victim.read_bytes() + b" ")  # not through the manifest
    _refused(store, "fold_0003.parquet is not the file the run wrote")
    loose = FoldStore(tmp_path / "api", {"data": "x", "run": {}})  # no claimed folder, no manifest
    loose.start(resume=False)
    loose.save(_output(3))
    loose.save(_output(4))
    shutil.copy(loose.folder / "fold_0004.parquet", loose.folder / "fold_0003.parquet")
    _refused(loose, "fold_0003.parquet: is not the file fold_0003.json was written with")


def test_pickled_fold_files_of_an_earlier_version_are_refused_on_resume(tmp_path):
    store = _store(tmp_path)
    (store.folder / "fold_0000.pkl").write_bytes(pickle.dumps({"rows": [42]}))
    with pytest.raises(ResumeError) as info:
        store.start(resume=True)
    assert str(info.value) == (
        f"cannot resume the run in {store.folder}: 1 fold file(s) (fold_0000.pkl, ...) were written by an "
        "earlier version of forecaster, in a format no longer read (a pickle); run without --resume to "
        "start afresh")
    store.start(resume=False)  # a fresh run removes them
    assert not (store.folder / "fold_0000.pkl").exists()


def test_an_unfinished_folds_files_are_counted_and_the_fold_runs_again(tmp_path, caplog):
    store = _store(tmp_path)
    store.save(_output(0))
    store.save(_output(1))
    (store.folder / "fold_0001.json").unlink()  # killed before its JSON: unfinished
    with caplog.at_level(logging.WARNING, logger="forecaster.evaluation.fold_store"):
        done = store.start(resume=True)
    assert sorted(done) == [0]
    assert "2 file(s) of folds that did not finish (no fold_NNNN.json), such as fold_0001.npz" in caplog.text


def test_save_refuses_a_value_no_fold_file_holds_before_writing(tmp_path):
    store = _store(tmp_path)
    out = _output()
    out.states["transformer"]["nets"][0]["c"] = torch.zeros(2, dtype=torch.complex64)
    with pytest.raises(TypeError, match=r"warm state states.transformer.nets\[0\].c: a torch.complex64"):
        store.save(out)
    out = _output()
    out.rows = [42]
    with pytest.raises(TypeError, match=r"fold 3 rows\[0\]: not a frame of code, model, fold, forecast"):
        store.save(out)
    assert sorted(p.name for p in store.folder.iterdir()) == ["run.json"]


def test_the_code_fingerprint_covers_seq2seq_core(tmp_path, monkeypatch):
    import seq2seq.core

    source, prints = Path(seq2seq.core.__file__).parent, {}
    for name in ("copy", "same", "changed"):
        shutil.copytree(source, tmp_path / name / "core", ignore=shutil.ignore_patterns("__pycache__"))
    masks = tmp_path / "changed" / "core" / "masks.py"
    masks.write_text(masks.read_text() + "\n# changed\n")
    for name in ("copy", "same", "changed"):
        monkeypatch.setattr(seq2seq.core, "__file__", str(tmp_path / name / "core" / "__init__.py"))
        prints[name] = code_fingerprint()
    assert prints["same"] == prints["copy"]  # the same source elsewhere: the same code
    assert prints["changed"]["source"] != prints["copy"]["source"]
