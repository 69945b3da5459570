"""terngrad-bench: pytest suite of terngrad.verify, the battery's Python bindings
(python/src/verify_bindings.cpp). Run: ctest -L python, or
PYTHONPATH=build/<preset>/python/package build/venv/bin/python -m pytest python/tests/test_verify.py

Error rates: every battery call below that is expected to pass is a correct implementation under the
battery's own budget (alpha_total 1e-6 per call unless stated), with fixed seeds, so the outcomes are
deterministic; a fresh seed would fail a correct codec with probability <= 1e-6 per call. The calls
expected to fail are broken codecs whose defect is many times the 'detectable' column of the row
that catches them (asserted where the size is stated)."""
import importlib.util
import json
import math
import pathlib
import re

import numpy as np
import pytest

import terngrad as tg
import terngrad.verify as tv

REPO = pathlib.Path(__file__).resolve().parents[2]


def numpy_example():
    """examples/numpy_codec.py: an independent pure-NumPy implementation of the spec."""
    spec = importlib.util.spec_from_file_location("numpy_codec", REPO / "examples" / "numpy_codec.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def gaussian(d, seed=1):
    return np.random.default_rng(seed).standard_normal(d).astype(np.float32)


def rows_of(result, check):
    return [r for r in result.rows if r.check == check]


# ---- check_samples / check_values on draws made elsewhere ---------------------------------------------


def test_reference_draws_pass_with_the_stated_budget():
    g = gaussian(4096)
    s, trits = tg.ternarize_steps(g, 256, seed=3)
    r = tv.check_samples(g, trits, np.full(256, s, np.float32))
    assert r.passed, r.table()
    # 4096 elements x 256 draws: per coordinate, dispersion, pooled, drift; four bins of p (pooled and drift),
    # variance; blocks of 8 (offsets 0 and 4) and of 64, lags 64, 512 and d/2; sure keeps; near drops
    assert r.impl == "samples" and r.decisions == 21
    assert math.isclose(r.alpha_each * r.decisions, 1e-6)
    bins = [f"{check}/samples/p in {b}" for check in ("unbiased-by-p", "unbiased-drift-by-p")
            for b in ("[2^-10,2^-6)", "[2^-6,1/8)", "[1/8,1/2)", "[1/2,7/8)")]
    assert [row.id for row in r.rows] == [
        "structure/samples", "unbiased/samples", "unbiased-dispersion/samples", "unbiased-pooled/samples",
        "unbiased-drift/samples", *bins,
        "variance/samples", "independence/samples/blocks of 8", "independence/samples/blocks of 8 at +4",
        "independence/samples/blocks of 64", "independence/samples/lag 64", "independence/samples/lag 512",
        "independence/samples/lag d/2", "sure-keeps/all jobs", "near-drops/all jobs"]
    assert r.rows[0].kind == "exact" and all(row.kind == "stat" for row in r.rows[1:])
    assert all(math.isclose(row.alpha, 1e-6 / 21) for row in r.rows[1:])
    assert all(0 <= row.p for row in r.rows[1:])
    assert all(math.isfinite(row.z) for row in r.rows[2:-2])  # the Bernstein rows are standardized
    assert r.rows[-2].statistic.startswith("0 misses in")  # the maximum, kept in every draw
    assert "samples given by the caller" in r.table()
    doc = json.loads(r.to_json())
    assert doc["pass"] is True and doc["runs"][0]["decisions"] == 21
    no_ind = tv.check_samples(g, trits, np.full(256, s, np.float32), independence=False, alpha=1e-3)
    assert no_ind.decisions == 15 and math.isclose(no_ind.alpha_each, 1e-3 / 15)


def test_check_values_reads_decoded_estimates_like_check_samples():
    g = gaussian(3000, seed=2)
    payloads = [tg.encode(g, seed=9, step=j, clip="clip", c=2.5) for j in range(64)]
    values = np.stack([tg.decode(p).values for p in payloads])
    by_values = tv.check_values(g, values, clip="clip", c=2.5)
    s = tg.decode(payloads[0]).scalar
    trits = np.sign(values).astype(np.int8)
    by_trits = tv.check_samples(g, trits, np.full(64, s, np.float32), clip="clip", c=2.5)
    assert by_values.passed, by_values.table()
    assert [r.statistic for r in by_values.rows] == [r.statistic for r in by_trits.rows]
    # Checked against the wrong clipping rule, the scalar is not the spec's: an exact failure.
    wrong = tv.check_values(g, values, clip="none")
    assert "structure" in wrong.failed_checks
    assert "scalar" in rows_of(wrong, "structure")[0].detail


def test_an_all_zero_row_carries_no_scalar():
    # A correct float32 codec may miss a sure keep (at most 2^-22 per keep); on a small tensor whose other
    # elements are dropped, the row is then all zero, and read from its values its scalar is 0. That is no
    # structure violation ("scalar 0, but s at step 0" failed the exact row); the miss counts in sure-keeps.
    g = np.array([1.7294966, 0.01, -0.02, 0.005, 0.03, -0.01], np.float32)
    values = np.stack([tg.decode(tg.encode(g, seed=1, step=j)).values for j in range(128)])
    values[64] = 0.0
    r = tv.check_values(g, values)
    assert r.passed, r.table()
    # a codec that sends nothing in many rows misses far more sure keeps than a float32 rounding allows
    values[:16] = 0.0
    bad = tv.check_values(g, values)
    assert "sure-keeps" in bad.failed_checks, bad.table()


@pytest.mark.parametrize("scalar", ["a", b"x", {}, np.array(["a"]), True])
def test_a_shared_scalar_that_is_not_a_number_is_a_type_error(scalar):
    # (was RuntimeError "std::bad_cast"; a bool read as 1)
    g = gaussian(64, seed=4)
    with pytest.raises(TypeError, match="scalar must be a number or None, got"):
        tv.check_values(g, np.zeros((8, 64), np.float32), scalar=scalar)
    with pytest.raises(TypeError, match=r"scalar\[0\] must be a number or None"):
        tv.check_values([g, g], [np.zeros((8, 64), np.float32)] * 2, scalar=[scalar, 1.0])


@pytest.mark.parametrize("scalar, message", [(1e-46, "below the smallest positive float32"),
                                             (1e39, "above the largest float32")])
def test_a_shared_scalar_outside_float32_is_named(scalar, message):
    # (1e-46 was read as 0: every row failed as if the codec had ignored the shared scalar)
    g = gaussian(64, seed=4)
    with pytest.raises(tg.CodecError, match=re.escape(f"scalar {scalar:g} is {message}")):
        tv.check_values(g, np.zeros((8, 64), np.float32), scalar=scalar)


def test_a_correct_third_party_codec_with_its_own_random_numbers_passes():
    """A TernGrad written with NumPy's generator (not Philox): different bytes, same distribution."""
    g = gaussian(4096, seed=4)
    rng = np.random.default_rng(123)
    s = np.float32(np.max(np.abs(g)))
    keep = rng.random((256, g.size)) < (np.abs(g) / s)[None, :]
    values = np.where(keep, np.sign(g)[None, :] * s, 0).astype(np.float32)
    r = tv.check_values(g, values)
    assert r.passed, r.table()


def broken_values(kind, g, draws, rng):
    s = np.float32(np.max(np.abs(g)))
    p = np.abs(g) / s
    if kind == "deterministic":  # rounds instead of sampling
        keep = np.broadcast_to(p > 0.5, (draws, g.size))
    elif kind == "biased":  # keeps 10% too rarely
        keep = rng.random((draws, g.size)) < 0.9 * p
    elif kind == "sign-drift":  # keeps positives 10% too rarely and negatives 10% too often: a drift
        keep = rng.random((draws, g.size)) < np.minimum(1, np.where(g > 0, 0.9, 1.1) * p)[None, :]
    elif kind == "shared-uniform":  # one uniform per block of 4 neighbours
        u = np.repeat(rng.random((draws, g.size // 4)), 4, axis=1)
        keep = u < p[None, :]
    elif kind == "l2-scalar":
        s = np.float32(np.linalg.norm(g))
        keep = rng.random((draws, g.size)) < (np.abs(g) / s)[None, :]
    elif kind == "sign-error":
        keep = rng.random((draws, g.size)) < p[None, :]
        return np.where(keep, s, 0).astype(np.float32)
    elif kind == "half-levels":  # small values come out at s/2
        keep = rng.random((draws, g.size)) < p[None, :]
        return np.where(keep, np.sign(g) * np.where(p < 0.1, s / 2, s), 0).astype(np.float32)
    return np.where(keep, np.sign(g)[None, :] * s, 0).astype(np.float32)


@pytest.mark.parametrize("kind,check", [
    ("deterministic", "unbiased"),
    ("biased", "unbiased"),
    ("sign-drift", "unbiased-drift"),
    ("shared-uniform", "independence"),
    ("l2-scalar", "structure"),
    ("sign-error", "structure"),
    ("half-levels", "structure"),
])
def test_broken_codecs_fail_the_check_that_targets_them(kind, check):
    g = gaussian(4096, seed=5)
    r = tv.check_values(g, broken_values(kind, g, 256, np.random.default_rng(7)))
    assert check in r.failed_checks, r.table()
    if kind == "biased":
        # the pooled row's power: it detects a mean bias of this size; a 10% shortfall of keeps is
        # a bias of 0.1 * mean(p) s, far above it
        pooled = rows_of(r, "unbiased-pooled")[0]
        detectable = float(pooled.detectable.split(">=")[1].split()[0])
        mean_p = float(np.mean(np.abs(g)) / np.max(np.abs(g)))
        assert 0.1 * mean_p > 5 * detectable  # 6.5x here
        assert not pooled.passed
    if kind == "half-levels":
        assert "not in {-s, 0, +s}" in rows_of(r, "structure")[0].detail
    if kind == "sign-drift":
        # the two errors cancel in the keep rate summed with the signs (that row passes on these draws),
        # and add up in the drift: every coordinate's mean moves by about -0.1 p s
        assert rows_of(r, "unbiased-pooled")[0].passed, r.table()
        drift = rows_of(r, "unbiased-drift")[0]
        detectable = float(drift.detectable.split(">=")[1].split()[0])
        mean_p = float(np.mean(np.abs(g)) / np.max(np.abs(g)))
        assert 0.1 * mean_p > 3 * detectable


def test_layers_with_a_shared_scalar():
    a, b = gaussian(2000, seed=6), 0.01 * gaussian(3000, seed=7)
    shared = tg.shared_scalar(np.array([tg.tensor_scalar(a), tg.tensor_scalar(b)], np.float32))
    vals = []
    for t, g in enumerate((a, b)):
        vals.append(np.stack([tg.decode(tg.encode_with_scalar(g, shared, seed=1, tensor=t, step=j)).values
                              for j in range(64)]))
    r = tv.check_values([a, b], vals, scalar=shared)
    assert r.passed, r.table()
    assert r.rows[0].detail.startswith("64 steps x 5000 elements")
    assert tv.check_values([a, b], vals, scalar=[shared, shared]).passed
    # Checked as if each layer had its own scalar, layer b's scalar is wrong.
    assert "structure" in tv.check_values([a, b], vals).failed_checks


def test_bad_samples_are_named():
    g = gaussian(100)
    s, trits = tg.ternarize_steps(g, 8, seed=1)
    sc = np.full(8, s, np.float32)
    with pytest.raises(TypeError, match="trits must have dtype int8, got int32"):
        tv.check_samples(g, trits.astype(np.int32), sc)
    with pytest.raises(TypeError, match="scalars must have dtype float32, got float64"):
        tv.check_samples(g, trits, sc.astype(np.float64))
    with pytest.raises(TypeError, match="g must have dtype float32"):
        tv.check_values(g.astype(np.float64), (s * trits).astype(np.float32))
    with pytest.raises(tg.CodecError, match=r"trits has shape \(8, 99\), expected \(8, 100\)"):
        tv.check_samples(g, trits[:, :99].copy(), sc)
    with pytest.raises(tg.CodecError, match="at least 2"):
        tv.check_samples(g, trits[:1].copy(), sc[:1].copy())
    # too few scalars: scalars is named, not trits, whose shape is right (was: "trits has shape (8, 100), expected (2, 100)")
    with pytest.raises(tg.CodecError, match=r"scalars has 2 values for the 8 draws of trits \(one scalar per draw\)"):
        tv.check_samples(g, trits, sc[:2].copy())
    # a big-endian array is named as such (was: "must be a NumPy float32 array, got numpy.ndarray")
    with pytest.raises(TypeError, match=r"g must be little-endian \(native\) float32, got >f4"):
        tv.check_samples(g.astype(">f4"), trits, sc)
    with pytest.raises(tg.CodecError, match=r"values must have shape \(draws, 100\)"):
        tv.check_values(g, (s * trits[0]).astype(np.float32))
    # draws and elements swapped: the expected shape says (draws, 100), not the array's own first dimension
    with pytest.raises(tg.CodecError, match=r"values has shape \(100, 8\), expected \(draws, 100\) \(draws x elements\): "
                                            r"transposed\?"):
        tv.check_values(g, np.ascontiguousarray((s * trits).astype(np.float32).T))
    # a transposed view (not contiguous either) is named for its shape first, then a non-contiguous array
    with pytest.raises(tg.CodecError, match=r"values has shape \(100, 8\), .*transposed\?"):
        tv.check_values(g, (s * trits).astype(np.float32).T)
    with pytest.raises(tg.CodecError, match=r"trits has shape \(100, 8\), expected"):
        tv.check_samples(g, trits.T, sc)
    with pytest.raises(ValueError, match="values must be C-contiguous"):
        tv.check_values(g, np.asfortranarray((s * trits).astype(np.float32)))
    with pytest.raises(tg.CodecError, match=r"g is one array, values a list of 2: give one of each per tensor \(a list "
                                            r"of arrays is a layer-wise gradient"):
        tv.check_values(g, [(s * trits).astype(np.float32)] * 2)
    # rows as a Python list where one 2-D array was meant: the way out is named
    with pytest.raises(tg.CodecError, match=r"g is one array, values a list of 8: .*numpy\.asarray\(rows, numpy\.float32\)"):
        tv.check_values(g, (s * trits).astype(np.float32).tolist())
    with pytest.raises(tg.CodecError, match=r"g is a list of 2, trits one array, scalars one array: give one of each"):
        tv.check_samples([g, g], trits, sc)
    with pytest.raises(TypeError, match=r"check_values\(\): alpha must be a number, got bool True"):
        tv.check_values(g, (s * trits).astype(np.float32), alpha=True)
    bad = g.copy()
    bad[17] = np.inf
    with pytest.raises(tg.NonFiniteError, match=r"^g: element 17 of the gradient is \+inf \(the checks need a finite "
                                               r"gradient\)$") as e:
        tv.check_samples(bad, trits, sc)
    assert (e.value.index, e.value.tensor, e.value.code) == (17, 0, "non_finite")
    bad[17], bad[5] = g[17], np.nan
    with pytest.raises(tg.NonFiniteError, match=r"^g\[1\]: element 5 of the gradient is NaN") as e:
        tv.check_values([g, bad], [(s * trits).astype(np.float32)] * 2)
    assert (e.value.index, e.value.tensor) == (5, 1)
    nan_values = (s * trits).astype(np.float32)
    nan_values[3, 4] = np.nan
    with pytest.raises(tg.CodecError, match="values row 3 element 4 is not finite"):
        tv.check_values(g, nan_values)
    with pytest.raises(tg.CodecError, match="clipping mode"):
        tv.check_samples(g, trits, sc, clip="clamp")
    with pytest.raises(tg.CodecError, match="alpha"):
        tv.check_samples(g, trits, sc, alpha=0.0)
    with pytest.raises(tg.CodecError, match="scalar: 1 entries for 2 tensors"):
        tv.check_samples([g, g], [trits, trits], [sc, sc], scalar=[s])


# ---- the whole battery: named implementations and Python functions --------------------------------


def test_run_on_a_named_implementation_and_a_mutant():
    ok = tv.run("optimized", profile="quick")
    assert ok.passed, ok.table()
    assert ok.profile == "quick" and ok.decisions > 50
    assert math.isclose(ok.alpha_each * ok.decisions, ok.alpha_total)
    assert {r.check.split(".")[0] for r in ok.rows} >= set(tv.CHECKS) - {"independence"}
    bad = tv.run("mutant:uniform8", profile="quick", skip=["cross"])
    assert not bad.passed and "unbiased-pooled" in bad.failed_checks


def test_run_on_the_numpy_example_in_process_matches_the_reference_bytes():
    """The pure-NumPy codec of examples/ through a Python function: every check passes, including
    the cross-implementation row (its trits equal the reference codec's)."""
    nc = numpy_example()

    def draw(g, *, seed, worker, tensor, step, steps, clip, c, scalar):
        return nc.ternarize(g, seed, worker, tensor, step, steps, clip, c, scalar)

    r = tv.run(draw, profile="quick", name="numpy-example")
    assert r.impl == "numpy-example"
    assert r.passed, r.table()
    cross = rows_of(r, "cross")
    assert len(cross) == 1 and cross[0].family == "vs reference" and cross[0].passed


def test_run_on_a_function_with_its_own_random_numbers():
    """Statistically correct but not Philox: the statistical checks pass, the byte comparison fails. Row j is
    keyed by step + j (NumPy's generator seeded with the whole key), as the protocol requires."""
    nc = numpy_example()

    def draw_keyed(g, *, seed, worker, tensor, step, steps, clip, c, scalar, row_seed):
        s, cap = nc.rule(g, clip, c, scalar)
        p = np.minimum(np.abs(g), cap) / s if s > 0 else np.zeros(g.size)
        u = np.stack([np.random.default_rng([seed, worker, tensor, row_seed(step, j)]).random(g.size)
                      for j in range(steps)]) if steps else np.zeros((0, g.size))
        trits = np.where(u < p[None, :], np.where(g < 0, -1, 1)[None, :], 0).astype(np.int8)
        return trits, np.full(steps, s, np.float32)

    def draw(g, **key):
        return draw_keyed(g, row_seed=lambda step, j: step + j, **key)

    r = tv.run(draw, profile="quick")
    assert r.failed_checks == ["cross"], r.table()

    # Seeded once per request instead (row j from the request's generator): step 1 asked alone is not row 1
    # of a request for steps 0..1, and the structure check says so.
    def per_request(g, **key):
        return draw_keyed(g, row_seed=lambda step, j: step * 1000003 + j * 7 + 1, **key)

    r = tv.run(per_request, profile="quick", skip=["streams", "collision", "clipping", "layerwise", "aggregate", "cross"])
    assert "structure" in r.failed_checks and "step 1 drawn alone differs" in r.table()

    # Fresh randomness on every call (a framework's global generator, as GRACE draws): the same key gives other
    # bytes. Declared with reproducible=False it passes; everything but the same-key comparisons still applies.
    rng = np.random.default_rng(5)

    def unseeded(g, *, seed, worker, tensor, step, steps, clip, c, scalar):
        s, cap = nc.rule(g, clip, c, scalar)
        p = np.minimum(np.abs(g), cap) / s if s > 0 else np.zeros(g.size)
        u = rng.random((steps, g.size))
        trits = np.where(u < p[None, :], np.where(g < 0, -1, 1)[None, :], 0).astype(np.int8)
        return trits, np.full(steps, s, np.float32)

    few = ["streams", "collision", "clipping", "layerwise", "aggregate"]
    r = tv.run(unseeded, profile="quick", skip=few)
    assert "structure" in r.failed_checks and "again with the same key" in r.table()
    r = tv.run(unseeded, profile="quick", skip=few, reproducible=False, name="my-codec")
    assert r.passed, r.table()
    # the reproduce line is the call, naming the function (not the report name, which no command takes) and the flag
    assert (f"reproduce: terngrad.verify.run({__name__}.{unseeded.__qualname__}, profile='quick', seed=20171204, "
            f"skip='{','.join(sorted(few))}'.split(','), reproducible=False)") in r.summary(), r.summary()


def test_compare_names_and_functions_bit_for_bit():
    nc = numpy_example()

    def draw(g, *, seed, worker, tensor, step, steps, clip, c, scalar):
        return nc.ternarize(g, seed, worker, tensor, step, steps, clip, c, scalar)

    same = tv.compare("reference", draw, d=300)
    assert same.identical, same.table()
    assert same.payloads == 0 and same.trits > 0      # a function has no payloads to compare
    codecs = tv.compare("reference", "optimized", d=300)
    assert codecs.identical and codecs.payloads == 2 * (len(codecs.cases) - 1) + 2 * 27  # and 27 keys in one case
    assert codecs.cases[-1].family == "keys"
    assert {k.mode for k in codecs.cases} == {"none", "clip", "saturate", "none+shared", "clip+shared", "saturate+shared"}

    def off_by_one_step(g, *, seed, worker, tensor, step, steps, clip, c, scalar):
        return nc.ternarize(g, seed, worker, tensor, step + 1, steps, clip, c, scalar)

    diff = tv.compare("reference", off_by_one_step, d=300, stop_at_first=True)
    assert not diff.identical and len(diff.cases) == 1
    assert "trit" in diff.first_difference.difference
    assert "verdict: DIFFERENT" in diff.table()
    assert json.loads(diff.to_json())["identical"] is False
    # a draw() result must have one row per step, as an external program's file must (a flat array was accepted)
    def flat(g, **key):
        return draw(g, **key).ravel()

    with pytest.raises(tg.CodecError, match=r"draw\(\) output has shape \(600,\), expected \(2, 300\) \(one row per step\)"):
        tv.compare("reference", flat, d=300)

    # a trit outside -1, 0, +1 is named as output not of the form {-s, 0, +s} (it read as a trit difference)
    def trit_two(g, *, seed, worker, tensor, step, steps, clip, c, scalar):
        values = nc.ternarize(g, seed, worker, tensor, step, steps, clip, c, scalar)
        s = np.abs(values).max(axis=1).astype(np.float32)
        trits = np.sign(values).astype(np.int8)
        trits[0, np.flatnonzero(trits[0] == 0)[0]] = 2
        return trits, s

    two = tv.compare(trit_two, "reference", d=300, stop_at_first=True)
    assert "output not of the form {-s, 0, +s} (A): draw() trits row 0 element" in two.first_difference.difference
    assert "is 2 (trits are -1, 0 or +1)" in two.first_difference.difference
    # the command line's bounds and its --exec-timeout
    with pytest.raises(tg.CodecError, match=r"steps must be in \[1, 1024\], as --draws, got 1025"):
        tv.compare("reference", "optimized", steps=1025)
    with pytest.raises(tg.CodecError, match=r"d must be in \[1, 67108864\], as --elements"):
        tv.compare("reference", "optimized", d=2**26 + 1)
    with pytest.raises(tg.CodecError, match="listed twice"):
        tv.compare("reference", "optimized", d=300, clip=["none", "none"])
    assert tv.compare("reference", "optimized", d=300, exec_timeout=5.0).identical
    # an out-of-type seed, d or steps is named (nanobind's own TypeError names no argument)
    with pytest.raises(ValueError, match=r"compare\(\): d must be an integer in \[0, 2\^64\), got -5"):
        tv.compare("reference", "optimized", d=-5)
    with pytest.raises(ValueError, match=r"run\(\): seed must be an integer in \[0, 2\^64\), got -1"):
        tv.run("optimized", profile="quick", seed=-1)
    with pytest.raises(TypeError, match=r"clopper_pearson\(\): k must be an integer, got float 2.5"):
        tv.clopper_pearson(10, 2.5, 0.05)  # an int argument outside the key table: its form is named too
    # an unknown keyword, and a list of names given as one string, are named (not the binding's signature)
    with pytest.raises(TypeError, match=r"run\(\): unexpected keyword argument 'suport' \(its arguments: impl, "):
        tv.run("optimized", profile="quick", suport=["none"])
    with pytest.raises(TypeError, match=r"run\(\): supports must be a list of names, e.g. supports=\['none', "
                                        r"'spec-stream'\], not the string 'none,spec-stream'"):
        tv.run("optimized", profile="quick", supports="none,spec-stream")


def test_run_reports_what_a_broken_function_returns():
    def wrong_shape(g, *, steps, **_):
        return np.zeros((steps, g.size + 1), np.float32)

    def wrong_dtype(g, *, steps, **_):
        return np.zeros((steps, g.size), np.float64)

    def raises(g, **_):
        raise ZeroDivisionError("inside the codec")

    with pytest.raises(tg.CodecError, match=r"draw\(\) output has shape"):
        tv.run(wrong_shape)
    with pytest.raises(TypeError, match=r"draw\(\) output must have dtype float32, got float64"):
        tv.run(wrong_dtype)
    def transposed(g, *, steps, **_):
        return np.zeros((steps, g.size), np.float32).T

    def triple(g, *, steps, **_):
        return np.zeros((steps, g.size), np.int8), np.ones(steps, np.float32), None

    with pytest.raises(ZeroDivisionError, match="inside the codec"):
        tv.run(raises)
    # a transposed answer is named for its shape (it is not contiguous either); a tuple for its length
    with pytest.raises(tg.CodecError, match=r"draw\(\) output has shape \(\d+, \d+\), expected .*transposed\?"):
        tv.run(transposed)
    with pytest.raises(tg.CodecError, match=r"draw\(\) returned a tuple of 3 items: .*\(trits, scalars\)"):
        tv.run(triple)
    with pytest.raises(TypeError, match="impl must be a name"):
        tv.run(42)
    with pytest.raises(tg.CodecError, match="unknown --impl"):
        tv.run("fast")
    with pytest.raises(tg.CodecError, match="unknown profile 'slow'"):
        tv.run("reference", profile="slow")
    with pytest.raises(tg.CodecError, match="unknown check 'speed'"):
        tv.run("reference", skip=["speed"])
    with pytest.raises(tv.Unavailable, match="cuda"):
        tv.run("cuda")


def test_a_non_finite_output_names_the_gradient_and_the_request():
    """A scalar that overflows (float16 holds at most 65504) shows in the gradient's range; the request's keyword
    arguments call the function again by hand."""
    def half_scalar(g, *, steps, **_):
        with np.errstate(over="ignore"):
            s = np.float32(np.float16(np.max(np.abs(g))))
        return np.where(np.arange(steps)[:, None] >= 0, np.sign(g)[None, :] * s, 0).astype(np.float32)

    def half_scalars(g, *, steps, **_):
        with np.errstate(over="ignore"):
            s = np.float32(np.float16(np.max(np.abs(g))))
        return np.tile(np.sign(g).astype(np.int8), (steps, 1)), np.full(steps, s, np.float32)

    for fn, what in ((half_scalar, r"draw\(\) output row 0 element \d+ is not finite \([+-]inf\)"),
                     (half_scalars, r"draw\(\) scalar of row 0 is not finite \(inf\)")):
        with pytest.raises(tg.CodecError) as e:
            tv.run(fn, profile="quick")
        msg = str(e.value)
        assert re.search(what, msg), msg
        assert re.search(r"\(the request's gradient: \d+ elements, nonzero \|g\| from \S+ to \S+e\+\d+\); "
                         r"request: seed=\d+, worker=\d+, tensor=\d+, step=\d+, steps=\d+, clip='\w+', c=", msg), msg


def test_a_signal_during_an_exec_run_stops_the_program_and_cleans_up(tmp_path, monkeypatch):
    import os
    import signal
    import sys
    import threading
    import time

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    before = signal.getsignal(signal.SIGTERM)
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
    start = time.monotonic()
    with pytest.raises(tv.Interrupted, match="signal 15"):
        tv.run(f"exec:{sys.executable} -c 'import time; time.sleep(30)'")
    assert time.monotonic() - start < 15      # the sleeping program was killed, not waited for
    assert list(tmp_path.iterdir()) == []     # the battery's temporary folder is gone
    assert signal.getsignal(signal.SIGTERM) == before


def test_ctrl_c_stops_a_long_run_of_a_named_implementation():
    """The full profile takes minutes; a SIGINT half a second in must end it within seconds."""
    import os
    import signal
    import threading
    import time

    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        tv.run("optimized", profile="full")
    assert time.monotonic() - start < 30


# ---- the statistics layer -------------------------------------------------------------------------


def test_clopper_pearson_and_bernstein_closed_forms():
    # k = 0: the upper end solves (1 - p)^n = alpha / 2
    lo, hi = tv.clopper_pearson(10, 0, 0.05)
    assert lo == 0.0 and math.isclose(hi, 1 - 0.025 ** (1 / 10), rel_tol=1e-12)
    lo, hi = tv.clopper_pearson(10, 10, 0.05)
    assert hi == 1.0 and math.isclose(lo, 0.025 ** (1 / 10), rel_tol=1e-12)
    # Bernstein: x = bL/3 + sqrt((bL/3)^2 + 2 V L), L = ln(2 / alpha)
    V, b, a = 50.0, 2.0, 1e-6
    L = math.log(2 / a)
    assert math.isclose(tv.bernstein_threshold(V, b, a), b * L / 3 + math.sqrt((b * L / 3) ** 2 + 2 * V * L),
                        rel_tol=1e-12)
    with pytest.raises(ValueError):
        tv.clopper_pearson(3, 4, 0.05)
    with pytest.raises(ValueError):
        tv.bernstein_threshold(1.0, 1.0, 1.5)


# ---- summaries, JUnit, capabilities, and the test helper (terngrad.testing) ----------------------------


def test_summary_is_short_and_says_how_to_reproduce():
    bad = tv.run("mutant:sign-error", profile="quick", skip=["cross"])
    text = bad.summary()
    assert not bad.passed and text.startswith("terngrad verify: FAIL on mutant:sign-error")
    assert len(text.splitlines()) <= 15  # at most 12 rows, the verdict, "... and N more", the command
    assert "reproduce: terngrad verify --impl 'mutant:sign-error' --profile quick --seed 20171204 --skip cross" in text
    ok = tv.run("optimized", profile="quick")
    assert ok.summary().startswith("terngrad verify: PASS") and "0 of" in ok.summary()
    assert ok.to_junit().count("<testcase ") == len(ok.rows)


def test_capabilities_plan_only_what_applies():
    assert set(tv.CAPABILITIES) == {"none", "clip", "saturate", "shared-scalar", "spec-stream"}
    assert "f32-sigma" in tv.VARIANTS
    r = tv.run("optimized", profile="quick", supports=["clip", "spec-stream"])
    assert r.passed, r.summary()
    skipped = {row.check for row in r.rows if row.kind == "skipped"}
    assert skipped == {"layerwise", "aggregate"}  # both need a shared scalar
    assert {"independence", "streams", "collision"} <= {row.check for row in r.rows if row.kind == "stat"}
    with pytest.raises(ValueError):
        tv.run("optimized", profile="quick", supports=["shared-scalar"])  # no clipping mode at all


def test_assert_terngrad_raises_a_short_assertion(tmp_path):
    from terngrad.testing import TerngradFailure, assert_terngrad

    result = assert_terngrad("optimized", profile="quick", junit=str(tmp_path / "ok.xml"))
    assert result.passed and (tmp_path / "ok.xml").read_text().startswith("<?xml")
    with pytest.raises(AssertionError) as info:
        assert_terngrad("mutant:p-grid-1024", profile="quick", skip=["cross"])
    assert isinstance(info.value, TerngradFailure) and not info.value.result.passed
    assert "unbiased-by-p/pladder" in str(info.value) and "reproduce:" in str(info.value)
    # a JUnit path that cannot be written is refused before the run (was: OSError after the whole battery)
    with pytest.raises(ValueError, match="junit /proc/x/j.xml: cannot create folder /proc/x"):
        assert_terngrad(lambda g, **k: None, profile="quick", junit="/proc/x/j.xml")


def test_check_values_takes_draws_of_a_shaped_gradient():
    # (draws, *g.shape), as `terngrad verify --samples` reads it
    g = gaussian(1200, seed=4).reshape(30, 40)
    values = np.stack([tg.decode(tg.encode(g.ravel(), seed=2, step=j)).values for j in range(32)]).reshape(32, 30, 40)
    r = tv.check_values(g, values)
    assert r.passed, r.summary()
    with pytest.raises(ValueError, match="expected \\(draws, 1200\\)"):
        tv.check_values(g, values[:, :, :39].copy())
