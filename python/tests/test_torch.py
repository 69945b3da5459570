"""terngrad.torch: tensors in and out of the codec, the DDP communication hook (2 ranks, Gloo, CPU) and
LiveCheck. Needs PyTorch: skipped (with the reason) where the interpreter has none, e.g. the dev venv of
ctest `python_bindings`; ctest `python_torch` runs this file with /usr/bin/python3 (Debian python3-torch).

LiveCheck tests: false-fail rate at most the run's alpha_total (1e-3, split over the planned checks) for a
correct codec; the draws are seeded, so the outcome is fixed for a given build. Power against the broken
hook (deterministic rounding): every coordinate's expectation moves to s*round(g/s), which the pooled
unbiasedness row rejects far beyond its stated detectable effect (each row reports its power at 1 - 1e-3).
"""
import datetime
import importlib.util
import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import terngrad as tg

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed for this interpreter "
                                 "(apt-get install python3-torch; ctest python_torch runs this file with it)")

FLOAT_BELOW = 3000  # the 2826-element bucket of Net travels as float32, the 16384-element one as ternary


@pytest.mark.skipif(HAVE_TORCH, reason="torch is installed: the ImportError path cannot be exercised here")
def test_without_torch_import_error_names_the_package():
    with pytest.raises(ImportError, match="python3-torch"):
        import terngrad.torch  # noqa: F401
    import terngrad  # the rest still works
    assert terngrad.encode(np.ones(4, np.float32))


# ---- tensors in and out ----------------------------------------------------------------------------


@needs_torch
def test_state_refuses_bad_keys_up_front():
    from terngrad.torch import TernGradState

    for kw, error, message in (
        ({"seed": -1}, ValueError, r"seed must be an integer in \[0, 2\^64\), got -1"),
        ({"seed": 2**64}, ValueError, r"seed must be an integer in \[0, 2\^64\)"),
        ({"seed": 1.5}, TypeError, "seed must be an integer, got float 1.5"),  # int() truncated it to 1
        ({"seed": True}, TypeError, "seed must be an integer, got bool True"),  # operator.index(True) is 1
        ({"step": 2**32}, ValueError, r"step must be an integer in \[0, 2\^32\)"),
        ({"float_below": -3}, ValueError, "float_below must be an integer in"),
        ({"c": float("nan")}, ValueError, "c must be a finite number > 0"),
        ({"c": 0}, ValueError, "c must be a finite number > 0"),
    ):
        with pytest.raises(error, match=message):
            TernGradState(**kw)
    state = TernGradState(seed=np.uint64(2**64 - 1), c=np.float32(2.5))  # NumPy scalars stay accepted
    assert state.seed == 2**64 - 1 and state.c == 2.5


@needs_torch
def test_as_numpy_is_a_view_and_refuses_what_it_cannot_read_in_place():
    import torch
    import terngrad.torch as tt

    t = torch.randn(3, 5, requires_grad=True)
    a = tt.as_numpy(t)
    assert a.dtype == np.float32 and a.shape == (15,)
    assert a.__array_interface__["data"][0] == t.data_ptr()  # same memory, no copy
    with pytest.raises(TypeError, match="float32"):
        tt.as_numpy(torch.zeros(4, dtype=torch.float64))
    with pytest.raises(TypeError, match="torch.Tensor"):
        tt.as_numpy(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="contiguous"):
        tt.as_numpy(torch.zeros(4, 4).t())
    with pytest.raises(ValueError, match=r"\.cpu\(\)"):
        tt.as_numpy(torch.zeros(4, device="meta"))  # any non-CPU device, as a CUDA tensor would be


@needs_torch
def test_encode_decode_aggregate_equal_the_numpy_bindings():
    import torch
    import terngrad.torch as tt

    g = torch.randn(10007)
    for kw in ({"clip": "none", "packing": "2bit"}, {"clip": "clip", "packing": "base3", "c": 2.0}):
        p = tt.encode(g, seed=7, worker=1, tensor=3, step=11, **kw)
        assert p == tg.encode(g.numpy(), seed=7, worker=1, tensor=3, step=11, **kw)
        values, header = tt.decode(p)
        assert isinstance(values, torch.Tensor) and header.count == g.numel()
        assert np.array_equal(values.numpy(), tg.decode(p).values)
    s = max(tt.tensor_scalar(g), tt.tensor_scalar(2 * g))
    ps = [tt.encode_with_scalar(x, s, worker=w) for w, x in enumerate((g, 2 * g))]
    st = tt.tensor_stats(g, clip="clip", c=2.0)
    assert st.scalar == tt.tensor_scalar(g, clip="clip", c=2.0)
    assert tt.encode_with_scalar(g, 3 * st.scalar, clip="clip", c=2.0, stats=st) == \
        tg.encode_with_scalar(g.numpy(), 3 * st.scalar, clip="clip", c=2.0)
    mean, sums, scalar = tt.aggregate(ps)
    ref = tg.aggregate(ps)
    assert np.array_equal(mean.numpy(), ref.mean) and np.array_equal(sums.numpy(), ref.sums) and scalar == s


