#!/usr/bin/env python3
"""terngrad-bench: a PyTorch TernGrad codec with its own random stream, as a draw function for the
battery (terngrad.verify.run, terngrad.testing.assert_terngrad; examples/test_codecs.py).

    s = max|g| (or the shared scalar given), p_k = min(|g_k|, s) / s, g~_k = s sign(g_k) b_k, b_k ~ Bernoulli(p_k)

Each row (one step) draws its uniforms from a torch.Generator seeded with a hash of (seed, worker,
tensor, step), so the estimate is a function of those four and independent across them. It does not
follow the spec's Philox stream (codec/include/tg/philox.hpp), so its bytes cannot equal the reference
codec's, and it implements no clipping: run the battery with supports=["none", "shared-scalar"] (every
statistical check applies; `cross`, which compares bytes, and `clipping.*` are reported as skipped).

    python -m terngrad verify --impl python:torch_codec:draw --profile quick --supports none,shared-scalar
"""
import hashlib

import numpy as np
import torch


def row_generator(seed, worker, tensor, step):
    """A torch.Generator for one step of one (seed, worker, tensor) stream: 63 bits of BLAKE2b of the key."""
    key = hashlib.blake2b(b"".join(int(x).to_bytes(8, "little") for x in (seed, worker, tensor, step)),
                          digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(key, "little") >> 1)


def ternarize(g, scalar=None, generator=None):
    """One TernGrad estimate of the float32 tensor g (torch ops): s * sign(g) * Bernoulli(min(|g|, s) / s)."""
    a = g.abs()
    s = a.max() if scalar is None else torch.tensor(scalar, dtype=torch.float32)
    if g.numel() == 0 or s == 0:
        return torch.zeros_like(g)
    p = torch.minimum(a, s).double() / s.double()
    keep = torch.rand(g.shape, generator=generator, dtype=torch.float64) < p
    return torch.where(keep, torch.where(g < 0, -s, s), torch.zeros((), dtype=torch.float32))


def draw(g, *, seed, worker, tensor, step, steps, clip, c, scalar):
    """The battery's draw function: float32 (steps, g.size), row j = the estimate at step `step + j`."""
    if clip != "none":
        raise ValueError(f"torch_codec implements no clipping (asked for clip={clip!r})")
    t = torch.from_numpy(np.ascontiguousarray(g, dtype=np.float32)).reshape(-1)
    rows = [ternarize(t, scalar, row_generator(seed, worker, tensor, step + j)) for j in range(steps)]
    return torch.stack(rows).numpy() if rows else np.zeros((0, t.numel()), np.float32)
