"""Folds that build on earlier folds: a warm-started walk-forward runs its folds in waves.

With ``WalkForwardConfig.warm_start = s``, fold ``k`` starts each warm-startable model (one
with ``warm_from``/``warm_state``, the panel Transformer) from the state fold ``k - s`` ended
with, and trains it on its own whole history with a fraction of a full refit's epochs. Fold
``k - s`` must therefore finish first: :func:`in_waves` runs the folds whose source is done
(``s`` at a time from the start, so ``s`` workers stay busy) and hands each the states it
needs. Every fold still fits on rows up to its own cut-off only: a state carries weights
trained on an earlier, shorter history, never a later one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator


def in_waves(run_wave: Callable[[list[tuple]], Iterator], tasks: list[tuple], stride: int,
             states: dict[int, dict]) -> Iterator:
    """Run ``tasks`` (each ``(fold, ...)``) wave by wave and yield their results as they come.

    Args:
        run_wave: runs a list of tasks, each extended with ``{name: state}`` to start from,
            and yields ``(FoldOutput, kept)`` results.
        tasks: the folds to run, ``task[0]`` the :class:`~forecaster.evaluation.walkforward.Fold`.
        stride: fold ``k`` starts from fold ``k - stride``'s states.
        states: ``{fold: {name: state}}`` of folds already done (a resumed run); filled in as
            folds finish.
    """
    pending = sorted(tasks, key=lambda t: t[0].fold)
    while pending:
        waiting = {t[0].fold for t in pending}
        wave = [t for t in pending if t[0].fold - stride not in waiting]
        pending = [t for t in pending if t[0].fold - stride in waiting]
        for result in run_wave([(*t, states.get(t[0].fold - stride, {})) for t in wave]):
            output = result[0]
            states[output.fold] = output.states
            yield result
