"""terngrad.torch.hooks: TernGrad as a PyTorch DistributedDataParallel communication hook.

    from terngrad.torch.hooks import TernGradState, terngrad_hook
    state = TernGradState(seed=1, clip="clip", packing="2bit", shared_scalar=True, float_below=1024)
    model = torch.nn.parallel.DistributedDataParallel(net)
    model.register_comm_hook(state, terngrad_hook)

Per bucket, on every rank (the rule of the C++ trainer, experiments/train/src/exchange.cpp, with the
bucket in the place of the layer):

1. s_r = tensor_scalar(g_r) under the clipping rule; with shared_scalar, one all_reduce(MAX) of that float
   gives s = max_r s_r (else every rank keeps its own). The hook takes s_r from tensor_stats, which also
   keeps the rank's clip bound for step 2;
2. payload_r = encode_with_scalar(g_r, s, key = (seed, rank, bucket index, step), stats = step 1's) (encode
   without shared_scalar), the project's C++ codec, so the bytes equal `terngrad.encode*` for that key;
   with the statistics of step 1 it reads g_r once more, not twice. Buckets with fewer than float_below
   elements travel as float32 payloads;
3. all_gather of the payloads (equal sizes on every rank: they depend only on the size and options);
4. shared scalar: mean = aggregate(payloads).mean, exact integer sums of the trits, (double)s * sum / N
   rounded to float; otherwise (own scalars, float32 buckets): sum of the decoded payloads in rank order
   in double, divided by N. Every rank computes the same bits from the same bytes.

The hook returns a torch Future holding the mean (a new tensor: the bucket buffer is not written). The step
counter advances after the last bucket of a backward pass; `state.step` can be set (or state_dict()/
load_state_dict() used) to resume the key sequence.
"""
import math
import numbers
import struct

import numpy as np
import torch
import torch.distributed as dist

from .. import _core
from .._args import whole
from . import FLOAT_ALWAYS, as_numpy


def _whole(name, value, bits):
    """value as an int in [0, 2^bits), or a ValueError/TypeError naming the argument (a bool refused)."""
    return whole("TernGradState", name, value, bits)


def codec_encoder(g, scalar, *, seed, worker, tensor, step, clip, c, packing, codec, stats=None, as_array=False):
    """The encoder the hook uses by default: the project's codec. g: float32 NumPy view; scalar: the
    shared scalar, or None for the tensor's own; stats: this rank's tensor_stats of g (same clip, c), if
    already computed, so that the encode does not compute them again (the same bytes). Returns the
    payload: bytes, or with as_array a writable NumPy uint8 array that owns it (no copy)."""
    if scalar is None:
        return _core.encode(g, seed=seed, worker=worker, tensor=tensor, step=step, clip=clip, c=c,
                            packing=packing, codec=codec, as_array=as_array)
    return _core.encode_with_scalar(g, scalar, seed=seed, worker=worker, tensor=tensor, step=step, clip=clip,
                                    c=c, packing=packing, codec=codec, stats=stats, as_array=as_array)


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


class TernGradState:
    """State of terngrad_hook.

    seed: the user seed of the stream key (seed, rank, bucket index, step).
    clip, c: clipping mode ('none', 'clip', 'saturate') and its c (sigma multiples).
    packing: '2bit' or 'base3'.
    shared_scalar: one max over the ranks per bucket (exact integer aggregation); False: own scalars.
    float_below: buckets with fewer elements travel as float32 (as the C++ trainer's --float-below).
    step: the step of the next backward pass (set it to resume a run's key sequence).
    codec: the codec name (terngrad.CODECS), e.g. 'optimized-avx2-t1' for one thread.
    process_group: the group to exchange over (None: the default group).
    live_check: a terngrad.torch.LiveCheck, run inside the hook on the gradient it is about to send.
    encoder: the encode function (default codec_encoder); replaceable for experiments and tests. A
      replacement is called as encoder(g, scalar, seed=, worker=, tensor=, step=, clip=, c=, packing=,
      codec=) and returns bytes; only codec_encoder also gets the rank's statistics (stats=) and returns a
      NumPy array the hook sends without a copy (as_array=True).
    record: keep, per (step, bucket), the input gradient, the gathered payloads and the result (tests).

    Counters: bytes_sent (payload bytes this rank sent), float_bytes (what float32 would have been),
    steps_done, buckets (per-step list of (index, elements, payload bytes, ternary)).
    """

    def __init__(self, seed=0, clip="none", c=2.5, packing="2bit", shared_scalar=True, float_below=1024,
                 step=0, codec="optimized", process_group=None, live_check=None, encoder=None, record=False):
        if clip not in _core.CLIP_MODES:
            raise ValueError(f"clip must be one of {_core.CLIP_MODES}, got {clip!r}")
        if packing not in _core.PACKINGS:
            raise ValueError(f"packing must be one of {_core.PACKINGS}, got {packing!r}")
        # checked here, not at the first backward pass; a fraction is refused, not truncated by int()
        seed, step, float_below = (_whole(name, v, bits) for name, v, bits in
                                   (("seed", seed, 64), ("step", step, 32), ("float_below", float_below, 64)))
        if not (isinstance(c, numbers.Real) and not isinstance(c, bool) and math.isfinite(c) and c > 0):
            raise ValueError(f"TernGradState: c must be a finite number > 0, got {c!r:.40}")
        self.seed = seed
        self.clip = clip
        self.c = float(c)
        self.packing = packing
        self.shared_scalar = bool(shared_scalar)
        self.float_below = float_below
        self.step = step
        self.codec = codec
        self.process_group = process_group
        self.live_check = live_check
        self.encoder = encoder or codec_encoder
        self.record = [] if record else None
        self.bytes_sent = 0
        self.float_bytes = 0
        self.steps_done = 0
        self.buckets = []

    def state_dict(self):
        """What a checkpoint needs to continue the key sequence (and the byte counters)."""
        return {"seed": self.seed, "step": self.step, "bytes_sent": self.bytes_sent,
                "float_bytes": self.float_bytes, "steps_done": self.steps_done}

    def load_state_dict(self, d):
        self.seed = int(d["seed"])
        self.step = int(d["step"])
        self.bytes_sent = int(d.get("bytes_sent", 0))
        self.float_bytes = int(d.get("float_bytes", 0))
        self.steps_done = int(d.get("steps_done", 0))

    def compression(self):
        """float32 bytes / payload bytes sent so far (headers included)."""
        return self.float_bytes / self.bytes_sent if self.bytes_sent else float("nan")

    def _encode(self, g, scalar, worker, tensor, step, stats=None):
        extra = {"stats": stats, "as_array": True} if self.encoder is codec_encoder else {}
        return self.encoder(g, scalar, seed=self.seed, worker=worker, tensor=tensor, step=step, clip=self.clip,
                            c=self.c, packing=self.packing, codec=self.codec, **extra)