# ---- the hook over 2 Gloo ranks --------------------------------------------------------------------


def _deterministic_rounding(g, scalar, *, seed, worker, tensor, step, clip, c, packing, codec):
    """A deliberately broken encoder: keeps |g_k| >= s/2 always and nothing else (deterministic rounding),
    as valid payloads (g rewritten to 0 or +-s, so the codec's draw is certain)."""
    s = scalar if scalar is not None else tg.tensor_scalar(g, clip=clip, c=c)
    det = np.where(np.abs(g) >= s / 2, np.sign(g) * s, 0).astype(np.float32)
    return tg.encode_with_scalar(det, s, seed=seed, worker=worker, tensor=tensor, step=step, clip="none",
                                 packing=packing, codec=codec)


def _worker(rank, world, run, out_dir, steps, options):
    import torch
    import torch.distributed as dist
    from terngrad.torch import LiveCheck
    from terngrad.torch.hooks import TernGradState, terngrad_hook

    # A file rendezvous (no port to race for) and a timeout, so that a hang fails the test instead of
    # waiting for Gloo's default 30 minutes.
    dist.init_process_group("gloo", init_method=f"file://{out_dir}/rendezvous-{run}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=90))
    torch.manual_seed(0)  # the same initial model on every rank (DDP also broadcasts it)
    net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    start = options.get("resume_from")
    state = TernGradState(seed=1234, clip=options.get("clip", "none"), packing=options.get("packing", "2bit"),
                          float_below=FLOAT_BELOW, record=True,
                          encoder=_deterministic_rounding if options.get("broken") else None)
    if start is not None:
        ckpt = torch.load(os.path.join(out_dir, f"ckpt{rank}.pt"))
        net.load_state_dict(ckpt["model"])
        state.load_state_dict(ckpt["hook"])
    live = None
    if options.get("live"):
        live = LiveCheck(every=options["live"], bucket=options.get("live_bucket", 1), draws=32, alpha_total=1e-3,
                         total_steps=steps, log=os.path.join(out_dir, f"live{rank}.csv"), quiet=True)
        state.live_check = live
    # Several buckets, from the first step: torch 1.13 splits by size at construction only with
    # find_unused_parameters=True, and caps the first bucket at dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB,
    # read when the model is wrapped); lowered so that this small net is split as a large one would be.
    dist._DEFAULT_FIRST_BUCKET_BYTES = 20000
    model = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.02, find_unused_parameters=True)
    model.register_comm_hook(state, terngrad_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    teacher = torch.Generator().manual_seed(99)
    w_true = torch.randn(64, 10, generator=teacher)
    losses = []
    first = state.step
    for k in range(first, first + steps):
        gen = torch.Generator().manual_seed(1000 * k + rank)  # data of (step, rank): a resumed run sees the same
        x = torch.randn(32, 64, generator=gen)
        y = x @ w_true
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if options.get("save_at") == k + 1:
            torch.save({"model": model.module.state_dict(), "hook": state.state_dict()},
                       os.path.join(out_dir, f"ckpt{rank}.pt"))
    rec = [{k: v for k, v in r.items()} for r in state.record]
    torch.save({"records": rec, "losses": losses, "bytes_sent": state.bytes_sent, "float_bytes": state.float_bytes,
                "live_rows": live.rows if live else [], "final_step": state.step},
               os.path.join(out_dir, f"rank{rank}.pt"))
    _leave(dist)


def _leave(dist):
    """Ends a rank whose results are saved without running destructors. With torch 1.13, tearing down a
    DDP model that has a Python comm hook can deadlock: the main thread joins Gloo's worker threads in
    ~ProcessGroupGloo while holding the GIL, and a worker waits for the GIL (seen once under load: the
    rank hung until ctest's timeout). Every rank has finished its collectives after the barrier."""
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


_runs = itertools.count()


def _run_name():
    """A fresh name for each run's rendezvous file."""
    return f"{os.getpid()}-{next(_runs)}"


def _run(tmp_path, steps, **options):
    import torch
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(2, _run_name(), str(tmp_path), steps, options), nprocs=2, join=True)
    return [torch.load(os.path.join(tmp_path, f"rank{r}.pt")) for r in range(2)]


