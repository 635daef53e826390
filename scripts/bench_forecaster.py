"""Training and prediction throughput of the forecaster against the seed's recipe.

One process, same data (``../shared/data/ashare/sh.600000.csv`` by default), the seed's config
for both (window 7, d_model 200, 10 heads, 2 layers, batch 100). Prints

    train_windows_per_s ours=... seed=... ratio=...     (target >= 3)
    predict_windows_per_s ours=... seed=... ratio=...   (target >= 50)
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from forecaster import CausalTransformerForecaster
from forecaster.data import load_csv
from forecaster.models.stock.seed import SeedRecipe

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--csv", default=str(REPO.parent / "shared/data/ashare/sh.600000.csv"))
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--predict-repeats", type=int, default=3, help="timed predictions of each (median)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--d-ff", type=int, default=None,
                   help="our feed-forward width (default 4*d_model; the seed used torch's 2048)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    frame, _ = load_csv(args.csv)
    cfg = dict(window=7, d_model=200, n_heads=10, n_layers=2, batch_size=100)

    seed = SeedRecipe(**cfg, max_epochs=1, random_state=0)
    ours = CausalTransformerForecaster(**cfg, d_ff=args.d_ff, norm_first=False, val_fraction=0.0,
                                       max_epochs=1, random_state=0, progress=False)
    ours_rates, seed_rates = [], []
    for epoch in range(args.epochs):  # alternate whole epochs so noise hits both
        t = time.perf_counter()
        seed.fit(frame)
        seed_rates.append(seed.n_windows_ / (time.perf_counter() - t))
        # Whole fit() for both (window building, scaling and setup included), one epoch each.
        t = time.perf_counter()
        ours.fit(frame)
        ours_rates.append(ours.history_[0]["windows"] / (time.perf_counter() - t))
        if epoch == 0:  # first epoch warms up allocators and kernels
            ours_rates.clear()
            seed_rates.clear()
    o, s = statistics.median(ours_rates), statistics.median(seed_rates)
    print(f"# {args.csv}: {len(frame)} days; config {cfg}; ours d_ff={ours.net_config_.d_ff}, "
          f"seed d_ff=2048; median of {len(ours_rates)} epochs")
    print(f"train_windows_per_s ours={o:.0f} seed={s:.0f} ratio={o / s:.2f}")

    ours_rates, seed_rates = [], []
    for _ in range(1 + args.predict_repeats):  # alternating; the first pair warms up
        t = time.perf_counter()
        n = len(ours.predict(frame))
        ours_rates.append(n / (time.perf_counter() - t))
        t = time.perf_counter()
        n = len(seed.predict(frame))
        seed_rates.append(n / (time.perf_counter() - t))
    o, s = statistics.median(ours_rates[1:]), statistics.median(seed_rates[1:])
    print(f"predict_windows_per_s ours={o:.0f} seed={s:.0f} ratio={o / s:.1f}")


if __name__ == "__main__":
    main()
