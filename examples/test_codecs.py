"""The battery as a pytest check of two example codecs (docs/ci.md): pytest examples/test_codecs.py --junitxml=junit.xml"""
from terngrad.testing import assert_terngrad

import numpy_codec  # follows the spec's Philox stream: every check applies, bytes included


def test_numpy_codec(terngrad_junit):
    assert_terngrad(numpy_codec.draw, profile="quick", junit=terngrad_junit)


def test_torch_codec(terngrad_junit):
    import torch_codec  # needs torch; its own random stream (no cross check), so it says what it supports
    assert_terngrad(torch_codec.draw, profile="quick", supports=["none", "clip", "saturate", "shared-scalar"],
                    junit=terngrad_junit)
