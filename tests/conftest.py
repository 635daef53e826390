"""Shared fixtures: paths to the real data beside the checkout, and small frames."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"


def shared_path(*parts: str) -> Path:
    """A path under ../shared/data; skips the test when it is absent (outside CI)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"real data {path} is missing on CI")
        pytest.skip(f"real data {path} not present beside this checkout")
    return path


@pytest.fixture
def ashare_dir() -> Path:
    return shared_path("ashare")


@pytest.fixture(scope="session")
def synthetic_frame():
    from forecaster.data import load_csv

    frame, _ = load_csv(REPO / "data" / "synthetic_ashare.csv")
    return frame


@pytest.fixture(scope="session", autouse=True)
def torch_one_thread():
    """Every test's tiny networks on one torch thread: a second thread gains them nothing, and on
    a shared 2-core machine its spinning made a 10 s CLI test take 60 s (tests that set their
    own thread count restore this one)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models gain nothing from more threads, and the CPU is often shared."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def sealed():
    """``sealed(data)``: a checkpoint dict with its digest recomputed, as a file written by
    another version of the program would be (to test the checks after the digest's)."""
    from seq2seq.core import content_digest

    return lambda data: {**data, "sha256": content_digest(data)}


def write_daily_and_bars(root: Path, n_stocks: int, n_days: int, seed: int = 5, signal_ic: float = 0.3):
    """``(daily, bars)`` folders under ``root``: generated minute bars of ``n_stocks`` stocks
    (``sz.000001``...) and the daily files made from them, as a user of ``--intraday`` holds."""
    from forecaster.data import daily_bars, synthetic_intraday, write_minute_csv

    bars = synthetic_intraday(n_stocks=n_stocks, n_days=n_days, signal_ic=signal_ic, seed=seed)
    daily, minute = root / "daily", root / "bars"
    daily.mkdir()
    minute.mkdir()
    for i, frame in enumerate(bars.values()):
        code = f"sz.{i + 1:06d}"
        frame = frame.assign(code=code)
        write_minute_csv(frame, minute / f"{code}.csv")
        daily_bars(frame).drop(columns="suspended").reset_index().to_csv(daily / f"{code}.csv", index=False)
    return daily, minute
