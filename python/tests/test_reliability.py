"""terngrad-bench: issue 16 in the Python package: the one output writer (terngrad._core.write_output)
never replaces a FIFO, socket or symlink; check_values refuses an empty gradient before allocating one
scalar per draw (values of shape (1e9, 0) cost no memory to make)."""
import os
import resource
import socket
import stat
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
