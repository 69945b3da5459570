"""terngrad.torch.live: the battery's per-gradient checks on the gradients a real training run sends.

    live = LiveCheck(every=100, bucket=0, draws=32, alpha_total=1e-3, total_steps=5000, log="live.csv")
    state = TernGradState(seed=1, live_check=live)
    ...
    if live.should_stop(): break          # only with on_fail="stop"; a collective: call it on every rank

Every `every` steps (steps 0, every, 2*every, ...), on rank `rank`, the hook hands LiveCheck the gradient
of bucket `bucket` it is about to send. LiveCheck draws `draws` extra encodings of it with the hook's own
encoder and options (shared scalar included) under their own keys (seed XOR 'LIVECHK', worker = rank,
tensor = bucket, steps check_index * draws + j: never a key the training uses), decodes their trits and
runs terngrad.verify.check_samples on them: structure (exact), unbiased per coordinate and pooled,
the variance identity, independence.

Alpha spending, stated up front: the run-level false-alarm budget alpha_total is split evenly over the
planned number of checks (planned_checks, or ceil(total_steps / every)): check k gets alpha_total /
planned (Bonferroni), so a correct codec raises any alarm in the whole run with probability at most
alpha_total. Checks beyond the plan are not run (logged as 'budget_spent'): no hidden extra alpha.

Each check writes a CSV row (log=path) and keeps it in `rows`; a failed check is printed to `stream` at
once with the step and bucket. on_fail: 'continue' (default; training goes on), 'stop' (should_stop()
returns True on every rank after a failure; it is a collective all_reduce) or 'raise' (LiveCheckFailed from
inside the hook on the checking rank; the other ranks then wait on the process group, so prefer 'stop').
"""
import csv
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

from .. import _core
from .. import verify as _tv

LIVE_SEED_XOR = 0x4C49564543484B00  # 'LIVECHK\0'

FIELDS = ["step", "bucket", "rank", "elements", "draws", "alpha", "passed", "failed_checks", "decisions",
          "seconds", "status"]


class LiveCheckFailed(RuntimeError):
    """Raised from the hook by LiveCheck(on_fail='raise') when a check fails."""


class LiveCheck:
    def __init__(self, every=100, bucket=0, draws=32, alpha_total=1e-3, planned_checks=None, total_steps=None,
                 rank=0, log=None, on_fail="continue", beta=1e-3, independence=True, stream=None, quiet=False):
        if every < 1:
            raise ValueError("every must be >= 1")
        if draws < 2:
            raise ValueError("draws must be >= 2")
        if not (0 < alpha_total < 1):
            raise ValueError("alpha_total must be in (0, 1)")
        if on_fail not in ("continue", "stop", "raise"):
            raise ValueError("on_fail must be 'continue', 'stop' or 'raise'")
        if planned_checks is None:
            if total_steps is None:
                raise ValueError("state the plan up front: planned_checks=N or total_steps=T (alpha is spent over it)")
            planned_checks = max(1, math.ceil(total_steps / every))
        self.every = int(every)
        self.bucket = int(bucket)
        self.draws = int(draws)
        self.alpha_total = float(alpha_total)
        self.planned_checks = int(planned_checks)
        self.alpha_each = self.alpha_total / self.planned_checks
        self.rank = int(rank)
        self.on_fail = on_fail
        self.beta = float(beta)
        self.independence = bool(independence)
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.rows = []
        self.failures = []
        self.results = []
        self.checks_run = 0
        self.seconds = 0.0
        self.failed = False
        self._log_path = log
        if log is not None and (not os.path.exists(log) or os.path.getsize(log) == 0):
            with open(log, "w", newline="") as f:
                csv.writer(f).writerow(FIELDS)

    def plan(self):
        """The error budget, as stated before the run."""
        return (f"LiveCheck: bucket {self.bucket} on rank {self.rank} every {self.every} steps, {self.draws} draws, "
                f"alpha_total {self.alpha_total:g} over {self.planned_checks} planned checks: alpha "
                f"{self.alpha_each:.3g} per check (Bonferroni)")

    def _write(self, row):
        self.rows.append(row)
        if self._log_path is not None:
            with open(self._log_path, "a", newline="") as f:
                csv.writer(f).writerow([row[k] for k in FIELDS])

    def maybe_check(self, state, g, index, rank, step, scalar, ternary):
        """Called by the hook for every bucket; checks when (rank, bucket, step) is one it watches."""
        if rank != self.rank or index != self.bucket or step % self.every != 0:
            return None
        base = {"step": step, "bucket": index, "rank": rank, "elements": g.numel(), "draws": self.draws,
                "alpha": self.alpha_each, "passed": "", "failed_checks": "", "decisions": "", "seconds": 0.0}
        if not ternary:
            self._write(dict(base, status="float_bucket"))
            return None
        if self.checks_run >= self.planned_checks:
            self._write(dict(base, alpha=0.0, status="budget_spent"))
            return None
        t0 = time.perf_counter()
        result = self.check(state, g, index, rank, scalar, self.checks_run)
        dt = time.perf_counter() - t0
        self.checks_run += 1
        self.seconds += dt
        self.results.append((step, index, result))
        row = dict(base, passed=result.passed, failed_checks=";".join(result.failed_checks),
                   decisions=result.decisions, seconds=round(dt, 6), status="checked")
        self._write(row)
        if not result.passed:
            self.failed = True
            self.failures.append((step, index, result))
            msg = (f"terngrad LiveCheck FAILED at step {step}, bucket {index} (rank {rank}): "
                   f"{', '.join(result.failed_checks)} at alpha {self.alpha_each:.3g}\n{result.summary()}")
            print(msg, file=self.stream, flush=True)
            if self.on_fail == "raise":
                raise LiveCheckFailed(msg)
        elif not self.quiet:
            print(f"terngrad LiveCheck passed at step {step}, bucket {index} ({result.decisions} decisions, "
                  f"{dt * 1e3:.1f} ms)", file=self.stream, flush=True)
        return result

    def check(self, state, g, index, rank, scalar, k):
        """Check k: `draws` encodings of g with the state's encoder and options, keys of their own."""
        x = g.detach().reshape(-1).numpy()
        seed = (state.seed ^ LIVE_SEED_XOR) & (2**64 - 1)
        first = (k * self.draws) % (2**32)
        trits = np.empty((self.draws, x.size), dtype=np.int8)
        scalars = np.empty(self.draws, dtype=np.float32)
        for j in range(self.draws):
            p = state.encoder(x, scalar, seed=seed, worker=rank, tensor=index, step=(first + j) % (2**32),
                              clip=state.clip, c=state.c, packing=state.packing, codec=state.codec)
            trits[j] = _core.decode_trits(p, codec=state.codec)
            scalars[j] = _core.parse_header(p).scalar
        return _tv.check_samples(x, trits, scalars, clip=state.clip, c=state.c, scalar=scalar,
                                 alpha=self.alpha_each, beta=self.beta, independence=self.independence)

    def should_stop(self, group=None):
        """With on_fail='stop': True on every rank once a check failed on any (an all_reduce MAX: call it at
        the same point on every rank). Otherwise False, without communication."""
        if self.on_fail != "stop":
            return False
        flag = torch.tensor([1 if self.failed else 0], dtype=torch.int32)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
        return bool(flag.item())
