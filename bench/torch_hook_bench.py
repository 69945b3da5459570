#!/usr/bin/env python3
"""terngrad-bench: per-bucket cost of terngrad.torch's hook against a GRACE-style pure-torch TernGrad and
the fp16 compression hook, at 1 and 2 threads (docs/torch.md, "Measured costs"). A benchmark, not a test.

Each method, per bucket of n float32 elements, as one rank of 2 sees it, without the communication:
  encode: terngrad   the hook's steps 1-2 (hooks.encode_bucket, shared scalar, one rank: the max
                     all_reduce is the identity): tensor_stats + encode_with_scalar(stats=), clip='clip',
                     c=2.5, 2bit. Also, as `recompute`, the same bytes by tensor_scalar + encode_with_scalar
                     without stats (the rank's statistics computed twice, once per call)
          grace      GRACE's TernGradCompressor.compress: sigma in float32, clamp, uniform draw, int8 signs
          fp16       torch's fp16_compress_hook: buffer.to(float16).div_(world)
  decode: terngrad   aggregate of the 2 payloads (exact integer sums, mean as float32)
          grace      decompress both (int8 -> float32 * scalar) and average
          fp16       the fp16 sum of the 2 to float32
Also the LiveCheck cost of one check (R draws + check_samples) on the same bucket.

    PYTHONPATH=build/default/python/package /usr/bin/python3 bench/torch_hook_bench.py \
        --sizes 16,20,22,24 --threads 1,2 --json reports/torch/bench.json
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch

import terngrad as tg
import terngrad.torch as tt
from terngrad.torch import LiveCheck
from terngrad.torch.hooks import TernGradState, encode_bucket


# ---- GRACE-style TernGrad (pure torch), as in GRACE's grace_dl/torch/compressor/terngrad.py ----------
def grace_compress(tensor):
    shape = tensor.size()
    tensor = tensor.flatten()
    std = (tensor - torch.mean(tensor)) ** 2
    std = torch.sqrt(torch.mean(std))
    c = 2.5 * std.item()
    gradient = torch.clamp(tensor, -c, c)
    abs_gradient = gradient.abs()
    scalar = abs_gradient.max()
    sign_gradient = gradient.sign() * scalar
    rnd_sample = torch.empty_like(tensor).uniform_(0, scalar.item())
    sign_gradient[rnd_sample >= abs_gradient] = 0
    new_sign = sign_gradient.sign()  # -1, 0, 1
    return (new_sign.type(torch.int8), scalar.flatten()), shape


def grace_decompress(compressed, shape):
    signs, scalar = compressed
    return (signs.type(torch.float32) * scalar).view(shape)


def timed(fn, repeats):
    fn()  # warm up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts)


def bench_size(n, threads, repeats, draws):
    torch.set_num_threads(threads)
    codec = f"optimized-t{threads}"
    g = torch.randn(n, generator=torch.Generator().manual_seed(n)) * 1e-3
    g2 = torch.randn(n, generator=torch.Generator().manual_seed(n + 1)) * 1e-3
    out = {"n": n, "threads": threads}

    hook_state = TernGradState(seed=0, clip="clip", c=2.5, packing="2bit", shared_scalar=True, codec=codec)

    def tg_encode():  # the hook's own code path for one bucket
        return encode_bucket(hook_state, g, 0, 0, 1, reduce_max=lambda s: s)[0]

    def tg_encode_recompute():
        s = tt.tensor_scalar(g, clip="clip", c=2.5, codec=codec)
        return tt.encode_with_scalar(g, s, clip="clip", c=2.5, packing="2bit", step=1, codec=codec)

    if bytes(tg_encode()) != tg_encode_recompute():
        raise SystemExit("the hook's encode and tensor_scalar + encode_with_scalar gave different bytes")
    s = max(tt.tensor_scalar(g, clip="clip", codec=codec), tt.tensor_scalar(g2, clip="clip", codec=codec))
    ps = [tt.encode_with_scalar(x, s, clip="clip", worker=w, codec=codec) for w, x in enumerate((g, g2))]
    out["terngrad_encode_s"], _ = timed(tg_encode, repeats)
    out["terngrad_encode_recompute_s"], _ = timed(tg_encode_recompute, repeats)
    out["terngrad_decode_s"], _ = timed(lambda: tt.aggregate(ps, codec=codec), repeats)
    out["terngrad_bytes"] = len(ps[0])

    out["grace_encode_s"], _ = timed(lambda: grace_compress(g), repeats)
    cs = [grace_compress(x) for x in (g, g2)]
    out["grace_decode_s"], _ = timed(lambda: (grace_decompress(*cs[0]) + grace_decompress(*cs[1])) / 2, repeats)
    out["grace_bytes"] = n + 4

    out["fp16_encode_s"], _ = timed(lambda: g.to(torch.float16).div_(2), repeats)
    h = [x.to(torch.float16).div_(2) for x in (g, g2)]
    out["fp16_decode_s"], _ = timed(lambda: (h[0] + h[1]).to(torch.float32), repeats)
    out["fp16_bytes"] = 2 * n

    if draws:
        state = TernGradState(seed=1, clip="clip", codec=codec)
        live = LiveCheck(every=100, draws=draws, planned_checks=10**6, quiet=True)
        t = []
        for k in range(max(1, repeats // 2)):
            t0 = time.perf_counter()
            r = live.check(state, g, 0, 0, s, k)
            t.append(time.perf_counter() - t0)
            assert r.passed, r.summary()
        out["livecheck_s"] = statistics.median(t)
        out["livecheck_draws"] = draws
    for m in ("terngrad", "grace", "fp16"):
        out[f"{m}_total_s"] = out[f"{m}_encode_s"] + out[f"{m}_decode_s"]
    out["encode_speedup_vs_grace"] = out["grace_encode_s"] / out["terngrad_encode_s"]
    out["recompute_speedup_vs_grace"] = out["grace_encode_s"] / out["terngrad_encode_recompute_s"]
    out["loadavg_1min"] = os.getloadavg()[0]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="16,20,22,24", help="log2 of the bucket sizes")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--draws", type=int, default=32, help="LiveCheck draws per check (0: skip)")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()
    rows = []
    print(f"{'n':>9} {'thr':>3} | {'terngrad enc':>12} {'dec':>8} {'recompute':>9} | {'grace enc':>10} {'dec':>8} | "
          f"{'fp16 enc':>9} {'dec':>8} | {'enc x':>6} | {'live R':>6} {'live s':>8} | {'load':>5}")
    for t in (int(x) for x in a.threads.split(",")):
        for e in (int(x) for x in a.sizes.split(",")):
            r = bench_size(2**e, t, a.repeats, a.draws)
            rows.append(r)
            ms = lambda k: f"{1e3 * r[k]:.2f}"  # noqa: E731
            print(f"{r['n']:>9} {t:>3} | {ms('terngrad_encode_s'):>12} {ms('terngrad_decode_s'):>8} "
                  f"{ms('terngrad_encode_recompute_s'):>9} | "
                  f"{ms('grace_encode_s'):>10} {ms('grace_decode_s'):>8} | {ms('fp16_encode_s'):>9} "
                  f"{ms('fp16_decode_s'):>8} | {r['encode_speedup_vs_grace']:>6.1f} | "
                  f"{r.get('livecheck_draws', 0):>6} {ms('livecheck_s') if 'livecheck_s' in r else '-':>8} | "
                  f"{r['loadavg_1min']:>5.2f}", flush=True)
    print("times in ms (median of", a.repeats, "runs); enc x = GRACE encode / terngrad encode; recompute = "
          "tensor_scalar + encode_with_scalar without stats; load = 1-minute load average after the row")
    if a.json:
        os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                       "command": " ".join(["bench/torch_hook_bench.py"] + sys.argv[1:]),
                       "torch": torch.__version__, "avx2": tg.cpu_has_avx2(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
