#!/usr/bin/env python3
"""terngrad-bench: the hostile-input table (issue 16). Runs the built `terngrad` on each hostile input
of CASES below and records, for each: exit code, the first stderr line, peak memory (ru_maxrss of the
child, from wait4) and wall time. Fails when an input exits with anything but its expected code, takes
more than 2 s or 256 MB before its error, prints more than one error line, names a C++ allocation error
(a size from the input used unchecked: bad_alloc, length_error), or leaves something at an output path
it must not change (a device node, FIFO, socket or symlink replaced; a partial file or temporary left
under a file size limit). Inputs: outputs at special paths, .npy files that claim huge shapes or never
end, external codecs that block or never answer, numbers out of range, a file size limit (RLIMIT_FSIZE)
and a full 16 KiB tmpfs mounted in a private mount namespace (`unshare -m`; skipped, with the reason,
where that mount is not allowed), `report --python` that is not Python, a synthetic batch
too large for memory, and store peers (fake sockets in this script) sending garbage to a rank.

    python3 fuzz/hostile/run.py --terngrad build/default/apps/terngrad            # check (ctest: tg_hostile_inputs)
    python3 fuzz/hostile/run.py --terngrad build/default/apps/terngrad --write-report reports/reliability.md

--write-report replaces the table between the markers <!-- hostile-table:begin/end --> of the file.
Device nodes are made with mknod in a private temporary folder (root only; those cases are skipped,
with the reason, otherwise); no system device is ever used as an output.
"""
import argparse
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time

TIME_LIMIT_S = 2.0
MEMORY_LIMIT_MB = 256
HARD_TIMEOUT_S = 20.0
# a message of the C++ library about an allocation: a size taken from the input was not checked first
UNCHECKED_SIZE = re.compile(r"bad_alloc|max_size\(\)|length_error|vector::_M|basic_string::|can't allocate memory")


def npy_bytes(shape, data=b"", descr="<f4"):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def kind(path):
    try:
        m = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    for test, name in ((stat.S_ISLNK, "symlink"), (stat.S_ISCHR, "chardev"), (stat.S_ISBLK, "blockdev"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISREG, "file"),
                       (stat.S_ISDIR, "folder")):
        if test(m):
            return name
    return "other"


class Env:
    def __init__(self, root):
        self.d = root
        self.root_user = os.geteuid() == 0
        rng_g = [0.5, -1.25, 2.0, 0.0, 0.75, -0.5, 1.5, -2.0]
        s = 2.0
        g = struct.pack("<8f", *rng_g)
        # 64 draws: every row keeps the elements with |g| = s and none of the zero
        rows = []
        for j in range(64):
            row = []
            for k, x in enumerate(rng_g):
                keep = abs(x) == s or ((j * 7 + k * 3) % 8) < int(8 * abs(x) / s)
                row.append((s if x > 0 else -s) if keep and x != 0 else 0.0)
            rows.append(struct.pack("<8f", *row))
        self.g = write(os.path.join(root, "g.npy"), npy_bytes((8,), g))
        self.v = write(os.path.join(root, "v.npy"), npy_bytes((64, 8), b"".join(rows)))
        self.empty_g = write(os.path.join(root, "g0.npy"), npy_bytes((0,)))
        self.done = False

    def p(self, name):
        return os.path.join(self.d, name)

    def mknod(self, name, major, minor, block=False):
        path = self.p(name)
        os.mknod(path, 0o600 | (stat.S_IFBLK if block else stat.S_IFCHR), os.makedev(major, minor))
        return path

    def fifo(self, name):
        path = self.p(name)
        os.mkfifo(path)
        return path


