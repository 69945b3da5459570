"""terngrad-bench: pytest suite of the Python bindings (module `terngrad`, python/src/bindings.cpp).
Run: ctest -L python, or PYTHONPATH=build/<preset>/python/package build/venv/bin/python -m pytest python/tests
Bytes are checked against codec/tests/data/golden_payloads.txt (written by scripts/make_golden.py)."""
import math
import pathlib
import struct

import numpy as np
import pytest

import terngrad as tg

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = REPO / "codec" / "tests" / "data" / "golden_payloads.txt"


def golden_cases():
    """Cases of the golden file: 'case NAME SEED WORKER TENSOR STEP CLIP C PACKING N', then
    'input <float32 bits as hex words>' and 'payload <hex>' (format in scripts/make_golden.py)."""
    cases, current = [], None
    for line in GOLDEN.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, rest = line.partition(" ")
        if head == "case":
            name, seed, worker, tensor, step, clip, c, packing, n = rest.split()
            current = dict(name=name, seed=int(seed), worker=int(worker), tensor=int(tensor),
                           step=int(step), clip=clip, c=float(c), packing=packing, n=int(n))
            cases.append(current)
        elif head == "input":
            words = [int(w, 16) for w in rest.split()]
            current["input"] = np.array(words, dtype=np.uint32).view(np.float32)
        elif head == "payload":
            current["payload"] = bytes.fromhex(rest.strip())
    for c in cases:
        if "input" not in c:  # an empty tensor has an empty input line
            c["input"] = np.zeros(0, dtype=np.float32)
    return cases


CASES = golden_cases()


def test_golden_file_was_read():
    assert len(CASES) >= 8
    assert all(len(c["input"]) == c["n"] and "payload" in c for c in CASES)


@pytest.mark.parametrize("codec", tg.CODECS)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_bytes_equal_golden_file(case, codec):
    key = {k: case[k] for k in ("seed", "worker", "tensor", "step", "clip", "c", "packing")}
    payload = tg.encode(case["input"], codec=codec, **key)
    assert payload.hex() == case["payload"].hex()
    # decoding gives scalar * trits with the trits of ternarize under the same key
    d = tg.decode(payload, codec=codec)
    s, trits = tg.ternarize(case["input"], seed=case["seed"], worker=case["worker"], tensor=case["tensor"],
                            step=case["step"], clip=case["clip"], c=case["c"], codec=codec)
    assert d.header.scalar == s and d.header.count == case["n"] and d.header.tensor == case["tensor"]
    assert d.header.packing == case["packing"]
    np.testing.assert_array_equal(tg.decode_trits(payload, codec=codec), trits)
    np.testing.assert_array_equal(d.values, (np.float32(s) * trits.astype(np.float32)))


def test_read_only_and_shaped_inputs_are_read_in_place():
    case = next(c for c in CASES if c["n"] == 4100)
    raw = case["input"].tobytes()
    ro = np.frombuffer(raw, dtype=np.float32)  # read-only view of a bytes object
    assert not ro.flags.writeable
    key = {k: case[k] for k in ("seed", "worker", "tensor", "step", "clip", "c", "packing")}
    assert tg.encode(ro, **key) == case["payload"]
    assert tg.encode(ro.reshape(41, 100), **key) == case["payload"]  # any C-contiguous shape reads flat


def test_payload_accepts_bytes_like_objects():
    case = CASES[0]
    p = case["payload"]
    for obj in (p, bytearray(p), memoryview(p), np.frombuffer(p, dtype=np.uint8)):
        np.testing.assert_array_equal(tg.decode(obj).values, tg.decode(p).values)
    assert tg.parse_header(bytearray(p)).count == case["n"]


def test_small_tensors_travel_as_float32():
    g = np.array([1.5, -2.25, 3.0], dtype=np.float32)
    p = tg.encode(g, float_below=4)
    assert len(p) == tg.HEADER_BYTES + 12
    d = tg.decode(p)
    assert d.header.packing == "float32" and d.header.scalar == 0.0
    np.testing.assert_array_equal(d.values, g)
    with pytest.raises(tg.CodecError) as e:
        tg.decode_trits(p)
    assert e.value.code == "bad_packing"


