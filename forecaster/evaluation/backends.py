"""Where a walk-forward's folds run: local processes (joblib) or a Ray cluster.

Both take the same fold function and return the folds' results as they finish (any order;
the caller sorts); each task slices its own fold from the whole data set. ``local`` runs
the tasks in joblib's worker processes (``n_jobs``), the panel's arrays shared through
files each task maps. ``ray`` puts the whole data set into the cluster's object
store once (``ray.put``; workers on the same node read its arrays without copying) and runs
each fold as a task that slices its own inputs there, so nothing large is pickled per task.
Ray is optional: ``pip install -e '.[ray]'``; ``address`` names an existing cluster
(``ray start --head`` on one machine, ``ray start --address HEAD:6379`` on the others),
``None`` starts a local one for this run.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import math
import socket
import time
from collections.abc import Callable, Iterable, Iterator

from joblib import Parallel, delayed

from forecaster.checks import ConfigError

log = logging.getLogger(__name__)

BACKENDS = ("local", "ray")
# Seconds a Ray cluster's address has to accept a connection before the run is refused (Ray's
# own connect waits about two minutes, saying nothing but its own log lines).
CONNECT_TIMEOUT = 10.0
RAY_PORT = 6379  # Ray's head port where an address gives none


# A full garbage collection took 0.16 s once the CLI (torch, pandas) was imported, whatever the
# data's size: at whole-market size nothing beside a fold, on a small run a quarter of the wall
# time (a call per fold and per model). So it runs when at least this many times its own last
# duration has passed since it ran: never more than about a tenth of the time.
_GC_SPACING = 10.0
_last_gc = {"end": -math.inf, "took": 0.0}


def release_freed_heap() -> None:
    """Hand freed heap back to the operating system (glibc's ``malloc_trim``; a no-op
    elsewhere). glibc keeps freed blocks below its mmap threshold, which grows to 32 MB as
    large arrays come and go, so a process that trained a fold or dropped a panel's frames
    would go on holding gigabytes it no longer uses: in every idle worker, at whole-market
    size. Cyclic garbage is collected first (``gc.collect``) when the last collection here is
    long enough ago (``_GC_SPACING`` times its duration)."""
    now = time.perf_counter()
    if now - _last_gc["end"] >= _GC_SPACING * _last_gc["took"]:
        gc.collect()
        _last_gc["end"] = time.perf_counter()
        _last_gc["took"] = _last_gc["end"] - now
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to hand back this way
        pass


def run_local(fn: Callable, shared, tasks: Iterable[tuple], n_jobs: int, stop: bool = True) -> Iterator:
    """``fn(shared, *task)`` for each task in joblib processes, results as they finish.
    ``shared`` travels pickled with every task: give large arrays as files (see
    :meth:`forecaster.data.panel.Panel.to_files`). ``stop``: stop the workers after the last
    task (``False`` keeps them for another call, e.g. the next wave of a warm-started run;
    :func:`stop_local` then stops them)."""
    jobs = (delayed(fn)(shared, *t) for t in tasks)
    yield from Parallel(n_jobs=n_jobs, return_as="generator_unordered")(jobs)
    if n_jobs != 1 and stop:
        stop_local()


def stop_local() -> None:
    """Stop joblib's idle workers: they would keep their interpreter, torch and the panel's
    pages resident until joblib's idle timeout (5 minutes), through the scoring that follows."""
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """A :class:`ConfigError` naming ``address`` (``"HOST:PORT"``, ``"ray://HOST:PORT"``)
    unless something accepts a TCP connection there within ``timeout`` seconds; ``"auto"``
    (a cluster on this machine, found by Ray) is left to Ray."""
    if not address or address == "auto":
        return
    where = address.split("://", 1)[-1]
    host, _, port = where.rpartition(":") if ":" in where else (where, "", str(RAY_PORT))
    fail = f"[run] address {address!r}: no Ray cluster answered within {timeout:g} s"
    if not port.isdigit():
        raise ConfigError(f"[run] address {address!r}: expected HOST:PORT (e.g. 10.0.0.1:6379)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:  # refused, timed out, unknown host, no route
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConfigError(f"{fail} ({why}); start one there (ray start --head --port {port}), or leave "
                          "the address empty for a local one") from None


@contextlib.contextmanager
def ray_session(address: str | None = None) -> Iterator:
    """A connection to Ray (``address``'s cluster, or a local instance when ``None``) for as
    long as the block runs, yielding the ``ray`` module; an open connection is used as it is.
    A warm-started run keeps one across its waves: each new connection is a new Ray job, with
    new worker processes (each importing torch again) and its objects stored again.

    Raises:
        ConfigError: Ray is not installed (with the command that installs it), or nothing
            answers at ``address`` within :data:`CONNECT_TIMEOUT` seconds.
    """
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError("[run] backend = 'ray' needs Ray, which is not installed: pip install -e '.[ray]' "
                          "(or pip install ray)") from exc
    started = not ray.is_initialized()
    if started:
        check_reachable(address or "")
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING)
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def run_ray(fn: Callable, shared_ref, tasks: Iterable[tuple], cpus_per_task: int = 1) -> Iterator:
    """``fn(shared, *task)`` for each task as a Ray task, results as they finish, inside the
    caller's :func:`ray_session`. ``shared_ref``: the shared data already in the object store
    (``ray.put``, once for every wave of a run)."""
    import ray

    remote = ray.remote(num_cpus=cpus_per_task)(fn)
    pending = [remote.remote(shared_ref, *t) for t in tasks]
    log.info("ray: %d tasks on %s", len(pending), ray.cluster_resources().get("CPU", "?"))
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield ray.get(done[0])
