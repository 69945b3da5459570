#!/usr/bin/env python3
"""terngrad-bench: a NumPy implementation of the TernGrad codec speaking the battery's external
protocol (docs/battery.md), vectorized; it reproduces the reference codec's trits bit for bit.

Run by the battery:  terngrad verify --impl exec:'build/venv/bin/python examples/numpy_codec.py'
In-process (faster):  terngrad.verify.run(numpy_codec.draw)   (examples/test_codecs.py, with pytest)
Protocol:  numpy_codec.py --input G.npy --output OUT.npy --seed S --worker W --tensor T --step K
                          --steps N --clip none|clip|saturate --c C [--scalar S]
           numpy_codec.py --serve   (persistent: the same arguments, one request per line of stdin;
                          terngrad verify --impl serve:'build/venv/bin/python examples/numpy_codec.py')
G.npy is float32 of shape (d,); OUT.npy gets float32 of shape (N, d), row j = s * trits at step K + j.

The spec it follows (codec/include/tg/*.hpp): Philox4x32-10 keyed {seed lo, seed hi} with counter
{i/4, step, tensor, worker}, element i using word i % 4 (philox.hpp); keep iff
(double)u < (double)min(|g|, cap) * (2^32 / s) (element.hpp); s = max|g|, or under clipping
min(max|g|, float(c * sigma)) with sigma summed in the canonical order of reduce.hpp (codec.hpp);
with --scalar, s is the given shared scalar and cap = min(float(c * sigma), s).
"""
import argparse
import os
import shlex
import sys

import numpy as np

M32 = np.uint64(0xFFFFFFFF)
PHILOX_M0 = np.uint64(0xD2511F53)
PHILOX_M1 = np.uint64(0xCD9E8D57)
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
CHUNK = 2048  # reduce.hpp: kReduceChunk
LANES = 8     # reduce.hpp: kReduceLanes


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on uint64 arrays holding 32-bit counter words; k0, k1 are Python ints."""
    c0, c1, c2, c3 = (np.asarray(x, dtype=np.uint64) for x in (c0, c1, c2, c3))
    for _ in range(10):
        p0 = PHILOX_M0 * c0
        p1 = PHILOX_M1 * c2
        hi0, lo0 = p0 >> np.uint64(32), p0 & M32
        hi1, lo1 = p1 >> np.uint64(32), p1 & M32
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0
        k0 = (k0 + PHILOX_W0) & 0xFFFFFFFF
        k1 = (k1 + PHILOX_W1) & 0xFFFFFFFF
    return c0, c1, c2, c3


def uniforms(seed, worker, tensor, step0, steps, d):
    """u[j, i]: the 32-bit word of element i at step step0 + j, as uint64, shape (steps, d)."""
    blocks = (d + 3) // 4
    b = np.arange(blocks, dtype=np.uint64)[None, :]
    s = (np.uint64(step0) + np.arange(steps, dtype=np.uint64))[:, None]
    shape = (steps, blocks)
    words = philox4x32_10(np.broadcast_to(b, shape), np.broadcast_to(s, shape),
                          np.full(shape, tensor, dtype=np.uint64), np.full(shape, worker, dtype=np.uint64),
                          seed & 0xFFFFFFFF, seed >> 32)
    return np.stack(words, axis=2).reshape(steps, blocks * 4)[:, :d]


def canonical_sum(terms):
    """reduce.hpp: chunks of 2048, 8 lanes summed sequentially from 0.0, tree per chunk, chunks in order."""
    n = terms.shape[0]
    if n == 0:
        return 0.0
    chunks = (n + CHUNK - 1) // CHUNK
    padded = np.zeros(chunks * CHUNK, dtype=np.float64)  # adding +0.0 leaves a sum unchanged
    padded[:n] = terms
    lanes = np.cumsum(padded.reshape(chunks, CHUNK // LANES, LANES), axis=1)[:, -1, :]
    l = lanes
    chunk_totals = ((l[:, 0] + l[:, 1]) + (l[:, 2] + l[:, 3])) + ((l[:, 4] + l[:, 5]) + (l[:, 6] + l[:, 7]))
    return float(np.cumsum(chunk_totals)[-1])


def clip_bound(g, clip, c):
    if clip == "none" or g.size == 0:
        return np.float32(np.inf)
    x = g.astype(np.float64)
    mean = canonical_sum(x) / x.size
    dev = x - mean
    var = canonical_sum(dev * dev) / x.size
    with np.errstate(over="ignore"):
        return np.float32(c * np.sqrt(var))


def rule(g, clip, c, scalar):
    """(s, cap) of the spec: own scalar, or a given shared scalar."""
    bound = clip_bound(g, clip, c)
    if scalar is None:
        m = np.float32(np.max(np.abs(g))) if g.size else np.float32(0.0)
        s = min(m, bound)
        return np.float32(s), np.float32(s)
    s = np.float32(scalar)
    return s, np.float32(min(bound, s))


def ternarize(g, seed, worker, tensor, step0, steps, clip, c, scalar=None):
    """Rows of s * trits, float32, shape (steps, d)."""
    s, cap = rule(g, clip, c, scalar)
    scale = 4294967296.0 / np.float64(s) if s > 0 else 0.0
    a = np.minimum(np.abs(g), cap).astype(np.float64) * scale
    u = uniforms(seed, worker, tensor, step0, steps, g.size).astype(np.float64)
    keep = u < a[None, :]
    sign = np.where(g < 0, np.float32(-1.0), np.float32(1.0))
    return np.where(keep, sign[None, :] * s, np.float32(0.0)).astype(np.float32)


def draw(g, *, seed, worker, tensor, step, steps, clip, c, scalar):
    """The battery's draw function (terngrad.verify.run, terngrad.testing.assert_terngrad)."""
    return ternarize(np.asarray(g, dtype=np.float32).ravel(), seed, worker, tensor, step, steps, clip, c, scalar)