def test_layers_get_their_own_scalar_and_consecutive_tensor_ids():
    rng = np.random.default_rng(7)
    layers = [rng.normal(0, 1, 37).astype(np.float32), 100 * rng.normal(0, 1, 64).astype(np.float32),
              np.zeros(5, np.float32)]
    out = tg.encode_layers(layers, seed=9, step=4, tensor=3, packing="base3")
    assert len(out) == 3
    for i, (layer, p) in enumerate(zip(layers, out)):
        assert p == tg.encode(layer, seed=9, step=4, tensor=3 + i, packing="base3")
        h = tg.parse_header(p)
        assert h.tensor == 3 + i
        assert h.scalar == np.max(np.abs(layer))
    with pytest.raises(TypeError, match=r"layers\[1\]"):
        tg.encode_layers([layers[0], layers[1].astype(np.float64)])
    # one array is not a list of one-element layers (it returned 37 payloads)
    with pytest.raises(TypeError, match="got one array"):
        tg.encode_layers(layers[0])


def test_entropy_helpers_refuse_what_is_not_a_mask_or_a_gradient():
    assert tg.mask_entropy_bits(np.array([1, 0, -1, 0], np.int8)) == 1.5
    with pytest.raises(ValueError, match="element 1 is 5"):  # was 1.0
        tg.mask_entropy_bits(np.array([0, 5, 7, 1], np.int8))
    with pytest.raises(TypeError, match="integer array"):  # a gradient given by mistake: was -0.0
        tg.mask_entropy_bits(np.ones(4, np.float32))
    g = np.array([1.0, -1.0, 0.5], np.float32)
    assert tg.expected_mask_entropy_bits(g) == pytest.approx(tg.expected_mask_entropy_bits(g.astype(np.float64)))
    for bad in (np.inf, np.nan):  # was -0.0
        with pytest.raises(tg.NonFiniteError, match=r"g\[1\] is not finite"):
            tg.expected_mask_entropy_bits([1.0, bad])
    with pytest.raises(ValueError, match="scalar must be a finite number >= 0"):
        tg.expected_mask_entropy_bits(g, scalar=-1.0)


def test_shared_scalar_of_no_workers_is_an_error():
    with pytest.raises(ValueError, match="no worker scalars"):  # was 0.0, where aggregate([]) raised
        tg.shared_scalar([])


def test_shared_scalar_and_exact_aggregation():
    rng = np.random.default_rng(11)
    grads = [rng.normal(0, 1 + w, 1000).astype(np.float32) for w in range(4)]
    scalars = [tg.tensor_scalar(g) for g in grads]
    s = tg.shared_scalar(scalars)
    assert s == max(float(np.max(np.abs(g))) for g in grads)
    payloads = [tg.encode_with_scalar(g, s, seed=5, worker=w, step=2) for w, g in enumerate(grads)]
    agg = tg.aggregate(payloads)
    assert agg.workers == 4 and agg.scalar == np.float32(s)
    sums = np.sum([tg.decode_trits(p).astype(np.int32) for p in payloads], axis=0)
    np.testing.assert_array_equal(agg.sums, sums)
    np.testing.assert_array_equal(agg.mean, (np.float64(np.float32(s)) * sums / 4).astype(np.float32))
    # a worker with its own scalar cannot be aggregated exactly
    with pytest.raises(tg.CodecError) as e:
        tg.aggregate(payloads[:3] + [tg.encode(grads[0], worker=3)])
    assert e.value.code == "scalar_mismatch" and "shared scalar" in str(e.value)
    # another element count or another tensor is named as such, not as a scalar to share
    with pytest.raises(tg.CodecError, match="500 elements.*same number of elements"):
        tg.aggregate([payloads[0], tg.encode_with_scalar(grads[1][:500], s, worker=1, step=2)])
    with pytest.raises(tg.CodecError, match="different tensors"):
        tg.aggregate([payloads[0], tg.encode_with_scalar(grads[1], s, worker=1, tensor=3, step=2)])
    with pytest.raises(tg.CodecError, match="shared scalar"):
        tg.encode_with_scalar(grads[0], float("nan"))


