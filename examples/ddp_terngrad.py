#!/usr/bin/env python3
"""terngrad-bench: Fashion-MNIST LeNet with PyTorch DDP on 2 CPU processes (Gloo), gradients exchanged by
terngrad.torch's hook (or torch's default allreduce, for comparison), with LiveCheck on the gradients sent.

    PYTHONPATH=build/default/python/package /usr/bin/python3 examples/ddp_terngrad.py --hook terngrad --epochs 1
    PYTHONPATH=build/default/python/package /usr/bin/python3 examples/ddp_terngrad.py --hook allreduce --epochs 1

Data: Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, gzip idx). Each rank takes every
other example of a shuffled epoch (the same shuffle on both), batch --batch per rank. Writes a JSON summary
(test accuracy, bytes sent, LiveCheck rows, step and check times) to --out.
"""
import argparse
import datetime
import gzip
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DATA = "/usr/share/datasets/fashion-mnist"


def load(kind):
    with gzip.open(os.path.join(DATA, f"{kind}-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(DATA, f"{kind}-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    x = torch.from_numpy((x.astype(np.float32) / 255.0 - 0.2860) / 0.3530)
    return x, torch.from_numpy(y.astype(np.int64))


def lenet():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(6, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(400, 120), torch.nn.ReLU(), torch.nn.Linear(120, 84), torch.nn.ReLU(),
        torch.nn.Linear(84, 10))


def worker(rank, world, a, rendezvous):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    torch.manual_seed(a.seed)
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    model = torch.nn.parallel.DistributedDataParallel(lenet())
    steps_per_epoch = len(xtr) // (world * a.batch)
    total = steps_per_epoch * a.epochs
    state = live = None
    if a.hook == "terngrad":
        from terngrad.torch import LiveCheck
        from terngrad.torch.hooks import TernGradState, terngrad_hook

        live = LiveCheck(every=a.live_every, bucket=0, draws=a.draws, alpha_total=1e-3, total_steps=total,
                         log=a.out.replace(".json", "-live.csv") if rank == 0 else None, quiet=rank != 0)
        if rank == 0:
            print(live.plan(), flush=True)
        state = TernGradState(seed=a.seed, clip="clip", c=2.5, packing="2bit", float_below=1024,
                              codec="optimized-t1", live_check=live)
        model.register_comm_hook(state, terngrad_hook)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    gen = torch.Generator().manual_seed(a.seed)
    step_times = []
    t_start = time.perf_counter()
    for epoch in range(a.epochs):
        perm = torch.randperm(len(xtr), generator=gen)[rank::world]
        for k in range(steps_per_epoch):
            idx = perm[k * a.batch:(k + 1) * a.batch]
            t0 = time.perf_counter()
            loss = torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step_times.append(time.perf_counter() - t0)
            if rank == 0 and k % 100 == 0:
                print(f"epoch {epoch} step {k}/{steps_per_epoch} loss {loss.item():.3f}", flush=True)
    train_s = time.perf_counter() - t_start
    model.eval()
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item()
    if rank == 0:
        out = {"hook": a.hook, "epochs": a.epochs, "steps": total, "batch_per_rank": a.batch, "world": world,
               "test_accuracy": acc, "train_s": train_s, "median_step_s": float(np.median(step_times)),
               "mean_step_s": float(np.mean(step_times))}
        if state is not None:
            out.update(bytes_sent=state.bytes_sent, float_bytes=state.float_bytes,
                       compression=state.compression(), live_every=a.live_every, live_draws=a.draws,
                       live_checks=live.checks_run, live_failed=len(live.failures), live_seconds=live.seconds,
                       live_plan=live.plan(), live_rows=live.rows,
                       live_cost_fraction=live.seconds / train_s,
                       live_cost_per_check_in_steps=(live.seconds / max(1, live.checks_run)) / np.mean(step_times))
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
        print(json.dumps({k: v for k, v in out.items() if k != "live_rows"}, indent=1))
    # torch 1.13 can deadlock tearing down a DDP model with a Python comm hook (the main thread joins Gloo's
    # threads holding the GIL while one of them waits for it): after a barrier, leave without destructors.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hook", choices=["terngrad", "allreduce"], default="terngrad")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--live-every", type=int, default=100)
    ap.add_argument("--draws", type=int, default=32)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    a.out = a.out or f"reports/torch/ddp_{a.hook}.json"
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(worker, args=(2, a, os.path.join(d, "rendezvous")), nprocs=2, join=True)


if __name__ == "__main__":
    main()
