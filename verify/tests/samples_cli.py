"""terngrad-bench: `terngrad verify --samples` end to end: draws written to .npy by the independent NumPy
implementation of examples/ pass; draws of a codec that rounds instead of sampling fail 'unbiased'
(exit 1); malformed input exits 2 with one line naming the problem, and writes no report.
Run by ctest (verify_samples_cli): samples_cli.py TERNGRAD
Error rate: the passing call is a correct codec at alpha_total 1e-6 with fixed seeds (deterministic)."""
import importlib.util
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
terngrad = sys.argv[1]
spec = importlib.util.spec_from_file_location("numpy_codec", REPO / "examples" / "numpy_codec.py")
nc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nc)
failures = []


def run(*args):
    p = subprocess.run([terngrad, "verify", *map(str, args)], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def expect(cond, what):
    if not cond:
        failures.append(what)


with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    g = np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32)   # any shape, read flat
    draws = nc.ternarize(g.ravel(), 7, 0, 0, 0, 128, "clip", 2.5)               # (128, 2048)
    np.save(tmp / "g.npy", g)
    np.save(tmp / "good.npy", draws.reshape(128, 32, 64))
    rc, out, err = run("--samples", tmp / "g.npy", tmp / "good.npy", "--clip", "clip", "--json", tmp / "r.json")
    expect(rc == 0 and "verdict: PASS" in out, f"correct draws: exit {rc}\n{out}{err}")
    doc = json.loads((tmp / "r.json").read_text()) if (tmp / "r.json").exists() else {}
    expect(doc.get("runs", [{}])[0].get("implementation") == "samples", f"json: {doc}")
    # 2048 elements x 128 draws: unbiased, dispersion, pooled, drift, four bins of p (pooled and drift: [2^-6, 1/8) to
    # [7/8, 1-2^-10), where clipping at 2.5 sigma puts many p near 1), variance, blocks of 8 (offsets 0, 4) and 64
    # (planned since the block rows are truncated at Hoeffding's tau), lags 64, 512, d/2, sure keeps, near drops
    expect(doc.get("runs", [{}])[0].get("decisions") == 21, f"json decisions: {doc}")

    # Checked under the wrong clipping rule, the scalar is not the spec's: an exact failure.
    rc, out, _ = run("--samples", tmp / "g.npy", tmp / "good.npy")
    expect(rc == 1 and "structure" in out and "FAIL" in out, f"wrong rule: exit {rc}\n{out}")
    # ... and the failure says what the scalar suggests: clipped draws checked without --clip, another c,
    # unclipped draws checked with --clip
    expect("were these draws clipped (--clip clip or saturate, --c 2.5)?" in out, f"hint, no --clip:\n{out}")
    rc, out, _ = run("--samples", tmp / "g.npy", tmp / "good.npy", "--clip", "clip", "--c", "3")
    expect(rc == 1 and "the scalar is c sigma with c = 2.5, not the c = 3 checked: was c = 2.5 used?" in out, f"hint, --c 3:\n{out}")
    np.save(tmp / "unclipped.npy", nc.ternarize(g.ravel(), 7, 0, 0, 0, 16, "none", 2.5))
    rc, out, _ = run("--samples", tmp / "g.npy", tmp / "unclipped.npy", "--clip", "saturate")
    expect(rc == 1 and "the scalar is max|g|, as without clipping: were these draws made with clipping none?" in out,
           f"hint, unclipped draws under --clip:\n{out}")

    # Deterministic rounding (keep iff p > 1/2): biased, fails the per-coordinate test.
    flat = g.ravel()
    s = np.float32(np.abs(flat).max())
    rounded = np.where(np.abs(flat) / s > 0.5, np.sign(flat) * s, 0).astype(np.float32)
    np.save(tmp / "rounded.npy", np.tile(rounded, (128, 1)))
    rc, out, _ = run("--samples", tmp / "g.npy", tmp / "rounded.npy", "--skip", "independence")
    expect(rc == 1 and any(line.startswith("unbiased ") and line.rstrip().endswith("FAIL")
                           for line in out.splitlines()), f"rounding codec: exit {rc}\n{out}")

    # Two layers with one shared scalar.
    h = (0.01 * np.random.default_rng(2).standard_normal(500)).astype(np.float32)
    shared = np.float32(max(np.abs(flat).max(), np.abs(h).max()))
    np.save(tmp / "h.npy", h)
    np.save(tmp / "g_shared.npy", nc.ternarize(flat, 7, 0, 0, 0, 64, "none", 2.5, shared))
    np.save(tmp / "h_shared.npy", nc.ternarize(h, 7, 0, 1, 0, 64, "none", 2.5, shared))
    rc, out, err = run("--samples", tmp / "g.npy", tmp / "g_shared.npy", "--samples", tmp / "h.npy",
                       tmp / "h_shared.npy", "--scalar", repr(float(shared)))
    expect(rc == 0 and "2548 elements, 64 draws" in out, f"layers with a shared scalar: exit {rc}\n{out}{err}")

    # Bad input: exit 2, one line naming the problem, no report written.
    np.save(tmp / "short.npy", draws[:, :100])
    np.save(tmp / "one.npy", draws[:1])
    np.save(tmp / "fewer.npy", draws[:64])
    g_nan = g.copy()
    g_nan.flat[5] = np.nan
    np.save(tmp / "g_nan.npy", g_nan)
    cases = [
        (["--samples", tmp / "g_nan.npy", tmp / "good.npy"], "g_nan.npy: element 5 of the gradient is NaN"),
        (["--samples", tmp / "g.npy", tmp / "short.npy"], "short.npy: shape must be (draws, 2048)"),
        (["--samples", tmp / "g.npy", tmp / "missing.npy"], "missing.npy"),
        (["--samples", tmp / "g.npy", tmp / "one.npy"], "one.npy: 1 draw: the checks need at least 2"),
        (["--samples", tmp / "g.npy", tmp / "good.npy", "--samples", tmp / "g.npy", tmp / "fewer.npy"],
         "fewer.npy has 64 draws, " + str(tmp / "good.npy") + " 128: every layer needs the same draws"),
        (["--samples", tmp / "g.npy"], "--samples"),
        (["--samples", tmp / "g.npy", tmp / "good.npy", "--impl", "reference"], "excludes"),
        (["--samples", tmp / "g.npy", tmp / "good.npy", "--skip", "streams"], "only the independence check"),
        (["--clip", "clip"], "--clip requires --samples"),
    ]
    for args, needle in cases:
        (tmp / "bad.json").unlink(missing_ok=True)
        rc, out, err = run(*args, "--json", tmp / "bad.json")
        lines = err.strip().splitlines()
        expect(rc == 2 and len(lines) == 1 and needle in err and not (tmp / "bad.json").exists(),
               f"{args}: exit {rc}, stderr {err!r}")

for f in failures:
    print("FAIL:", f)
print("verify_samples_cli:", "ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