class Skip(Exception):
    """A case that cannot run here; the row says why."""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def fake_store(env, reply):
    """A listening socket that answers the first request of each connection with `reply`, then closes."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    env.keep_store = srv

    def serve():
        end = time.monotonic() + HARD_TIMEOUT_S
        while time.monotonic() < end and not env.done:
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            with c:
                try:
                    c.settimeout(1.0)
                    c.recv(4096)
                    c.sendall(reply)
                    time.sleep(0.2)
                except OSError:
                    pass
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def samples(env, *extra):
    return ["verify", "--samples", env.g, env.v] + list(extra)


# Each case: (name, needs_root, setup(env) -> (args, check(env) -> problem or None), expected exit codes).
def cases():
    out = []

    def add(name, setup, expect=(2,), root=False):
        out.append((name, root, setup, expect))

    # ---- outputs never replace what they must not
    def json_to_chardev(env):
        node = env.mknod("null", 1, 3)
        return samples(env, "--json", node), lambda e: None if kind(node) == "chardev" else "the device node was replaced"
    add("verify --json <private /dev/null node>", json_to_chardev, (0,), root=True)

    def json_to_full(env):
        node = env.mknod("full", 1, 7)
        return samples(env, "--json", node), lambda e: None if kind(node) == "chardev" else "the device node was replaced"
    add("verify --json <private /dev/full node> (ENOSPC)", json_to_full, (2,), root=True)

    def json_to_blockdev(env):
        node = env.mknod("loop", 7, 200, block=True)
        return samples(env, "--json", node), lambda e: None if kind(node) == "blockdev" else "the block device was replaced"
    add("verify --json <private block device node>", json_to_blockdev, (2,), root=True)

    def json_to_symlink(env):
        target = write(env.p("target.json"), b"old")
        link = env.p("link.json")
        os.symlink("target.json", link)

        def check(e):
            if kind(link) != "symlink":
                return "the symlink was replaced"
            return None if open(target, "rb").read().startswith(b"[") or open(target, "rb").read().startswith(b"{") \
                else "the link's target was not written"
        return samples(env, "--json", link), check
    add("verify --json <symlink to a file>", json_to_symlink, (0,))

    def junit_to_fifo(env):
        fifo = env.fifo("fifo.xml")
        return samples(env, "--junit", fifo), lambda e: None if kind(fifo) == "fifo" else "the FIFO was replaced"
    add("verify --junit <FIFO with no reader>", junit_to_fifo, (2,))

    def json_to_socket(env):
        path = env.p("sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        env.keep = s
        return samples(env, "--json", path), lambda e: None if kind(path) == "socket" else "the socket was replaced"
    add("verify --json <unix socket>", json_to_socket, (2,))

    # ---- .npy inputs: bounded before any allocation
    def shape_1e9_0(env):
        return ["verify", "--samples", env.empty_g, write(env.p("v1e9.npy"), npy_bytes((10**9, 0)))], None
    add("verify --samples g(0,) values(1e9, 0) (128 bytes)", shape_1e9_0)

    def shape_2p32_0(env):
        return ["verify", "--samples", env.empty_g, write(env.p("v2p32.npy"), npy_bytes((2**32 - 1, 0)))], None
    add("verify --samples g(0,) values(2^32-1, 0)", shape_2p32_0)

    def shape_product_huge(env):
        return ["verify", "--samples", env.g, write(env.p("vbig.npy"), npy_bytes((2**40, 8)))], None
    add("verify --samples values shape (2^40, 8), 128 bytes", shape_product_huge)

    def dev_zero(env):
        node = env.mknod("zero", 1, 5) if env.root_user else "/dev/zero"
        return ["verify", "--samples", env.g, node], None
    add("verify --samples g /dev/zero", dev_zero)

    def fifo_in(env):
        return ["verify", "--samples", env.g, env.fifo("in.npy")], None
    add("verify --samples g <FIFO with no writer>", fifo_in)

    def sparse_6g(env):
        path = env.p("sparse.npy")
        with open(path, "wb") as f:
            f.write(npy_bytes((64, 8)))
            f.truncate(6 * 2**30)
        return ["verify", "--samples", env.g, path], None
    add("verify --samples sparse 6 GiB file, header (64, 8)", sparse_6g)

    def sparse_6g_consistent(env):
        path = env.p("sparse2.npy")
        n = (6 * 2**30) // 32
        hdr = npy_bytes((n, 8))
        with open(path, "wb") as f:
            f.write(hdr)
            f.truncate(len(hdr) + n * 32)
        return ["verify", "--samples", env.g, path], None
    add("verify --samples sparse 6 GiB file, header matching its size", sparse_6g_consistent)

    def huge_header(env):
        data = b"\x93NUMPY\x02\x00" + struct.pack("<I", 2**31) + b"{"
        return ["verify", "--samples", env.g, write(env.p("hh.npy"), data)], None
    add("verify --samples header length 2^31 (v2.0)", huge_header)

    # ---- an external codec's output that never ends or blocks
    def exec_output(make, timeout="5"):
        def setup(env):
            script = env.p("codec.sh")
            with open(script, "w") as f:
                f.write('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --output ] && out=$2; shift; done\n' + make + "\n")
            os.chmod(script, 0o755)
            return ["verify", "--impl", "exec:" + script, "--profile", "quick", "--no-progress", "--exec-timeout", timeout], None
        return setup
    add("verify --impl exec: codec output is a FIFO", exec_output('mkfifo "$out"'))
    add("verify --impl exec: codec output -> /dev/zero", exec_output('ln -s /dev/zero "$out"'))
    add("verify --impl exec: codec output sparse 6 GiB", exec_output('truncate -s 6G "$out"'))
    add("verify --impl exec: codec that never exits (--exec-timeout 0.05)", exec_output("exec sleep 30", "0.05"))

    def serve_endless_line(env):
        script = env.p("serve.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexec yes terngrad | tr -d '\\n'\n")
        os.chmod(script, 0o755)
        return ["verify", "--impl", "serve:" + script, "--profile", "quick", "--no-progress", "--exec-timeout", "5"], None
    add("verify --impl serve: a line that never ends", serve_endless_line)

    # ---- numbers mean what they say
    for args, name in ((["demo", "--elements", "1000", "--seed", "-1"], "demo --seed -1"),
                       (["demo", "--elements", "1000", "--seed", "18446744073709551616"], "demo --seed 2^64"),
                       (["demo", "--elements", "1000", "--seed", "1e3"], "demo --seed 1e3"),
                       (["verify", "--exec-timeout", "nan", "--impl", "reference"], "verify --exec-timeout nan"),
                       (["verify", "--exec-timeout", "inf", "--impl", "reference"], "verify --exec-timeout inf"),
                       (["train", "--epochs", "nan"], "train --epochs nan"),
                       (["train", "--timeout-s", "nan"], "train --timeout-s nan"),
                       (["launch", "--grace-s", "nan", "--", "--steps", "1"], "launch --grace-s nan"),
                       (["train", "--seed", "-5"], "train --seed -5")):
        add(name, (lambda a: lambda env: (a, None))(args))
    add("demo --seed 2^64-1 (the largest seed)",
        lambda env: (["demo", "--elements", "1000", "--seed", "18446744073709551615"], None), (0,))
    add("verify --samples ... --scalar nan", lambda env: (samples(env, "--scalar", "nan"), None))
    add("verify --samples ... --alpha 1e-300", lambda env: (samples(env, "--alpha", "1e-300"), None), (0,))
    add("verify: every check skipped",
        lambda env: (["verify", "--impl", "reference", "--no-progress", "--skip",
                      "structure,unbiased,variance,independence,streams,collision,clipping,layerwise,aggregate,cross"],
                     None))

    # ---- files that never end or block
    add("report --note /dev/zero", lambda env: (["report", "--note", "/dev/zero", "--reports", env.d], None))
    add("report --note <FIFO>", lambda env: (["report", "--note", env.fifo("note.md"), "--reports", env.d], None))
    add("train --resume <FIFO>", lambda env: (["train", "--resume", env.fifo("ckpt")], None))
    add("train --resume /dev/zero", lambda env: (["train", "--resume", "/dev/zero"], None))

    # ---- a full disk: RLIMIT_FSIZE makes the write fail (EFBIG) mid-file; SIGXFSZ is ignored by the program
    def fsize_json(env):
        out_path = write(env.p("out.json"), b'{"earlier": "a report of a previous run"}\n')

        # The writer never leaves a half-written file or a temporary; the program then removes the report an
        # earlier run left there, since this run ended in an error (a pipeline must not read it as this run's).
        def check(e):
            left = sorted(n for n in os.listdir(e.d) if n not in ("g.npy", "v.npy", "g0.npy"))
            if "out.json" in left:
                return "the earlier report is still there (a run that ends in an error removes it)"
            return "left behind: %s" % left if left else None
        return samples(env, "--json", out_path), check, {"fsize": 1024}
    add("verify --json out.json, file size limit 1 KiB (EFBIG)", fsize_json)

    # ---- a full disk for real: a 16 KiB tmpfs, mounted in a private mount namespace (unshare -m), filled up
    def full_tmpfs(env):
        probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs %s" % shlex.quote(env.d)],
                               capture_output=True, text=True) if shutil.which("unshare") else None
        if probe is None or probe.returncode != 0:
            raise Skip("no private mount namespace here (unshare -m with a tmpfs mount failed%s)"
                       % ("" if probe is None else ": " + (probe.stderr.strip().splitlines() or [""])[-1]))
        full = env.p("full")
        os.mkdir(full)
        script = ("mount -t tmpfs -o size=16k tmpfs {f} && printf '{{}}' > {f}/out.json && "
                  "(head -c 65536 /dev/zero > {f}/filler 2>/dev/null; true) && "
                  "{{ \"$@\"; rc=$?; ls -A {f} > {d}/after.ls; exit $rc; }}"
                  ).format(f=shlex.quote(full), d=shlex.quote(env.d))

        def check(e):
            try:
                left = open(e.p("after.ls")).read().split()
            except OSError as err:
                return "no record from inside the namespace (%s)" % err
            if "out.json" in left:
                return "the earlier report is still there (a run that ends in an error removes it)"
            extra = sorted(set(left) - {"filler"})
            return "left behind on the full disk: %s" % extra if extra else None
        return (["--unshare-mount", script] + samples(env, "--json", os.path.join(full, "out.json")), check, {})
    add("verify --json on a full 16 KiB tmpfs (ENOSPC, private mount namespace)", full_tmpfs, root=True)

    # ---- smaller ones
    add("report --python /bin/false", lambda env: (["report", "--python", "/bin/false", "--reports", env.d], None))
    add("report --python /bin/true", lambda env: (["report", "--python", "/bin/true", "--reports", env.d], None))
    add("report --live-draws 1000000 (over 200000)",
        lambda env: (["report", "--live-draws", "1000000", "--reports", env.d], None))
    add("train --batch 1048576 (the documented maximum)",
        lambda env: (["train", "--data", "synthetic", "--batch", "1048576", "--steps", "1", "--no-progress",
                      "--out", env.p("run")], None))

    add("train --batch 1048576 on Fashion-MNIST",
        lambda env: (["train", "--batch", "1048576", "--steps", "1", "--no-progress", "--out", env.p("run")], None))

    # ---- a store peer that sends garbage (the rendezvous store, experiments/train/src/store.cpp)
    def rank_vs_garbage_store(reply):
        def setup(env):
            port = fake_store(env, reply)
            return ["train", "--data", "synthetic", "--steps", "1", "--no-progress", "--world-size", "2", "--rank", "1",
                    "--external-store", "true", "--master-port", str(port), "--timeout-s", "1"], None
        return setup
    add("train rank 1, its store answers 0xff bytes", rank_vs_garbage_store(b"\xff" * 64))
    add("train rank 1, its store answers a 4 GiB length", rank_vs_garbage_store(b"\x82\xff\xff\xff\xff"))
    add("train rank 1, its store answers 'stop waiting' + length 2^64-1 (c10d's format)",
        rank_vs_garbage_store(b"\x00" + b"\xff" * 8))
    add("train rank 1, its store answers a value of 2^32-16 bytes",
        rank_vs_garbage_store(b"\x82\x04\x00\x00\x00\xf0\xff\xff\xff"))

    def rank0_vs_garbage_peer(env):
        port = free_port()

        def peer():
            garbage = [b"\x01\xff\xff\xff\xff", b"\x05\x04\x00\x00\x00\xff\xff\xff\xff", b"\xff" * 4096,
                       b"\x01\x0d\x00\x00\x00\x01\x00\x00\x00k\xff\xff\xff\x7f"]
            deadline = time.monotonic() + 1.5
            sent = 0
            while sent < len(garbage) and time.monotonic() < deadline:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5) as c:
                        c.sendall(garbage[sent])
                        c.recv(64)
                    sent += 1
                except OSError:
                    time.sleep(0.05)
        return (["train", "--data", "synthetic", "--steps", "1", "--no-progress", "--world-size", "2", "--rank", "0",
                 "--master-port", str(port), "--timeout-s", "0.3"], None, {"peer": peer})
    add("train rank 0, a peer sends garbage to its store (rank 1 never joins)", rank0_vs_garbage_peer)
    return out


def run_case(exe, env, args, timeout, opts):
    fsize = opts.get("fsize")

    def limits():
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    if opts.get("peer"):
        threading.Thread(target=opts["peer"], daemon=True).start()
    cmd = [exe] + args
    if args and args[0] == "--unshare-mount":  # run inside a private mount namespace: sh -c SCRIPT sh exe args...
        cmd = ["unshare", "-m", "sh", "-c", args[1], "sh", exe] + args[2:]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=env.d, start_new_session=True, preexec_fn=limits)
    deadline = t0 + timeout
    timed_out = False
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pid, status, ru = os.wait4(proc.pid, 0)
            timed_out = True
            break
        time.sleep(0.01)
    wall = time.monotonic() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.WIFEXITED(status):
        code = str(os.WEXITSTATUS(status))
    else:
        code = "signal %d" % os.WTERMSIG(status)
    if timed_out:
        code = "timeout (killed after %.0f s)" % timeout
    # progress lines are not error lines: a rank's "reached the store at ..." before its rendezvous
    lines = [l for l in err.splitlines() if l.strip() and not l.startswith("Run with --help")
             and "reached the store at" not in l]
    return code, (lines[-1] if lines else ""), ru.ru_maxrss / 1024.0, wall, len(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--terngrad", required=True)
    ap.add_argument("--write-report", help="Markdown file whose hostile table is replaced")
    ap.add_argument("--timeout", type=float, default=HARD_TIMEOUT_S)
    ap.add_argument("--only", help="run only the cases whose name contains this text")
    a = ap.parse_args()
    exe = os.path.abspath(a.terngrad)
    help_text = subprocess.run([exe, "--help"], capture_output=True, text=True).stdout
    rows, failures = [], 0
    for name, needs_root, setup, expect in cases():
        if a.only and a.only not in name:
            continue
        sub = name.split()[0].rstrip(":")
        if sub not in help_text:
            rows.append((name, "skipped: this build has no `%s`" % sub, "", "", "", ""))
            continue
        if needs_root and os.geteuid() != 0:
            rows.append((name, "skipped: mknod needs root", "", "", "", ""))
            continue
        root = tempfile.mkdtemp(prefix="tg-hostile-")
        try:
            env = Env(root)
            try:
                got = setup(env)
            except Skip as why:
                rows.append((name, "skipped: %s" % why, "", "", "", ""))
                print("%-58s skipped: %s" % (name, why), flush=True)
                continue
            args, check, opts = got if len(got) == 3 else (got[0], got[1], {})
            code, msg, mb, wall, nlines = run_case(exe, env, args, a.timeout, opts)
            env.done = True
            problems = []
            if code not in [str(c) for c in expect]:
                problems.append("exit %s, expected %s" % (code, "/".join(str(c) for c in expect)))
            if code not in ("0", "1", "2"):
                problems.append("exit code outside 0/1/2")
            if code == "2" and nlines != 1:
                problems.append("%d stderr lines (want 1)" % nlines)
            if UNCHECKED_SIZE.search(msg):
                problems.append("an allocation error from an unchecked size")
            if wall > TIME_LIMIT_S:
                problems.append("%.2f s > %.0f s" % (wall, TIME_LIMIT_S))
            if mb > MEMORY_LIMIT_MB:
                problems.append("%.0f MB > %d MB" % (mb, MEMORY_LIMIT_MB))
            if check:
                p = check(env)
                if p:
                    problems.append(p)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        verdict = "ok" if not problems else "FAIL: " + "; ".join(problems)
        failures += bool(problems)
        rows.append((name, code, msg.replace("|", "\\|").replace(root, "<tmp>")[:160], "%.0f" % mb, "%.2f" % wall, verdict))
        print("%-58s exit %-6s %6.0f MB %6.2f s  %s\n    %s" % (name, code, mb, wall, verdict, msg[:200]), flush=True)
    if a.write_report:
        table = ["| input | exit | message (last stderr line) | peak MB | s | verdict |",
                 "|---|---|---|---|---|---|"]
        table += ["| %s |" % " | ".join(c.replace("<", "&lt;") for c in r) for r in rows]
        note = ("Measured on %s (%d CPUs, shared) by `python3 fuzz/hostile/run.py --terngrad %s --write-report %s`; "
                "peak MB = ru_maxrss of the process, s = wall time. Limits: %.0f s, %d MB, exit 0/1/2."
                % (platform.machine(), os.cpu_count(), os.path.relpath(a.terngrad), a.write_report, TIME_LIMIT_S,
                   MEMORY_LIMIT_MB))
        text = open(a.write_report).read()
        begin, end = "<!-- hostile-table:begin -->", "<!-- hostile-table:end -->"
        block = begin + "\n" + note + "\n\n" + "\n".join(table) + "\n" + end
        if begin in text and end in text:
            text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
        else:
            text = text.rstrip() + "\n\n## Hostile inputs (fuzz/hostile/run.py)\n\n" + block + "\n"
        with open(a.write_report, "w") as f:
            f.write(text)
    print("%d cases, %d failed" % (len(rows), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
