"""Where a run's memory peaked: each phase's peak resident memory, of this process and of each
fold's worker, for ``metrics.json``.

Linux keeps a process's peak resident set (``VmHWM`` in ``/proc/self/status``) and resets it
on request (``5`` written to ``/proc/self/clear_refs``), so a phase's own peak is read at its
end after a reset at its start. Elsewhere nothing is measured (``None``).
"""

from __future__ import annotations

GB = 2**30


def peak_gb() -> float | None:
    """This process's peak resident memory since the last :func:`reset_peak`, in GB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / GB
    except OSError:
        pass
    return None


def reset_peak() -> None:
    """Start a new peak at the present resident memory (Linux; a no-op elsewhere)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


class PhasePeaks:
    """``{phase: peak GB}`` of this process, one phase after another."""

    def __init__(self):
        self.peaks: dict[str, float] = {}
        reset_peak()

    def end(self, phase: str) -> None:
        """Record the peak since the previous phase ended under ``phase`` and start the next."""
        value = peak_gb()
        if value is not None:
            self.peaks[phase] = round(max(value, self.peaks.get(phase, 0.0)), 3)
        reset_peak()


def memory_summary(parent: dict[str, float], fold_peaks: dict[int, float], n_workers: int) -> dict:
    """``metrics.json``'s ``memory``: the main process's peak in each phase, each fold's
    worker's peak, and where the run's peak came. During the folds the run holds the main
    process and up to ``n_workers`` folds at once: their sum is bounded by the main process's
    peak plus the ``n_workers`` largest fold peaks (an upper bound: those folds may not have
    peaked at the same moment)."""
    if not parent:
        return {}
    parent = {k: round(v, 3) for k, v in parent.items()}
    top = sorted(fold_peaks.values(), reverse=True)[:max(1, n_workers)] if fold_peaks else []
    totals = dict(parent)
    if "folds" in totals and top:
        totals["folds"] = round(totals["folds"] + sum(top), 3)
    phase = max(totals, key=totals.get)
    out = {"peak_gb": totals[phase], "peak_phase": phase, "main_process_gb": parent,
           "note": ("peak_gb: the main process's peak in that phase, plus, during the folds, the "
                    f"{len(top)} largest fold-worker peaks (at most {n_workers} folds run at once): "
                    "an upper bound of the resident memory summed over the processes")}
    if fold_peaks:
        worst = max(fold_peaks, key=fold_peaks.get)
        out.update(fold_worker_gb={int(k): round(v, 3) for k, v in sorted(fold_peaks.items())},
                   fold_worker_peak_gb=round(fold_peaks[worst], 3), fold_of_worker_peak=int(worst))
    return out