def test_tensor_stats_and_encode_with_them_give_the_same_bytes():
    rng = np.random.default_rng(12)
    g = (rng.standard_t(3, 30011) * 1e-3).astype(np.float32)
    for clip, c in (("none", 2.5), ("clip", 2.5), ("saturate", 0.5)):
        for codec in ("reference", "optimized", "optimized-t1"):
            st = tg.tensor_stats(g, clip=clip, c=c, tensor=5, codec=codec)
            assert isinstance(st, tg.TensorStats) and st.count == g.size and st.clip == clip and st.c == c
            assert st.scalar == tg.tensor_scalar(g, clip=clip, c=c, codec="reference")
            assert st.bound == tg.clip_bound(g, clip=clip, c=c, codec="reference")
            assert st.max_abs == np.float32(np.max(np.abs(g)))
            assert "TensorStats(count=30011" in repr(st)
            for packing, float_below in (("2bit", 0), ("base3", 0), ("2bit", 40000)):
                kw = dict(seed=3, worker=1, tensor=5, step=8, clip=clip, c=c, packing=packing,
                          float_below=float_below, codec=codec)
                s = 1.5 * st.scalar
                assert tg.encode_with_scalar(g, s, stats=st, **kw) == tg.encode_with_scalar(g, s, **kw)
                assert tg.encode_with_scalar(g, s, stats=None, **kw) == tg.encode_with_scalar(g, s, **kw)
                a = tg.encode_with_scalar(g, s, stats=st, as_array=True, **kw)
                assert a.dtype == np.uint8 and a.ndim == 1 and a.flags.writeable
                assert a.tobytes() == tg.encode_with_scalar(g, s, **kw)
    a = tg.encode(g, seed=2, clip="clip", as_array=True)
    assert isinstance(a, np.ndarray) and a.tobytes() == tg.encode(g, seed=2, clip="clip")
    st = tg.tensor_stats(g, clip="clip")
    for bad, kw in ((g[:-1], {"clip": "clip"}), (g, {"clip": "none"}), (g, {"clip": "clip", "c": 3.0})):
        with pytest.raises(tg.CodecError, match="tensor_stats") as e:
            tg.encode_with_scalar(bad, st.scalar, stats=st, **kw)
        assert e.value.code == "invalid_argument"
    with pytest.raises(TypeError):
        tg.encode_with_scalar(g, st.scalar, clip="clip", stats=1.0)
    bad = g.copy()
    bad[17] = np.nan
    with pytest.raises(tg.NonFiniteError) as e:
        tg.tensor_stats(bad, clip="clip", tensor=4)
    assert e.value.index == 17 and e.value.tensor == 4


def test_ternarize_steps_rows_are_single_steps():
    g = np.linspace(-1, 1, 101, dtype=np.float32)
    s, many = tg.ternarize_steps(g, 5, first_step=10, seed=3, worker=2, clip="clip", c=1.5)
    assert many.shape == (5, 101) and many.dtype == np.int8
    for j in range(5):
        s1, t = tg.ternarize(g, seed=3, worker=2, step=10 + j, clip="clip", c=1.5)
        assert s1 == s
        np.testing.assert_array_equal(many[j], t)


def test_identities_match_an_independent_float64_computation():
    rng = np.random.default_rng(3)
    g = rng.standard_t(3, 5000).astype(np.float32)
    a = np.abs(g.astype(np.float64))
    assert tg.variance_identity(g) == pytest.approx(a.max() * a.sum() - (a * a).sum(), rel=1e-12)
    assert tg.variance_for_scalar(g, 2 * a.max()) == pytest.approx((a * (2 * a.max() - a)).sum(), rel=1e-12)
    with pytest.raises(ValueError, match="at least max"):
        tg.variance_for_scalar(g, 0.5 * a.max())
    bound = tg.clip_bound(g, clip="clip", c=2.5)
    # the codec sums in its canonical order, numpy pairwise: equal to float32 rounding
    assert bound == pytest.approx(2.5 * g.astype(np.float64).std(), rel=1e-6)
    assert tg.clip_bound(g, clip="none") == math.inf
    assert tg.tensor_scalar(g, clip="clip") == min(bound, float(a.max()))
    assert tg.tensor_scalar(g, clip="saturate") == tg.tensor_scalar(g, clip="clip")


def test_crc_body_sizes_and_philox_stream():
    assert tg.crc32c(b"123456789") == 0xE3069283
    assert [tg.body_bytes("2bit", n) for n in (0, 1, 4, 5)] == [0, 1, 1, 2]
    assert [tg.body_bytes("base3", n) for n in (0, 1, 5, 6)] == [0, 1, 1, 2]
    assert tg.body_bytes("float32", 3) == 12
    # published Philox4x32-10 answer for counter 0, key 0: the first block of seed 0, worker 0, tensor 0, step 0
    np.testing.assert_array_equal(tg.philox_uniforms(4), np.array([0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8],
                                                                  dtype=np.uint32))


# ---- bad input: clear exceptions, nothing produced ----------------------------------------------

def test_wrong_dtype_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="float32.*float64"):
        tg.encode(np.zeros(4, dtype=np.float64))
    with pytest.raises(TypeError, match="float32.*int32"):
        tg.ternarize(np.zeros(4, dtype=np.int32))
    with pytest.raises(TypeError, match="NumPy float32 array, got list"):
        tg.encode([1.0, 2.0])
    # a byte order other than the machine's is named (was: "got numpy.ndarray")
    with pytest.raises(TypeError, match=r"must be little-endian \(native\) float32, got >f4"):
        tg.encode(np.zeros(4, dtype=">f4"))
    with pytest.raises(TypeError, match="bytes"):
        tg.decode(12)
    with pytest.raises(TypeError, match="uint8"):
        tg.decode(np.zeros(40, dtype=np.float32))


