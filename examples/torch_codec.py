#!/usr/bin/env python3
"""terngrad-bench: a PyTorch TernGrad codec with its own random stream and float32 statistics, as a draw
function for the battery (terngrad.verify.run, terngrad.testing.assert_terngrad; examples/test_codecs.py).

    s = max|g'| (or the shared scalar given), p_k = |g'_k| / s, g~_k = s sign(g_k) b_k, b_k ~ Bernoulli(p_k)

where g' is g clamped at the clip bound c sigma (clip: then s = max|g'|, as GRACE's TernGrad does;
saturate: s = min(max|g|, c sigma), the original TensorFlow code) or g itself (none). sigma is the
population standard deviation computed in float32 by torch, the way a PyTorch codec computes it: the
battery accepts a clip bound within clip_bound_ulps(d) float32 ulps of its double-precision one (docs/statistics.md). The
deviations are divided by their largest magnitude before squaring, so that sigma neither underflows
(|g| ~ 1e-30) nor overflows (|g| ~ 1e30); `naive_sigma=True` squares them as they are (GRACE's code), and
the battery then fails the tiny and huge families, as it should.

Each row (one step) draws its uniforms from two torch.Generators seeded with the two 32-bit halves of a
64-bit hash of (seed, worker, tensor, step), u = (u1 + u2) mod 1, so the estimate is a function of those
four and independent across them. One generator would not do: torch's CPU generator (MT19937) keeps only
the low 32 bits of its seed, so among the 2^18 keys of the battery's ci collision probe two would share a
stream with probability 0.9997 (the battery then fails `collision`, rightly). Two keys share this codec's
stream only if their 64-bit hashes are equal. It does not
follow the spec's Philox stream (codec/include/tg/philox.hpp), so its bytes cannot equal the reference
codec's: run the battery with supports=["none", "clip", "saturate", "shared-scalar"] (every statistical
check applies; `cross`, which compares bytes, is reported as skipped).

    python -m terngrad verify --impl python:torch_codec:draw --profile quick --supports none,clip,saturate,shared-scalar
"""
import hashlib

import numpy as np
import torch


def row_generators(seed, worker, tensor, step):
    """Two torch.Generators for one step of one (seed, worker, tensor) stream, seeded with the two 32-bit halves of
    64 bits of BLAKE2b of the key (torch.Generator.manual_seed keeps the low 32 bits of its seed on the CPU)."""
    key = hashlib.blake2b(b"".join(int(x).to_bytes(8, "little") for x in (seed, worker, tensor, step)),
                          digest_size=8).digest()
    h = int.from_bytes(key, "little")
    return torch.Generator().manual_seed(h & 0xFFFFFFFF), torch.Generator().manual_seed(h >> 32)


def uniforms(shape, generators):
    """Float64 uniforms on [0, 1): (u1 + u2) mod 1 of the two generators' draws (uniform and independent of any
    other key's as long as either generator differs)."""
    u = torch.rand(shape, generator=generators[0], dtype=torch.float64)
    u += torch.rand(shape, generator=generators[1], dtype=torch.float64)
    return torch.where(u >= 1.0, u - 1.0, u)


def sigma(g, naive=False):
    """Population standard deviation of the float32 tensor g, in float32 (torch's reductions)."""
    d = g - torch.mean(g)
    if naive:
        return torch.sqrt(torch.mean(d * d))
    m = d.abs().max()
    return m * torch.sqrt(torch.mean((d / m) ** 2)) if m > 0 else torch.zeros((), dtype=torch.float32)


def ternarize(g, scalar=None, generators=None, clip="none", c=2.5, naive_sigma=False):
    """One TernGrad estimate of the float32 tensor g (torch ops) under the clipping mode `clip`."""
    a = g.abs()
    if clip != "none" and g.numel() > 0:
        bound = (torch.tensor(c, dtype=torch.float32) * sigma(g, naive_sigma)).to(torch.float32)
        a = torch.minimum(a, bound)  # clip and saturate: magnitudes above the bound count as the bound
    s = a.max() if scalar is None else torch.tensor(scalar, dtype=torch.float32)
    if g.numel() == 0 or s == 0:
        return torch.zeros_like(g)
    p = torch.minimum(a, s).double() / s.double()
    keep = uniforms(g.shape, generators) < p
    return torch.where(keep, torch.where(g < 0, -s, s), torch.zeros((), dtype=torch.float32))


def draw(g, *, seed, worker, tensor, step, steps, clip, c, scalar, naive_sigma=False):
    """The battery's draw function: float32 (steps, g.size), row j = the estimate at step `step + j`."""
    if clip not in ("none", "clip", "saturate"):
        raise ValueError(f"unknown clipping mode {clip!r}")
    t = torch.from_numpy(np.ascontiguousarray(g, dtype=np.float32)).reshape(-1)
    rows = [ternarize(t, scalar, row_generators(seed, worker, tensor, step + j), clip, c, naive_sigma)
            for j in range(steps)]
    return torch.stack(rows).numpy() if rows else np.zeros((0, t.numel()), np.float32)


def draw_naive_sigma(g, **key):
    """The same codec with sigma squared as it is (GRACE's code): 0 on 1e-30 data, inf on 1e30 data."""
    return draw(g, naive_sigma=True, **key)
