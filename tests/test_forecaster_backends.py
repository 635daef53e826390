"""The Ray backend: a real cluster (a head and a worker on the loopback address) runs a small
panel walk-forward and gives exactly the local result."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from forecaster.data import synthetic_panel
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.models.presets import panel_models

ray = pytest.importorskip("ray", reason="Ray is not installed here (pip install -e '.[ray]')")
RAY = str(Path(sys.executable).parent / "ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster(monkeypatch):
    # Loopback only: no token authentication between the head, the worker and this driver.
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    port = _free_port()
    common = ["--num-cpus", "1", "--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
    # A short temp dir: Ray's unix sockets live under it (108-byte path limit).
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    head = [RAY, "start", "--head", "--port", str(port), "--include-dashboard", "false", "--temp-dir", temp,
            *common]
    worker = [RAY, "start", "--address", f"127.0.0.1:{port}", *common]
    try:
        for command in (head, worker):
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


def test_ray_cluster_gives_the_local_result(cluster):
    frames = synthetic_panel(n_stocks=16, n_days=360, seed=1)
    models = {k: v for k, v in panel_models(time_series=False, window=8, d_model=8, n_heads=2, n_layers=1,
                                            max_epochs=1).items()
              if k in ("transformer", "gbm", "low_vol_20d")}
    config = dict(train_days=240, retrain_every=40, progress=False)
    t0 = time.perf_counter()
    local = walk_forward(frames, models, WalkForwardConfig(**config, n_jobs=1))
    t1 = time.perf_counter()
    remote = walk_forward(frames, models, WalkForwardConfig(**config, backend="ray", address=cluster))
    t2 = time.perf_counter()
    assert len(remote.folds) == 3
    pd.testing.assert_frame_equal(local.predictions, remote.predictions)
    print(f"ray cluster {t2 - t1:.1f} s, local {t1 - t0:.1f} s")  # shown with pytest -s


def test_backend_is_validated():
    with pytest.raises(ValueError, match="backend must be one of"):
        WalkForwardConfig(backend="dask")