def _mean_in_order(payloads, codec):
    """Sum of the decoded payloads in rank order, in double, divided by N (the C++ trainer's float rule)."""
    total = None
    for p in payloads:
        v = _core.decode(p, codec=codec).values.astype(np.float64)
        total = v if total is None else total + v
    return (total / len(payloads)).astype(np.float32)


def combine(state, payloads, ternary, scalar):
    """Every rank's result from the gathered payloads (a list of bytes-likes in rank order): float32 NumPy."""
    if ternary and state.shared_scalar:
        a = _core.aggregate(payloads, codec=state.codec)
        if np.float32(a.scalar).tobytes() != np.float32(scalar).tobytes():
            raise RuntimeError(f"payload scalar {a.scalar} differs from the shared scalar {scalar}")
        return a.mean
    return _mean_in_order(payloads, state.codec)


def _all_reduce_max(s, group):
    """The shared scalar: all_reduce(MAX) of this rank's float32 scalar over the group."""
    t = torch.tensor([s], dtype=torch.float32)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return float(t.item())


def encode_bucket(state, g, index, rank, step, group=None, reduce_max=None):
    """Steps 1-2 of the hook for one bucket: (payload, ternary, scalar or None), the payload bytes or (the
    default encoder) a NumPy uint8 array that owns them. Collective when the scalar is shared:
    reduce_max(s_r) gives max_r s_r, by default one all_reduce MAX of one float32 over `group` (a
    benchmark of one rank passes the identity)."""
    x = as_numpy(g, "bucket")
    n = x.size
    ternary = n >= state.float_below and n > 0
    if not ternary:
        p = _core.encode(x, seed=state.seed, worker=rank, tensor=index, step=step, packing=state.packing,
                         float_below=FLOAT_ALWAYS, codec=state.codec, as_array=True)
        return p, False, None
    scalar = None
    stats = None
    if state.shared_scalar:
        # One pass for this rank's scalar and clip bound; the encode below reuses the bound.
        stats = _core.tensor_stats(x, clip=state.clip, c=state.c, tensor=index, codec=state.codec)
        s = reduce_max(stats.scalar) if reduce_max is not None else _all_reduce_max(stats.scalar, group)
        scalar = _f32(s)
    return state._encode(x, scalar, rank, index, step, stats), True, scalar


def _send_tensor(payload):
    """The payload as a uint8 torch tensor to send: the array itself when the codec returned one (no
    copy), else a copy of the bytes (torch tensors must own writable memory)."""
    if isinstance(payload, np.ndarray) and payload.dtype == np.uint8 and payload.flags.writeable:
        return torch.from_numpy(payload)
    return torch.from_numpy(np.frombuffer(payload, dtype=np.uint8).copy())


def terngrad_hook(state, bucket):
    """DDP communication hook: TernGrad-encode the bucket with the project's codec, all_gather the
    payloads, aggregate exactly; returns a torch.futures.Future of the averaged gradient."""
    group = state.process_group
    rank = dist.get_rank(group)
    g = bucket.buffer()
    index = bucket.index()
    step = state.step
    payload, ternary, scalar = encode_bucket(state, g, index, rank, step, group)
    world = dist.get_world_size(group)
    mine = _send_tensor(payload)
    outs = [torch.empty_like(mine) for _ in range(world)]
    work = dist.all_gather(outs, mine, group=group, async_op=True)

    state.bytes_sent += len(payload)
    state.float_bytes += 4 * g.numel()
    if not state.buckets or state.buckets[-1][0] != step:
        state.buckets.append((step, []))
    state.buckets[-1][1].append((index, g.numel(), len(payload), ternary))
    del state.buckets[:-8]
    record = None
    if state.record is not None:
        record = {"step": step, "bucket": index, "rank": rank, "grad": g.detach().clone(), "scalar": scalar,
                  "ternary": ternary, "payload": bytes(payload)}
        state.record.append(record)

    # Overlaps the exchange: the hook does not write the bucket buffer, so g stays valid.
    if state.live_check is not None:
        state.live_check.maybe_check(state, g, index, rank, step, scalar if ternary else None, ternary)

    if bucket.is_last():
        state.step = (state.step + 1) % (2**32)
        state.steps_done += 1

    def finish(fut):
        fut.wait()
        gathered = [o.numpy() for o in outs]
        mean = torch.from_numpy(combine(state, gathered, ternary, scalar)).view_as(g)
        if record is not None:
            record["payloads"] = [bytes(o.numpy().tobytes()) for o in outs]
            record["out"] = mean.clone()
        return mean

    return work.get_future().then(finish)
