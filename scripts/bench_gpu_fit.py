"""One whole-market fit of the panel Transformer, timed step by step on a device: what the
precision and the size of a step do to the time of an epoch (issue 44's GPU path).

Loads DATA (default ``../shared/data/szse``), keeps the days up to ``--end`` (the last
fold's training data), and fits one network of every default for ``--epochs`` epochs under
each setting, printing::

    setting device=D precision=P stocks_per_batch=S days_per_step=B steps=N ms_per_step=M epoch_seconds=E ...

``ms_per_step`` is the median over the epochs after the first (the first one holds the
device's warm-up); ``stocks_per_batch`` is the default (250) and larger ones with the same
stock-days an epoch, so a larger step is fewer steps. An epoch's time, not the figures: a
setting other than the default changes what is trained, and only a walk-forward
(``scripts/bench_market.py -- --stocks-per-batch S``) says what it does to rank IC.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from forecaster.data.daily.folders import load_dir  # noqa: E402
from forecaster.data.panel import Panel  # noqa: E402
from forecaster.models.panel.model import PanelTransformer  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(REPO.parent / "shared/data/szse"))
    p.add_argument("--end", default="2021-12-31", help="last training day")
    p.add_argument("--device", default="auto")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--precisions", default="float32,bfloat16")
    p.add_argument("--stocks-per-batch", default="1000", help="comma-separated sizes besides the default")
    args = p.parse_args()
    started = time.perf_counter()
    frames, _ = load_dir(args.data, progress=False)
    panel = Panel.from_frames(frames)
    panel = panel.slice(end=panel.dates[panel.dates <= args.end][-1])
    print(f"# {panel.n_stocks} stocks x {panel.n_days} days loaded in {time.perf_counter() - started:.0f} s",
          flush=True)
    # the default (None: 250 stocks x 32 days a step past 500 stocks), then larger steps of as many days
    for per_step in (None, *(int(s) for s in args.stocks_per_batch.split(",") if s)):
        for precision in args.precisions.split(","):
            sizes = {} if per_step is None else {"stocks_per_batch": per_step, "days_per_batch": 32,
                                                  "epoch_stock_days": 600_000}
            # one network on the default features: a step's time, not the second set's
            model = PanelTransformer(n_seeds=1, blend_features=(), max_epochs=args.epochs, average_last=1,
                                     device=args.device, precision=precision, **sizes)
            t0 = time.perf_counter()
            model.fit(panel)
            history = model.histories_[0]
            steps = model._loop_config(panel.n_stocks).steps_per_epoch
            later = [row["seconds"] for row in history[1:]] or [history[0]["seconds"]]
            epoch = statistics.median(later)
            print(f"setting device={model.device_} precision={precision} "
                  f"stocks_per_batch={model.budget_['stocks_per_batch']} "
                  f"days_per_step={model.budget_['days_per_batch']} steps={steps} "
                  f"ms_per_step={1000 * epoch / steps:.2f} epoch_seconds={epoch:.2f} "
                  f"fit_seconds={time.perf_counter() - t0:.1f} loss_last={history[-1]['train_loss']:+.4f}",
                  flush=True)


if __name__ == "__main__":
    main()