def _by_key(records):
    return {(r["step"], r["bucket"]): r for r in records}


def _exchange_rule(grads, seed, step, bucket, clip="none", packing="2bit"):
    """The C++ trainer's exchange (experiments/train/src/exchange.cpp, GradientExchange::exchange/combine)
    with the bindings: own scalars, their max, encode_with_scalar per worker, aggregate; float32 tensors
    summed in double in worker order. Returns (payloads, mean)."""
    n = grads[0].size
    if n < FLOAT_BELOW:
        ps = [tg.encode(g, seed=seed, worker=w, tensor=bucket, step=step, float_below=tg.MAX_ELEMENTS + 1)
              for w, g in enumerate(grads)]
        total = sum(tg.decode(p).values.astype(np.float64) for p in ps)
        return ps, (total / len(ps)).astype(np.float32)
    s = tg.shared_scalar([tg.tensor_scalar(g, clip=clip, tensor=bucket) for g in grads])
    ps = [tg.encode_with_scalar(g, s, seed=seed, worker=w, tensor=bucket, step=step, clip=clip, packing=packing)
          for w, g in enumerate(grads)]
    return ps, tg.aggregate(ps).mean


@needs_torch
def test_ddp_two_ranks_bytes_equal_the_codec_and_results_equal_on_every_rank(tmp_path):
    steps = 30
    r0, r1 = _run(tmp_path, steps, live=10, save_at=None)
    a, b = _by_key(r0["records"]), _by_key(r1["records"])
    assert a.keys() == b.keys() and len(a) >= 2 * steps
    kinds = set()
    for key in sorted(a):
        step, bucket = key
        grads = [a[key]["grad"].numpy(), b[key]["grad"].numpy()]
        payloads, mean = _exchange_rule(grads, 1234, step, bucket)
        kinds.add(a[key]["ternary"])
        for w, rec in enumerate((a[key], b[key])):
            assert rec["payload"] == payloads[w], f"rank {w} payload differs from the codec at {key}"
            assert rec["payloads"] == payloads
            assert np.array_equal(rec["out"].numpy(), mean), f"rank {w} result differs at {key}"
        assert a[key]["out"].numpy().tobytes() == b[key]["out"].numpy().tobytes()
    assert kinds == {True, False}  # both the ternary and the float32 paths ran
    # the loss goes down (regression on a fixed teacher)
    assert np.mean(r0["losses"][-5:]) < 0.7 * np.mean(r0["losses"][:5]), r0["losses"]
    # bytes: the ternary bucket is 1/16 of float32 + a 32-byte header; the small float bucket stays float
    ternary_float = sum(4 * r["grad"].numel() for r in r0["records"] if r["ternary"])
    ternary_sent = sum(len(r["payload"]) for r in r0["records"] if r["ternary"])
    assert ternary_sent == sum(tg.HEADER_BYTES + tg.body_bytes("2bit", r["grad"].numel())
                               for r in r0["records"] if r["ternary"])
    assert 15.8 < ternary_float / ternary_sent < 16  # 16384 elements: 4096 + 32 bytes
    assert r0["bytes_sent"] == sum(len(r["payload"]) for r in r0["records"])
    # LiveCheck: 3 planned checks (steps 0, 10, 20) on rank 0, all passed; rank 1 checks nothing
    rows = r0["live_rows"]
    assert [r["step"] for r in rows] == [0, 10, 20] and all(r["status"] == "checked" for r in rows)
    assert all(r["passed"] for r in rows), rows
    assert r1["live_rows"] == []
    with open(os.path.join(tmp_path, "live0.csv")) as f:
        assert len(f.read().strip().splitlines()) == 4  # header + 3 checks


@needs_torch
def test_resumed_run_continues_the_key_sequence(tmp_path):
    full0, full1 = _run(tmp_path, 6, save_at=3)
    res0, res1 = _run(tmp_path, 3, resume_from=3)
    assert res0["final_step"] == 6
    for full, res in ((full0, res0), (full1, res1)):
        f, r = _by_key(full["records"]), _by_key(res["records"])
        assert sorted(r) == sorted(k for k in f if k[0] >= 3)
        for key in r:
            assert r[key]["payload"] == f[key]["payload"], key


@needs_torch
def test_livecheck_catches_a_broken_hook(tmp_path):
    r0, _ = _run(tmp_path, 3, live=1, broken=True)
    rows = r0["live_rows"]
    assert len(rows) == 3 and not any(r["passed"] for r in rows), rows
    assert all("unbiased" in r["failed_checks"] for r in rows), rows


