"""The Ray backend: a real cluster (a head and a worker node on the loopback address) runs a
small panel walk-forward and gives exactly the local result, even when the worker node is
killed while it runs a fold."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
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
    """A head and a worker node (one CPU each) on the loopback address; yields the address and
    the worker node's raylet process id (the node a test may kill)."""
    # Loopback only: no token authentication between the head, the worker and this driver.
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    # Ray starts its workers at nice 15: beside another busy process (the suite's second test
    # process) they got 3 % of a core. The nodes' workers at the tests' own priority.
    monkeypatch.setenv("RAY_worker_niceness", "0")
    port = _free_port()
    common = ["--num-cpus", "1", "--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
    # A short temp dir: Ray's unix sockets live under it (108-byte path limit).
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    head = [RAY, "start", "--head", "--port", str(port), "--include-dashboard", "false", "--temp-dir", temp,
            *common]
    worker = [RAY, "start", "--address", f"127.0.0.1:{port}", "--resources", '{"doomed_node": 1}', *common]
    try:
        for command in (head, worker):
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        yield f"127.0.0.1:{port}", _processes("raylet", "doomed_node")[0]
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


def _processes(*words: str, parent: int | None = None) -> list[int]:
    """Process ids whose command line holds every word (children of ``parent`` only, if given)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if all(w in cmdline for w in words) and (parent is None or ppid == parent):
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker node's processes in /proc (Linux)")
def test_ray_cluster_gives_the_local_result_even_when_a_node_dies(cluster):
    """A worker node killed while it runs a fold costs only that fold's work: Ray runs it
    again on the node that is left, and the forecasts equal a local run's. The run goes in
    two warm-started waves, both served by one Ray session and one stored copy of the data."""
    address, raylet = cluster
    frames = synthetic_panel(n_stocks=16, n_days=400, seed=1)
    models = {k: v for k, v in panel_models(time_series=False, window=8, d_model=8, n_heads=2, n_layers=1,
                                            max_epochs=2).items()
              if k in ("transformer", "gbm", "low_vol_20d")}
    # two waves of two folds (each fold starts from the one two before): one Ray session serves both
    config = dict(train_days=240, retrain_every=40, progress=False, warm_start=2)
    t0 = time.perf_counter()
    local = walk_forward(frames, models, WalkForwardConfig(**config, n_jobs=1))
    t1 = time.perf_counter()
    killed = []

    def kill_the_worker_node_mid_fold():
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            if _processes("ray::_fold_task", parent=raylet):  # a fold is running on it
                os.kill(raylet, signal.SIGKILL)
                killed.append(time.time())
            time.sleep(0.05)

    thread = threading.Thread(target=kill_the_worker_node_mid_fold, daemon=True)
    thread.start()
    remote = walk_forward(frames, models, WalkForwardConfig(**config, backend="ray", address=address))
    t2 = time.perf_counter()
    thread.join(timeout=5)
    assert killed, "no fold ran on the worker node"
    assert len(remote.folds) == 4 and not remote.failed
    pd.testing.assert_frame_equal(local.predictions, remote.predictions)
    print(f"ray cluster {t2 - t1:.1f} s with a node killed, local {t1 - t0:.1f} s")  # shown with pytest -s


def test_backend_is_validated():
    with pytest.raises(ValueError, match="backend must be one of"):
        WalkForwardConfig(backend="dask")


def test_freed_heap_collects_garbage_at_most_a_tenth_of_the_time(monkeypatch):
    """A full collection took 0.16 s with torch loaded; called per fold and per model it was
    a quarter of a small run. It runs again only after ten times its own last duration."""
    from forecaster.evaluation import backends

    calls = []
    monkeypatch.setattr(backends.gc, "collect", lambda: calls.append(time.sleep(0.01)))
    monkeypatch.setattr(backends, "_last_gc", {"end": float("-inf"), "took": 0.0})
    backends.release_freed_heap()  # never collected: collects, and times itself
    assert len(calls) == 1 and backends._last_gc["took"] >= 0.01
    backends._last_gc["took"] = 60.0  # a slow collection: the next may come 600 s later
    backends.release_freed_heap()
    assert len(calls) == 1
    backends._last_gc["end"] -= 601.0
    backends.release_freed_heap()
    assert len(calls) == 2


def test_an_address_nothing_answers_at_fails_within_seconds_naming_it(tmp_path):
    """[run] backend = "ray" with an unreachable address printed only Ray's log lines until a
    120 s timeout (issue 78): now one line naming the address, within seconds, before the
    report folder is claimed."""
    from click.testing import CliRunner

    from forecaster.app.cli import main
    from forecaster.checks import ConfigError
    from forecaster.evaluation.backends import ray_session

    port = _free_port()  # bound, then closed: nothing listens there
    address = f"127.0.0.1:{port}"
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=rf"^\[run\] address '{address}': no Ray cluster answered within "
                                          r"10 s \(.*refused"):
        with ray_session(address):
            pass
    assert time.perf_counter() - started < 15 and not ray.is_initialized()
    out = tmp_path / "r"
    res = CliRunner().invoke(main, ["backtest", "--synthetic-stocks", "6", "--synthetic-days", "200",
                                    "--train-days", "120", "--retrain-every", "40", "--backend", "ray",
                                    "--address", address, "--out", str(out)])
    assert res.exit_code == 1 and f"Error: [run] address '{address}': no Ray cluster answered" in res.output
    assert "Traceback" not in res.output and not out.exists()
    assert time.perf_counter() - started < 60
