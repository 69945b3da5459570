"""terngrad.torch: PyTorch tensors in and out of the terngrad-bench codec, a DDP communication hook
(`terngrad.torch.hooks.terngrad_hook`) and live statistical verification of the gradients a run sends
(`terngrad.torch.LiveCheck`). docs/torch.md has the usage and the measured costs.

Tensors go to the C++ codec without a copy when they are CPU, float32 and contiguous (`as_numpy` takes a
`.numpy()` view of the tensor's own memory); anything else is refused with an error that says how to fix
it, the codec never converts silently: TypeError for another dtype or a non-tensor, ValueError for a
CUDA (or other non-CPU) tensor and for a non-contiguous one. Outputs are torch tensors that share the
memory of the arrays the codec returned (`torch.from_numpy`).

Needs PyTorch (Debian: `apt-get install python3-torch`, which scripts/setup.sh installs for /usr/bin/python3;
or `pip install torch`). The rest of the `terngrad` package imports without it.
"""
try:
    import torch as _torch
except ImportError as _e:  # pragma: no cover - exercised in the no-torch venv by tests/test_torch.py
    raise ImportError(
        "terngrad.torch needs PyTorch, which is not installed for this interpreter: install it with "
        "`apt-get install python3-torch` (Debian; then use /usr/bin/python3 or a venv made with "
        "--system-site-packages) or `pip install torch`. The rest of terngrad works without it."
    ) from _e

import numpy as _np

from .. import _core

__all__ = [
    "as_numpy",
    "encode",
    "encode_with_scalar",
    "tensor_scalar",
    "tensor_stats",
    "decode",
    "decode_trits",
    "aggregate",
    "payload_tensor",
    "LiveCheck",
    "LiveCheckFailed",
    "TernGradState",
    "terngrad_hook",
]

# A float_below that no tensor reaches: the whole tensor travels as float32 (as the C++ trainer does
# for tensors it does not quantize).
FLOAT_ALWAYS = _core.MAX_ELEMENTS + 1


def as_numpy(t, what="tensor"):
    """A NumPy float32 view of a CPU float32 contiguous torch tensor (same memory, no copy), flat.
    TypeError: not a tensor or not float32. ValueError: not on the CPU (e.g. CUDA), or not contiguous."""
    if not isinstance(t, _torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(
            f"{what} is on {t.device}: the terngrad codec reads CPU memory; move it with {what}.cpu() "
            "(a copy) or encode on the host")
    if t.dtype != _torch.float32:
        raise TypeError(f"{what} must have dtype torch.float32, got {t.dtype} (convert with {what}.float(); "
                        "the codec never converts silently)")
    if not t.is_contiguous():
        raise ValueError(f"{what} must be contiguous (read in place); pass {what}.contiguous() (a copy)")
    if t.is_sparse:
        raise ValueError(f"{what} is sparse; pass {what}.to_dense()")
    return t.detach().reshape(-1).numpy()


def _np_to_torch(a):
    return _torch.from_numpy(a)


def encode(t, **kwargs):
    """terngrad.encode on a torch tensor (read in place): the same bytes as the C++ codec for the same
    key (seed, worker, tensor, step) and options (clip, c, packing, float_below, codec)."""
    return _core.encode(as_numpy(t, "t"), **kwargs)


def encode_with_scalar(t, scalar, **kwargs):
    """terngrad.encode_with_scalar on a torch tensor: encode with an externally given (shared) scalar;
    stats= this tensor's tensor_stats (same clip, c) skips computing them again (the same bytes)."""
    return _core.encode_with_scalar(as_numpy(t, "t"), scalar, **kwargs)


def tensor_scalar(t, **kwargs):
    """terngrad.tensor_scalar on a torch tensor: its scalar s under the clipping rule."""
    return _core.tensor_scalar(as_numpy(t, "t"), **kwargs)


def tensor_stats(t, **kwargs):
    """terngrad.tensor_stats on a torch tensor: its scalar (.scalar) and clip bound (.bound) in one pass,
    for encode_with_scalar(t, s, stats=...)."""
    return _core.tensor_stats(as_numpy(t, "t"), **kwargs)


def decode(payload, codec="optimized"):
    """Decode a payload to (values, header): values a flat float32 torch tensor that owns the decoder's
    output (no copy)."""
    d = _core.decode(payload, codec=codec)
    return _np_to_torch(d.values), d.header


def decode_trits(payload, codec="optimized"):
    """The trits of a ternary payload as an int8 torch tensor (-1, 0, +1)."""
    return _np_to_torch(_core.decode_trits(payload, codec=codec))


def aggregate(payloads, codec="optimized"):
    """Exact integer aggregation of N payloads sharing one scalar: (mean, sums, scalar) with mean a float32
    torch tensor ((double)s * sum / N rounded to float, as the C++ trainer) and sums an int32 one."""
    a = _core.aggregate(list(payloads), codec=codec)
    return _np_to_torch(a.mean), _np_to_torch(a.sums), a.scalar


def payload_tensor(payload):
    """A payload (bytes) as a uint8 torch tensor, e.g. to send it with torch.distributed (one copy: torch
    tensors must own writable memory)."""
    return _torch.from_numpy(_np.frombuffer(payload, dtype=_np.uint8).copy())


from .live import LiveCheck, LiveCheckFailed  # noqa: E402
from .hooks import TernGradState, terngrad_hook  # noqa: E402
