"""A pickle from elsewhere cannot harm the tool (issue 78): each attack class the issue found
(memory corruption through a crafted dtype, memory and CPU bombs from tiny files, cells nested
or shared without bound, cells that are functions) is refused in one line, in seconds, by the
checked unpickler or the limited child process that reads ``score PRED.pkl``, never crashing
the process that asked."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from pandas.core.indexes.base import _new_Index
from test_forecaster_trust import _invoke

from forecaster.data import DataError
from forecaster.evaluation import pickle_sandbox
from forecaster.evaluation.external import read_external
from forecaster.evaluation.pickle_sandbox import load_plain_pickle
from forecaster.evaluation.safe_pickle import RefusedPickle, loads_restricted

try:
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy 1.x
    from numpy.core.multiarray import _reconstruct

DATA = Path(__file__).parent / "data"


class _Dtype:
    """Pickles as ``numpy.dtype(name)`` with the BUILD ``state`` given (numpy's own or crafted)."""

    def __init__(self, name, state):
        self.name, self.state = name, state

    def __reduce__(self):
        return (np.dtype, (self.name, False, True), self.state)


class _Array:
    """Pickles as numpy pickles an array, with the dtype and raw bytes given."""

    def __init__(self, dtype, data: bytes, shape):
        self.dtype, self.data, self.shape = dtype, data, shape

    def __reduce__(self):
        return (_reconstruct, (np.ndarray, (0,), b"b"), (1, self.shape, self.dtype, False, self.data))


# An object field laid over raw bytes (flags 0: numpy then takes the bytes as pointers, the
# SIGSEGV of `score X.pkl` at the first copy), and a field past the item's end.
_OBJECT_OVER_BYTES = _Array(_Dtype("V8", (3, "|", None, ("a",), {"a": (np.dtype("O"), 0)}, 8, 1, 0)),
                            b"\x41" * 16, (2,))
_OBJECT_DTYPE_WITH_FIELDS = _Array(_Dtype("O8", (3, "|", None, ("a",), {"a": (np.dtype("O"), 0)}, 8, 1, 0)),
                                   b"\x41" * 16, (2,))
_FIELD_PAST_THE_END = _Array(_Dtype("f8", (3, "<", None, None, None, 4096, 8, 0)), b"\x00" * 16, (2,))


class _Reduce:
    """Pickles as ``func(*args)``, a call pandas or pyarrow makes with arguments they never write."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)


def _arrow_past_its_buffers() -> _Reduce:
    """pyarrow's own pickle of two strings, with a length of 10**6 over the same buffers."""
    func, (data,) = pa.array(["ab", "cd"]).__reduce__()
    return _Reduce(func, (data[0], 10**6, *data[2:]))


def _unverified_multiindex() -> _Reduce:
    """A MultiIndex whose code 10**6 points past its one level, and asks not to be verified."""
    d = {"levels": [pd.Index(["a"])], "codes": [np.array([10**6])], "names": ["x"], "verify_integrity": False}
    return _Reduce(_new_Index, pd.MultiIndex, d)


def _frame(cell=0.5) -> pd.DataFrame:
    idx = pd.MultiIndex.from_product([pd.date_range("2021-01-04", periods=2, freq="B"), ["SH600000"]],
                                     names=["datetime", "instrument"])
    score = np.empty(2, dtype=object)
    score[:] = [cell, 0.25]
    return pd.DataFrame({"score": score}, index=idx)


def _deep_cell(depth: int) -> bytes:
    """A frame whose first score is a list nested ``depth`` deep, built by hand without marks
    (``pickle.dumps`` itself would recurse): ``depth`` empty lists, then ``depth - 1`` appends."""
    marker = "CELL-PLACEHOLDER"
    data = pickle.dumps(_frame(marker), protocol=2)
    op = b"X" + len(marker).to_bytes(4, "little") + marker.encode()
    assert data.count(op) == 1
    return data.replace(op, b"]" * depth + b"a" * (depth - 1))


def _bad_categorical() -> pd.DataFrame:
    """A categorical column whose code 100 points past its two categories (read unchecked by take)."""
    frame = pd.DataFrame({"c": pd.Categorical(["a", "b"]), "score": [0.1, 0.2]})
    frame["c"].array._ndarray[0] = 100
    assert frame["c"].array.codes[0] == 100
    return frame


def _shared_cell(doublings: int = 60):
    """A cell that refers to one list 2**doublings times (60 KB walked as 2**60 items)."""
    cell = ["x"]
    for _ in range(doublings):
        cell = [cell, cell]
    return cell


ATTACKS = {  # name: (pickle bytes, what the refusal says)
    "object field over raw bytes": (pickle.dumps(_OBJECT_OVER_BYTES), "numpy dtype 'V8'"),
    "object dtype declaring fields": (pickle.dumps(_OBJECT_DTYPE_WITH_FIELDS), "not the one numpy writes"),
    "field past the item's end": (pickle.dumps(_FIELD_PAST_THE_END), "not the one numpy writes"),
    "DataFrame of range(10**9) columns": (
        b"cpandas\nDataFrame\n(NNcbuiltins\nrange\n(I0\nI1000000000\ntRtR.", "builtins.range"),
    "frame of a 10**10 RangeIndex": (pickle.dumps(pd.DataFrame(index=pd.RangeIndex(10**10))),
                                     "a RangeIndex declares 10,000,000,000 elements"),
    "bytearray(10**10)": (b"c__builtin__\nbytearray\n(I10000000000\ntR.", "bytearray(int)"),
    "reconstructor of a set from range(10**10)": (
        b"ccopy_reg\n_reconstructor\n(c__builtin__\nset\nc__builtin__\nset\n"
        b"c__builtin__\nrange\n(I0\nI10000000000\ntRtR.", "builtins.set"),
    "array whose shape needs 10**12 items": (pickle.dumps(_Array(np.dtype("f8"), b"\x00" * 8, (10**12,))),
                                             "declares 1,000,000,000,000 elements"),
    "ndarray.__new__ of a huge shape": (b"\x80\x02cnumpy\nndarray\nJ\x00\xca\x9a;\x85q\x00\x81q\x01.",
                                        "ndarray.__new__ with arguments"),
    "punycode (quadratic)": (b"c_codecs\nencode\n(V" + "中" .encode("raw_unicode_escape") * 10
                             + b"\nVpunycode\ntR.", "codec 'punycode'"),
    "marks nested 200,000 deep": (b"\x80\x02" + b"(" * 200_000 + b"l" * 200_000 + b".", "nest more than 100"),
    "Arrow array longer than its buffers": (pickle.dumps(_arrow_past_its_buffers()),
                                            "an Arrow array that does not fit its buffers"),
    "MultiIndex not to be verified": (pickle.dumps(_unverified_multiindex()), "verify_integrity"),
    "BUILD on pandas' own function": (b"cpandas.core.indexes.base\n_new_Index\n}S'x'\nI1\nsb.",
                                      "a state set on a function"),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_each_attack_is_refused_by_the_unpickler_before_it_is_built(name):
    data, says = ATTACKS[name]
    start = time.perf_counter()
    with pytest.raises(RefusedPickle) as info:
        loads_restricted(data)
    assert says in str(info.value) and "\n" not in str(info.value)
    assert time.perf_counter() - start < 2


def test_the_attacks_are_refused_in_one_line_through_score(tmp_path):
    """`score` reads through the child: the line names the file, says refused and why."""
    data = tmp_path / "data"
    data.mkdir()
    for i, name in enumerate(["object field over raw bytes", "bytearray(10**10)", "punycode (quadratic)"]):
        pred = tmp_path / f"attack{i}.pkl"
        pred.write_bytes(ATTACKS[name][0])
        start = time.perf_counter()
        res = _invoke("score", pred, data, "--out", tmp_path / "r")
        assert res.exit_code == 1 and "Traceback" not in res.output, res.output
        line = res.output.strip().splitlines()[-1]
        assert line.startswith("Error: ") and f"attack{i}.pkl: refused" in line and ATTACKS[name][1] in line
        assert time.perf_counter() - start < 20 and not (tmp_path / "r").exists()


def test_cells_nested_shared_or_not_data_are_refused_in_one_line(tmp_path):
    cases = {
        "deep.pkl": (_deep_cell(200_000), "column 'score', row 1: a list"),
        "shared.pkl": (pickle.dumps(_frame(_shared_cell())), "column 'score', row 1: a list"),
        "function.pkl": (pickle.dumps(_frame(pd.Timestamp)), "column 'score', row 1: a type"),
        "codes.pkl": (pickle.dumps(_bad_categorical()), "column 'c': categorical codes outside its 2"),
        "list.pkl": (pickle.dumps([1, 2]), "it holds a list; expected a DataFrame or Series"),
    }
    for file, (data, says) in cases.items():
        (tmp_path / file).write_bytes(data)
        start = time.perf_counter()
        with pytest.raises(DataError) as info:
            read_external(tmp_path / file)
        assert f"{file}: refused: {says}" in str(info.value) and "\n" not in str(info.value)
        assert time.perf_counter() - start < 15
    assert len(_deep_cell(200_000)) < 450_000 and len(pickle.dumps(_frame(_shared_cell()))) < 60_000


def test_a_frame_read_apart_holds_plain_columns_of_the_same_values(tmp_path, caplog):
    days = pd.date_range("2021-01-04", periods=3, freq="B")
    idx = pd.MultiIndex.from_product([days, ["SH600000", "SZ000001"]], names=["datetime", "instrument"])
    frame = pd.DataFrame({"score": np.arange(6.0, dtype="float32"),
                          "c": pd.Categorical(list("abcabc")), "i": pd.array([1, None] * 3, dtype="Int64"),
                          "t": pd.date_range("2021", periods=6, tz="Asia/Shanghai"),
                          "d": pd.to_timedelta(range(6), unit="D"),
                          "o": np.array(list("uvwxyz"), dtype=object)},
                         index=idx)
    frame.attrs["source"] = "qlib"
    caplog.set_level(logging.WARNING, logger="forecaster.evaluation.pickle_sandbox")
    for protocol in (0, 5):  # every protocol through the unpickler: test_forecaster_safe_pickle
        (tmp_path / "p.pkl").write_bytes(pickle.dumps(frame, protocol=protocol))
        back = load_plain_pickle(tmp_path / "p.pkl")
        pd.testing.assert_frame_equal(back, frame, check_dtype=False, check_index_type=False,
                                      check_column_type=False, check_categorical=False)
        assert back["score"].dtype == np.float32 and back.attrs == {}
        assert "p.pkl: its attrs (dict of 1 entries) are not read" in caplog.text  # said, not silently
        assert back["i"].isna().tolist() == [False, True] * 3 and back["c"].tolist() == list("abcabc")
    series = frame["score"].rename("pred")
    (tmp_path / "s.pkl").write_bytes(pickle.dumps(series))
    back = load_plain_pickle(tmp_path / "s.pkl")
    assert isinstance(back, pd.Series) and back.name == "pred" and back.tolist() == series.tolist()
    got = load_plain_pickle(DATA / "qlib_pred_pandas2.pkl")  # pandas 2.0.3's, as Qlib writes it
    pd.testing.assert_frame_equal(got, pd.read_pickle(DATA / "qlib_pred_pandas2.pkl"), check_index_type=False,
                                  check_column_type=False)


def test_a_child_out_of_memory_or_time_or_crashed_is_one_line(tmp_path, monkeypatch):
    big = tmp_path / "big.pkl"
    big.write_bytes(pickle.dumps(pd.DataFrame({"score": np.zeros(2_000_000)})))  # 16 MB of floats
    monkeypatch.setattr(pickle_sandbox, "MEMORY_BYTES", 8 * 2**20)
    monkeypatch.setattr(pickle_sandbox, "MEMORY_PER_BYTE", 0)
    with pytest.raises(RefusedPickle, match="^reading it needed more than 8 MB of memory"):
        load_plain_pickle(big)
    monkeypatch.setattr(pickle_sandbox, "WALL_SECONDS", 0.05)
    start = time.perf_counter()
    with pytest.raises(RefusedPickle, match="^reading it took longer than 0.05 s"):
        load_plain_pickle(big)
    assert time.perf_counter() - start < 5
    segfault = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"  # a reader that dies of one
    crashed = subprocess.run([sys.executable, "-c", segfault], capture_output=True, check=False)
    with pytest.raises(RefusedPickle, match=r"^it crashed the reader \(signal 11\): the file is damaged"):
        pickle_sandbox._status(crashed, 100)
    cpu = subprocess.CompletedProcess([], -24, b"", b"")
    with pytest.raises(RefusedPickle, match="^reading it took more than 30 s of CPU"):
        pickle_sandbox._status(cpu, 100)