def self_check():
    """Published Philox4x32-10 known answers (Random123 kat_vectors)."""
    kats = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
            ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
            ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
             (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for ctr, key, want in kats:
        got = tuple(int(w) for w in philox4x32_10(*ctr, *key))
        if got != want:
            raise SystemExit("numpy_codec: Philox known answer failed")


def handle(argv):
    """One request of the protocol (the same arguments in both forms): read G.npy, write OUT.npy."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--worker", type=int, default=0)
    p.add_argument("--tensor", type=int, default=0)
    p.add_argument("--step", type=int, default=0)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--clip", choices=["none", "clip", "saturate"], default="none")
    p.add_argument("--c", type=float, default=2.5)
    p.add_argument("--scalar", type=float, default=None)
    a = p.parse_args(argv)
    g = np.load(a.input, allow_pickle=False)
    if g.dtype != np.float32 or g.ndim != 1:
        raise SystemExit(f"numpy_codec: input must be float32 of shape (d,), got {g.dtype} {g.shape}")
    if not np.all(np.isfinite(g)):
        bad = int(np.flatnonzero(~np.isfinite(g))[0])
        raise SystemExit(f"numpy_codec: gradient element {bad} is not finite")
    if not (a.c > 0 and np.isfinite(a.c)) or a.steps < 1 or not (0 <= a.seed < 2**64):
        raise SystemExit("numpy_codec: --c must be finite and positive, --steps >= 1, 0 <= --seed < 2^64")
    out = ternarize(g, a.seed, a.worker, a.tensor, a.step, a.steps, a.clip, a.c, a.scalar)
    tmp = a.output + ".tmp.npy"
    np.save(tmp, out)
    os.replace(tmp, a.output)


def serve():
    """The persistent form (`--impl serve:CMD`): announce the protocol, then answer one request per
    line of stdin (the one-shot arguments) with a line "ok" or "error MESSAGE" on stdout."""
    print("terngrad-serve 1", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            handle(shlex.split(line))
            print("ok", flush=True)
        except SystemExit as e:  # argparse and the checks above
            print("error", str(e).replace("\n", " ") or "bad request", flush=True)
        except Exception as e:  # noqa: BLE001 (any failure is reported, the process lives on)
            print("error", repr(e).replace("\n", " "), flush=True)
    return 0


def main(argv):
    self_check()
    if argv == ["--serve"]:
        return serve()
    handle(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