@needs_torch
def test_livecheck_states_its_budget_and_stops_at_it():
    import torch
    from terngrad.torch import LiveCheck
    from terngrad.torch.hooks import TernGradState

    live = LiveCheck(every=100, draws=16, alpha_total=1e-3, total_steps=250, quiet=True)
    assert live.planned_checks == 3 and live.alpha_each == pytest.approx(1e-3 / 3)
    assert "over 3 planned checks" in live.plan()
    with pytest.raises(ValueError, match="up front"):
        LiveCheck(every=100)
    state = TernGradState(seed=5, clip="clip")
    g = torch.randn(5000)
    for step in (0, 50, 100, 200, 300):
        live.maybe_check(state, g, 0, 0, step, None, True)
    assert [r["status"] for r in live.rows] == ["checked", "checked", "checked", "budget_spent"]
    assert all(r["passed"] for r in live.rows[:3])
    assert live.rows[0]["alpha"] == pytest.approx(1e-3 / 3)


# ---- the hook against the C++ trainer's exchange ----------------------------------------------------

TERNGRAD_EXE = os.environ.get("TG_TERNGRAD_EXE", "")
needs_trainer = pytest.mark.skipif(not (TERNGRAD_EXE and os.access(TERNGRAD_EXE, os.X_OK)),
                                   reason="TG_TERNGRAD_EXE (a `terngrad` built with LibTorch, which ctest "
                                   "python_torch sets when the build has `terngrad train`) is not set")


class _DumpBucket:
    """What terngrad_hook reads of a torch GradBucket: buffer(), index(), is_last()."""

    def __init__(self, buffer, index, last):
        self._buffer, self._index, self._last = buffer, index, last

    def buffer(self):
        return self._buffer

    def index(self):
        return self._index

    def is_last(self):
        return self._last


