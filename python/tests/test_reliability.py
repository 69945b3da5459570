"""terngrad-bench: issue 16 in the Python package: the one output writer (terngrad._core.write_output)
never replaces a FIFO, socket or symlink; check_values refuses an empty gradient before allocating one
scalar per draw (values of shape (1e9, 0) cost no memory to make); ternarize_steps refuses a huge
draw count before allocating and is interrupted by Ctrl-C."""
import os
import resource
import signal
import socket
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

import terngrad as tg
import terngrad.verify as tv
from terngrad import _core


def test_write_output_regular_and_symlink(tmp_path):
    target = tmp_path / "real.json"
    _core.write_output(str(target), b"one")
    assert target.read_bytes() == b"one"
    link = tmp_path / "link.json"
    link.symlink_to("real.json")
    _core.write_output(str(link), b"two")
    assert link.is_symlink() and target.read_bytes() == b"two"


def test_write_output_fifo_in_place(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        _core.write_output(str(fifo), b"through")
        assert os.read(fd, 100) == b"through"
    finally:
        os.close(fd)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_write_output_refuses_socket(tmp_path):
    path = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    try:
        with pytest.raises(OSError, match="socket"):
            _core.write_output(str(path), b"x")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        s.close()


def test_check_values_empty_gradient_refused_before_allocating():
    g = np.zeros(0, dtype=np.float32)
    values = np.zeros((10**9, 0), dtype=np.float32)  # no memory: 0 elements
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="empty"):
        tv.check_values(g, values)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 256, f"check_values grew the process by {grown_mb:.0f} MB"
    assert time.monotonic() - t0 < 2.0


def test_ternarize_steps_huge_draws_refused_before_allocating():
    # 3e9 draws of one element: 3 GB of trits and minutes of work before the limit (issue 16)
    g = np.ones(1, dtype=np.float32)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="over the limit of 2\\^30"):
        tg.ternarize_steps(g, 3_000_000_000)
    assert time.monotonic() - t0 < 1.0
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 64, f"ternarize_steps grew the process by {grown_mb:.0f} MB before refusing"
    # the limit itself is admitted (shape check only: 2^30 trits of a 2^20-element gradient is 1024 draws)
    assert tg.ternarize_steps(np.ones(4, dtype=np.float32), 16)[1].shape == (16, 4)


def test_ternarize_steps_interrupted_by_ctrl_c():
    # A call of ~8e8 trits (several seconds on one core) gets SIGINT 0.5 s in: KeyboardInterrupt
    # within 2 s of the signal, not when the call ends.
    code = (
        "import sys, time, numpy as np, terngrad as tg\n"
        "g = np.linspace(-1, 1, 4096).astype(np.float32)\n"
        "print('ready', flush=True)\n"
        "t0 = time.monotonic()\n"
        "try:\n"
        "    tg.ternarize_steps(g, 200000)\n"
        "    print('finished %.2f' % (time.monotonic() - t0), flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted %.2f' % (time.monotonic() - t0), flush=True)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    t_sig = time.monotonic()
    p.send_signal(signal.SIGINT)
    out = p.stdout.readline().strip()
    waited = time.monotonic() - t_sig
    p.wait(timeout=60)
    assert out.startswith("interrupted"), out
    assert waited < 2.0, f"KeyboardInterrupt {waited:.2f} s after SIGINT ({out})"
