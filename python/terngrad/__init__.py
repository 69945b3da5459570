"""terngrad: Python bindings of the terngrad-bench TernGrad codec (Wen et al., NeurIPS 2017).

Install: `pip install ./python` from a clone (or the sdist of `python -m build --sdist python/`); in the
repository the project's build (target tg_python) puts the package in build/<preset>/python/package:
    PYTHONPATH=build/default/python/package build/venv/bin/python -c "import terngrad"
`python -m terngrad verify ...` runs the battery as the C++ program's `terngrad verify` does.
Every function takes NumPy float32 arrays without copying them and gives the C++ codec's bytes.
"""
import math as _math

from ._version import __version__  # noqa: F401  (equal to the top-level CMakeLists.txt's VERSION)

from ._core import (  # noqa: F401  (re-exported API)
    CLIP_MODES,
    CODECS,
    FORMAT_VERSION,
    HEADER_BYTES,
    MAX_ELEMENTS,
    PACKINGS,
    Aggregate,
    CodecError,
    Decoded,
    Header,
    NonFiniteError,
    TensorStats,
    aggregate,
    body_bytes,
    clip_bound,
    cpu_has_avx2,
    crc32c,
    decode,
    decode_trits,
    encode,
    encode_layers,
    encode_with_scalar,
    parse_header,
    philox_uniforms,
    shared_scalar,
    tensor_scalar,
    tensor_stats,
    ternarize,
    ternarize_steps,
    variance_for_scalar,
    variance_identity,
)

from ._args import explained as _explained

# Every binding names an out-of-type seed, worker, tensor, step or count, and a non-integer where it takes
# an integer (nanobind's own TypeError names no argument): terngrad._args.
for _name in [n for n, f in globals().items()
              if callable(f) and not isinstance(f, type) and type(f).__module__ == "nanobind"]:
    globals()[_name] = _explained(globals()[_name])
del _name


def mask_entropy_bits(trits):
    """Empirical entropy, in bits per element, of the symbols {-1, 0, +1} of a trit array: the
    size an ideal entropy coder would approach for this mask (2bit spends 2, base3 spends 1.6)."""
    import numpy as np

    t = np.asarray(trits)
    if not np.issubdtype(t.dtype, np.integer):
        raise TypeError(f"mask_entropy_bits: trits must be an integer array (int8 from decode_trits), got dtype {t.dtype}")
    t = t.ravel()
    if t.size == 0:
        return 0.0
    bad = np.flatnonzero((t < -1) | (t > 1))
    if bad.size:
        raise ValueError(f"mask_entropy_bits: trits must be -1, 0 or +1; element {int(bad[0])} is {int(t[bad[0]])}")
    counts = np.array([np.count_nonzero(t == v) for v in (-1, 0, 1)], dtype=np.float64)
    p = counts[counts > 0] / t.size
    return float(-(p * np.log2(p)).sum())


def expected_mask_entropy_bits(g, scalar=None):
    """Expected entropy per element of TernGrad's mask when element k is nonzero with probability
    p_k = |g_k| / s: the entropy of the per-element distribution mixed over elements (the alphabet
    {-, 0, +} with P(+) = mean of p_k over positive g_k, ...). scalar (s) defaults to max|g|; g is an array of
    numbers (float32, float64, integers). NonFiniteError for a NaN or infinite element; ValueError for a scalar that is
    negative or not finite."""
    import numpy as np

    g = np.asarray(g)
    if not (np.issubdtype(g.dtype, np.floating) or np.issubdtype(g.dtype, np.integer)):
        raise TypeError(f"expected_mask_entropy_bits: g must be an array of numbers, got dtype {g.dtype}")
    g = g.astype(np.float64).ravel()
    bad = np.flatnonzero(~np.isfinite(g))
    if bad.size:
        raise NonFiniteError(f"expected_mask_entropy_bits: g[{int(bad[0])}] is not finite ({g[bad[0]]})")
    if g.size == 0:
        return 0.0
    s = float(np.max(np.abs(g))) if scalar is None else float(scalar)
    if not np.isfinite(s) or s < 0.0:
        raise ValueError(f"expected_mask_entropy_bits: scalar must be a finite number >= 0, got {scalar}")
    if s == 0.0:
        return 0.0
    p = np.minimum(np.abs(g) / s, 1.0)
    plus = p[g > 0].sum() / g.size
    minus = p[g < 0].sum() / g.size
    probs = np.array([plus, minus, 1.0 - plus - minus])
    probs = probs[probs > 0]
    return float(-(probs * np.log2(probs)).sum())


def bits_per_element(packing):
    """Bits per element of a body layout: 2 for '2bit', 8/5 = 1.6 for 'base3', 32 for 'float32'
    (log2(3) = 1.585 is the floor for any fixed-length ternary code)."""
    return {"2bit": 2.0, "base3": 1.6, "float32": 32.0}[packing]


LOG2_3 = _math.log2(3.0)

__all__ = [name for name in dir() if not name.startswith("_")]