def _hook_on_dump_worker(rank, world, run, out_dir, dump_dir, kw):
    """Rank `rank` feeds the C++ trainer's worker-`rank` gradients of the dumped step through terngrad_hook,
    one bucket per tensor (bucket index = tensor index), and saves what the hook sent and gathered."""
    import torch
    import torch.distributed as dist
    from terngrad.torch.hooks import TernGradState, terngrad_hook

    dist.init_process_group("gloo", init_method=f"file://{out_dir}/rendezvous-{run}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=90))
    with open(os.path.join(dump_dir, "dump.json")) as f:
        meta = json.load(f)
    tensors = meta["tensors"]
    state = TernGradState(seed=meta["seed"], step=meta["step"], record=True, codec="optimized-t1", **kw)
    for t in range(len(tensors)):
        g = np.fromfile(os.path.join(dump_dir, f"grad-w{rank}-t{t}.f32"), dtype="<f4")
        assert g.size == tensors[t]["numel"]
        terngrad_hook(state, _DumpBucket(torch.from_numpy(g), t, t == len(tensors) - 1)).wait()
    torch.save([{k: r[k] for k in ("bucket", "step", "ternary", "payload", "payloads")} for r in state.record],
               os.path.join(out_dir, f"hook{rank}.pt"))
    dist.destroy_process_group()


@needs_torch
@needs_trainer
@pytest.mark.parametrize("clip,packing", [("clip", "2bit"), ("none", "base3")])
def test_hook_payloads_equal_the_cpp_trainers_exchange(tmp_path, clip, packing):
    """A real `terngrad train` run (LeNet, 2 simulated workers) dumps step 2's exchange: every worker's
    gradient and the payload bytes it sent per tensor. Two Gloo ranks put those gradients through
    terngrad_hook (seed and step from the run, bucket index = tensor index, rank = worker): every payload
    the hook sends, and every one it gathers, must equal the trainer's bytes. A divergence of the key
    scheme (seed, worker, tensor, step), of the shared-scalar rule or of the float32 path fails here."""
    import torch
    import torch.multiprocessing as mp

    run = tmp_path / "run"
    cmd = [TERNGRAD_EXE, "train", "--model", "lenet", "--codec", "terngrad", "--workers", "2", "--batch", "16",
           "--steps", "3", "--train-limit", "256", "--test-limit", "64", "--eval-every", "0", "--seed", "77",
           "--clip", clip, "--packing", packing, "--float-below", "1000", "--dump-step", "2", "--no-progress",
           "--out", str(run)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0 and "dataset" in done.stderr.lower():
        pytest.skip(f"terngrad train has no data here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    dump = run / "dump-step2"
    meta = json.loads((dump / "dump.json").read_text())
    assert meta["seed"] == 77 and meta["step"] == 2 and meta["workers"] == 2
    ternary = [t["ternary"] for t in meta["tensors"]]
    assert True in ternary and False in ternary  # both paths (conv1's 20-element bias stays float32)
    mp.spawn(_hook_on_dump_worker, args=(2, _run_name(), str(tmp_path), str(dump),
                                         {"clip": clip, "packing": packing, "float_below": 1000}),
             nprocs=2, join=True)
    cpp = [[(dump / f"payload-w{w}-t{t}.bin").read_bytes() for t in range(len(ternary))] for w in range(2)]
    for rank in range(2):
        recs = torch.load(tmp_path / f"hook{rank}.pt")
        assert [r["bucket"] for r in recs] == list(range(len(ternary)))
        for t, r in enumerate(recs):
            assert r["step"] == 2 and r["ternary"] == ternary[t]
            assert r["payload"] == cpp[rank][t], f"rank {rank} tensor {t} ({meta['tensors'][t]['name']}): " \
                f"the hook's payload differs from the C++ trainer's"
            assert r["payloads"] == [cpp[0][t], cpp[1][t]]


# ---- a PyTorch codec with float32 statistics through the battery (examples/torch_codec.py) ------------------


def _torch_codec():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    try:
        import torch_codec
    finally:
        sys.path.pop(0)
    return torch_codec


@needs_torch
def test_torch_codec_with_float32_sigma_passes_every_clipped_check():
    # Its own random stream and sigma in float32 (torch), as third-party codecs compute it: no check may cry
    # wolf, including under clipping, where its clip bound differs from the spec's in the last bits.
    import terngrad.verify as tv
    codec = _torch_codec()
    for supports in (["clip", "shared-scalar"], ["saturate", "shared-scalar"], ["none", "clip", "saturate", "shared-scalar"]):
        r = tv.run(codec.draw, profile="quick", supports=supports, name="torch_codec")
        assert r.passed, (supports, r.table())
        assert any(row.check.startswith("aggregate") for row in r.rows)


@needs_torch
def test_torch_codec_streams_are_keyed_by_64_bits_not_by_torchs_32_bit_seed():
    # torch.Generator.manual_seed keeps the low 32 bits of its seed on the CPU: a codec seeding one generator with a
    # 63-bit hash of the key shares a stream between two keys whose hashes agree there (the battery's ci collision
    # probe found such pairs in 2^18 steps with probability 0.9997). The example seeds two generators, one per half.
    import hashlib
    import torch
    codec = _torch_codec()
    assert torch.equal(torch.rand(8, generator=torch.Generator().manual_seed(5)),
                       torch.rand(8, generator=torch.Generator().manual_seed(2**40 + 5)))  # the truncation itself
    seen, pair = {}, None
    for step in range(1 << 18):  # two steps of one key whose 64-bit hashes share the low 32 bits (a birthday pair)
        key = hashlib.blake2b(b"".join(int(x).to_bytes(8, "little") for x in (7, 0, 0, step)), digest_size=8).digest()
        low = int.from_bytes(key, "little") & 0xFFFFFFFF
        if low in seen:
            pair = (seen[low], step)
            break
        seen[low] = step
    assert pair is not None
    g = np.linspace(-1, 1, 4096, dtype=np.float32)
    rows = [codec.draw(g, seed=7, worker=0, tensor=0, step=k, steps=1, clip="none", c=2.5, scalar=None)[0] for k in pair]
    assert not np.array_equal(rows[0], rows[1]), pair
    one = [codec.row_generators(7, 0, 0, k)[0] for k in pair]  # the low halves alone: one stream
    assert torch.equal(torch.rand(8, generator=one[0]), torch.rand(8, generator=one[1]))


@needs_torch
def test_torch_codec_with_naive_float32_sigma_fails_only_on_extreme_magnitudes():
    # GRACE's way (squares of the raw deviations): sigma is 0 on 1e-30 (and subnormal) data and inf on 1e30
    # data. The battery must fail exactly those families, and pass every other one.
    import terngrad.verify as tv
    codec = _torch_codec()
    r = tv.run(codec.draw_naive_sigma, profile="quick", supports=["clip", "shared-scalar"], name="torch_codec naive")
    assert not r.passed
    failed = {row.family for row in r.rows if row.kind in ("stat", "exact") and not row.passed}
    assert failed and failed <= {"tiny", "huge", "subnormal"}, (failed, r.table())
