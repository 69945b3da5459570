"""terngrad.testing: the battery as a test assertion, and a pytest plugin.

    from terngrad.testing import assert_terngrad

    def test_my_codec():
        assert_terngrad(my_draw, profile="quick", supports=["clip", "spec-stream"])

`assert_terngrad` runs `terngrad.verify.run` and, when a check fails, raises AssertionError with a short
summary (failed rows, effect measured against the smallest detectable effect, and the call that
reproduces the run) instead of the whole table. With pytest, `terngrad_junit` (a fixture) writes the
battery's own JUnit XML next to pytest's when `--terngrad-junit DIR` is given, and the marker
`terngrad_slow` labels tests that run the `ci` or `full` profile (deselect with `-m "not terngrad_slow"`).
The plugin is registered through the `pytest11` entry point of the package (python/pyproject.toml).
"""
import os

from . import verify as _verify

__all__ = ["assert_terngrad", "TerngradFailure"]


class TerngradFailure(AssertionError):
    """The battery rejected the implementation; `.result` holds the whole terngrad.verify.Result."""

    def __init__(self, result):
        super().__init__(result.summary())
        self.result = result


def assert_terngrad(impl, *, profile="ci", seed=20171204, supports=(), skip=(), alpha=None, junit=None):
    """Run the battery on `impl` (a name or a draw function, as terngrad.verify.run takes) and return the
    Result; raise TerngradFailure (an AssertionError) with a short summary when any check fails.
    junit: a file to write the battery's JUnit XML to (one case per check, names stable across seeds); a path that
    cannot be written raises ValueError before the run, as the command line refuses it."""
    if junit:
        from ._cli import UsageError, _check_writable
        try:
            _check_writable("junit", os.fspath(junit))
        except UsageError as e:
            raise ValueError(str(e)) from None
    result = _verify.run(impl, profile=profile, seed=seed, supports=list(supports), skip=list(skip), alpha=alpha)
    if junit:
        from ._core import write_output  # the project's one output writer
        write_output(junit, result.to_junit().encode("utf-8"))
    if not result.passed:
        raise TerngradFailure(result)
    return result


# ---- pytest plugin (entry point pytest11: terngrad = terngrad.testing) -----------------------------

def pytest_addoption(parser):
    parser.addoption("--terngrad-junit", default=None, metavar="DIR",
                     help="write the battery's JUnit XML of each terngrad_junit use into DIR")


def pytest_configure(config):
    config.addinivalue_line("markers", "terngrad_slow: runs the battery at the ci or full profile (minutes)")


def _junit_path(request):
    directory = request.config.getoption("--terngrad-junit")
    if not directory:
        return None
    name = request.node.nodeid.replace("/", ".").replace("::", ".").replace("[", "-").replace("]", "")
    return os.path.join(directory, f"terngrad-{name}.xml")


try:
    import pytest

    @pytest.fixture
    def terngrad_junit(request):
        """The JUnit path for this test under --terngrad-junit DIR (None without it): pass as junit=."""
        return _junit_path(request)
except ImportError:  # the plugin hooks need pytest; assert_terngrad does not
    pass
