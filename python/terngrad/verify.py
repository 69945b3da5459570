"""terngrad.verify: the statistical battery of terngrad-bench, from Python.

Two ways in:

* ``run(impl)`` runs the whole battery (the checks in ``CHECKS`` on the gradient families of
  docs/battery.md) on a named implementation ('optimized', 'reference', 'mutant:NAME', 'exec:CMD')
  or on a Python function that draws ternary estimates::

      def draw(g, *, seed, worker, tensor, step, steps, clip, c, scalar):
          ...  # return float32 values of shape (steps, g.size), row j = estimate at step `step + j`

      result = terngrad.verify.run(draw, profile="quick")
      print(result.table()); assert result.passed

* ``compare(a, b)`` compares two implementations (names or draw functions) bit for bit.

* ``check_samples(g, trits, scalars)`` / ``check_values(g, values)`` run the per-gradient checks
  (structure, unbiased per coordinate, pooled, drift and by bins of p, variance identity, independence) on
  draws you made anywhere, e.g. with another library, saved from a GPU, or with a codec under development.

Every result states its error budget: a correct codec fails a run with probability at most
``alpha_total`` (split over ``decisions``), and every row gives the smallest effect it detects with
probability ``1 - beta``. Rows: ``result.rows``; the text report: ``result.table()``; a short one for
assertion messages: ``result.summary()``; ``result.to_json()`` and ``result.to_junit()`` as the CLI writes
them. ``terngrad.testing.assert_terngrad`` wraps ``run`` as a test assertion (and a pytest plugin).
"""
from ._core import verify as _v

__all__ = [
    "CHECKS",            # check names, in report order
    "PROFILES",          # 'quick', 'ci', 'full'
    "MUTANTS",           # name -> description of the deliberately broken codecs
    "VARIANTS",          # name -> description of the correct variants (e.g. sigma in float32)
    "CAPABILITIES",      # what run(..., supports=[...]) may name
    "Result",
    "Row",
    "Unavailable",       # e.g. impl='cuda' without a CUDA build or a usable device
    "Interrupted",       # a KeyboardInterrupt: SIGINT/SIGTERM/SIGHUP during an 'exec:' run
    "run",
    "compare",
    "CompareResult",
    "CompareCase",
    "check_samples",
    "check_values",
    "clopper_pearson",
    "bernstein_threshold",
]
globals().update({name: getattr(_v, name) for name in __all__})
# the functions name an out-of-type seed, d, steps or count (terngrad._args)
from ._args import explained as _explained  # noqa: E402

for _name in ("run", "compare", "check_samples", "check_values", "clopper_pearson", "bernstein_threshold"):
    globals()[_name] = _explained(getattr(_v, _name))
del _name