def test_non_contiguous_input_is_refused_not_copied():
    g = np.arange(10, dtype=np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        tg.encode(g[::2])
    with pytest.raises(ValueError, match="C-contiguous"):
        tg.encode(np.ones((4, 4), dtype=np.float32).T)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_gradients_name_tensor_and_index(bad):
    g = np.ones(100, dtype=np.float32)
    g[37] = bad
    g[60] = bad
    for fn in (lambda: tg.encode(g, tensor=6), lambda: tg.ternarize(g, tensor=6),
               lambda: tg.encode_with_scalar(g, 1.0, tensor=6)):
        with pytest.raises(tg.NonFiniteError) as e:
            fn()
        assert isinstance(e.value, ValueError) and isinstance(e.value, tg.CodecError)
        assert e.value.code == "non_finite" and e.value.index == 37 and e.value.tensor == 6
    with pytest.raises(tg.NonFiniteError) as e:
        tg.encode_layers([np.ones(3, np.float32), g], tensor=2)
    assert e.value.tensor == 3 and e.value.index == 37
    with pytest.raises(tg.NonFiniteError):
        tg.variance_identity(g)


def test_bad_options_are_value_errors():
    g = np.ones(8, dtype=np.float32)
    with pytest.raises(tg.CodecError, match="clipping mode 'clamp'") as e:
        tg.encode(g, clip="clamp")
    assert e.value.code == "invalid_argument"
    with pytest.raises(tg.CodecError, match="clip factor"):
        tg.encode(g, clip="clip", c=0.0)
    with pytest.raises(tg.CodecError, match="packing"):
        tg.encode(g, packing="float32")
    with pytest.raises(ValueError, match="unknown codec"):
        tg.encode(g, codec="cuda9")
    # seeds are unsigned 64-bit, worker/tensor/step 32-bit: the argument named, not nanobind's generic TypeError
    with pytest.raises(ValueError, match=r"encode\(\): seed must be an integer in \[0, 2\^64\), got -1"):
        tg.encode(g, seed=-1)
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\^64\), got 18446744073709551616"):
        tg.encode(g, 2**64)  # positional too
    with pytest.raises(ValueError, match=r"encode_with_scalar\(\): worker must be an integer in \[0, 2\^32\)"):
        tg.encode_with_scalar(g, 1.0, worker=2**32)
    # a scalar beyond float32 is named as given (it was converted to inf first: "shared scalar inf ...")
    with pytest.raises(ValueError, match=r"scalar 1e\+39 is beyond float32's range"):
        tg.encode_with_scalar(g, 1e39)
    with pytest.raises(TypeError, match=r"encode\(\): step must be an integer, got float 1.5"):
        tg.encode(g, step=1.5)
    with pytest.raises(ValueError, match=r"ternarize_steps\(\): draws must be an integer in \[0, 2\^32\)"):
        tg.ternarize_steps(g, -2)
    with pytest.raises(ValueError, match=r"philox_uniforms\(\): tensor must be an integer"):
        tg.philox_uniforms(4, tensor=-1)
    assert tg.encode(g, seed=np.uint64(2**64 - 1)) == tg.encode(g, seed=2**64 - 1)  # NumPy integers stay accepted
    # a bool where a number is meant (nanobind reads True as 1 and 1.0): refused, keyword or positional
    with pytest.raises(TypeError, match=r"encode\(\): seed must be an integer, got bool True"):
        tg.encode(g, seed=True)
    with pytest.raises(TypeError, match=r"encode\(\): seed must be an integer, got bool False"):
        tg.encode(g, False)
    with pytest.raises(TypeError, match=r"encode\(\): c must be a number, got bool True"):
        tg.encode(g, clip="clip", c=True)
    with pytest.raises(TypeError, match=r"philox_uniforms\(\): n must be an integer, got bool True"):
        tg.philox_uniforms(True)
    assert tg.encode(g, as_array=True) is not None  # a bool argument stays a bool
    with pytest.raises(TypeError, match="incompatible function arguments"):
        tg.encode(g, clip=5)  # not an integer argument: nanobind's message, unchanged


def _with_body(payload, body):
    """A payload with a new body and both checksums recomputed, so only the body is wrong."""
    header = bytearray(payload[:32])
    header[24:28] = struct.pack("<I", tg.crc32c(bytes(body)))
    header[28:32] = struct.pack("<I", tg.crc32c(bytes(header[:28])))
    return bytes(header) + bytes(body)


def test_malformed_payloads_raise_the_matching_code():
    g = np.linspace(-1, 1, 33, dtype=np.float32)
    p2 = tg.encode(g, seed=1)
    p3 = tg.encode(g, seed=1, packing="base3")
    flipped_body = bytearray(p2)
    flipped_body[40] ^= 0x01
    bad_magic = bytearray(p2)
    bad_magic[0] = ord("X")
    invalid_2bit = bytearray(p2[32:])
    invalid_2bit[0] = 0xFF
    invalid_base3 = bytearray(p3[32:])
    invalid_base3[0] = 243
    cases = {
        "truncated": p2[:20],
        "bad_magic": bytes(bad_magic),
        "crc_mismatch": bytes(flipped_body),
        "length_mismatch": p2 + b"\x00",
        "invalid_code": _with_body(p2, invalid_2bit),
    }
    for code, payload in cases.items():
        for fn in (tg.decode, tg.decode_trits):
            with pytest.raises(tg.CodecError) as e:
                fn(payload)
            assert e.value.code == code, (code, str(e.value))
            assert isinstance(e.value, ValueError) and str(e.value)
    with pytest.raises(tg.CodecError) as e:
        tg.decode(_with_body(p3, invalid_base3))
    assert e.value.code == "invalid_code"
    with pytest.raises(tg.CodecError) as e:
        tg.aggregate([p2, cases["crc_mismatch"]])
    assert e.value.code == "crc_mismatch"
    with pytest.raises(tg.CodecError, match="zero payloads"):
        tg.aggregate([])


# ---- one statistical check of the bindings end to end -------------------------------------------

def test_monte_carlo_squared_error_matches_the_variance_identity():
    """S = sum over D draws j and d elements k of (s t_jk - g_k)^2 - E_k, with E_k = |g_k| (s - |g_k|), is a
    sum of D*d independent zero-mean terms (under the identity) bounded by b = s^2 in absolute value, with
    known total variance W = D sum_k p_k (1 - p_k) ((s - |g_k|)^2 - g_k^2)^2, p_k = |g_k| / s (docs/statistics.md).
    Bernstein: P(|S| >= t) <= 2 exp(-t^2 / (2 (W + b t / 3))). With L = ln(2 / alpha) the threshold
    t_a = b L / 3 + sqrt((b L / 3)^2 + 2 W L) gives a false-fail probability <= alpha = 1e-6 (no normal
    approximation). Power: a true mean shift of D * delta >= t_a + t_b (t_b the one-sided threshold at
    beta = 1e-3) is detected with probability >= 1 - beta; for this g the detectable relative error
    delta / V is 0.41% (a scalar 2% too large moves S by 17 thresholds), and the test asserts it stays
    below 2% so that the power statement cannot silently degrade."""
    rng = np.random.default_rng(20171204)
    g = rng.normal(0, 1, 2000).astype(np.float32)
    draws = 4000
    s, trits = tg.ternarize_steps(g, draws, seed=99)
    s = float(s)
    g64 = g.astype(np.float64)
    a = np.abs(g64)
    err = s * trits.astype(np.float64) - g64
    v = tg.variance_identity(g)
    S = float((err * err).sum()) - draws * v
    p = a / s
    W = draws * float((p * (1 - p) * ((s - a) ** 2 - a ** 2) ** 2).sum())
    b = s * s

    def bernstein(prob, sides):
        L = math.log(sides / prob)
        return b * L / 3 + math.sqrt((b * L / 3) ** 2 + 2 * W * L)

    t_alpha = bernstein(1e-6, 2)
    detectable = (t_alpha + bernstein(1e-3, 1)) / draws / v
    assert detectable < 0.02, f"power statement does not hold: detectable relative error {detectable:.4f}"
    assert abs(S) <= t_alpha, (f"mean {S / draws + v:.6g} vs identity {v:.6g}: |S| = {abs(S):.4g} > "
                               f"threshold {t_alpha:.4g} (seed 99)")


def test_empty_tensors_and_tuples():
    empty = np.zeros(0, dtype=np.float32)
    p = tg.encode(empty)
    assert len(p) == tg.HEADER_BYTES and tg.parse_header(p).count == 0
    assert tg.decode(p).values.size == 0 and tg.decode_trits(p).size == 0
    s, trits = tg.ternarize_steps(empty, 3)
    assert s == 0.0 and trits.shape == (3, 0)
    g = np.arange(1, 6, dtype=np.float32)
    assert tg.encode_layers((g, empty)) == tg.encode_layers([g, empty])
    assert tg.aggregate((p, p)).workers == 2
