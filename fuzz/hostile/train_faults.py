#!/usr/bin/env python3
"""terngrad-bench: training faults of issue 16, against the built `terngrad` (ctest tg_train_hostile,
labels reliability;train). Each case prints its measured figures; any problem fails the script.

  launcher-death   SIGKILL of `terngrad launch`: every rank must be gone within RANK_EXIT_BOUND_S
                   (PR_SET_PDEATHSIG); before: ranks kept training.
  checkpoint       1-byte flips at 8 positions of a checkpoint, a truncated one, a foreign file and a
                   checkpoint of another model: each --resume refused (exit 2, one line naming what
                   differs) before training; an intact one resumes into the same --out and the curve
                   continues (steps 0..3, not 2..3).

    python3 fuzz/hostile/train_faults.py --terngrad build/default/apps/terngrad [--only NAME]
"""
import argparse
import csv
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

RANK_EXIT_BOUND_S = 2.0
RUN = ["--data", "synthetic", "--batch", "8", "--eval-every", "0", "--test-limit", "8",
       "--train-limit", "64", "--no-progress"]


def children(pid):
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(p))
        except (OSError, IndexError, ValueError):
            pass
    return out


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def launcher_death(exe, tmp):
    proc = subprocess.Popen([exe, "launch", "--nproc", "2", "--"] + RUN + ["--model", "lenet"] + ["--steps", "1000000", "--timeout-s", "60"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ranks = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60 and len(ranks) < 2:
        ranks = children(proc.pid)
        time.sleep(0.1)
    if len(ranks) < 2:
        os.killpg(proc.pid, signal.SIGKILL)
        return f"only {len(ranks)} ranks started within 60 s"
    time.sleep(3.0)  # let them train
    proc.kill()
    proc.wait()
    t_kill = time.monotonic()
    while time.monotonic() - t_kill < 15 and any(alive(r) for r in ranks):
        time.sleep(0.05)
    gone_s = time.monotonic() - t_kill
    left = [r for r in ranks if alive(r)]
    for r in left:
        os.kill(r, signal.SIGKILL)
    print(f"  launcher SIGKILLed; ranks {ranks}: {'all gone after %.2f s' % gone_s if not left else 'still running after 15 s: %s' % left}")
    if left or gone_s > RANK_EXIT_BOUND_S:
        return f"ranks outlived the launcher ({gone_s:.2f} s, bound {RANK_EXIT_BOUND_S} s)"
    return None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def train(exe, args, cwd):
    t0 = time.monotonic()
    model = [] if "--model" in args else ["--model", "lenet"]
    p = subprocess.run([exe, "train"] + RUN + model + args, capture_output=True, text=True, cwd=cwd)
    lines = [l for l in p.stderr.splitlines() if l.strip() and not l.startswith("Run with --help")]
    return p.returncode, lines, time.monotonic() - t0


def steps_of(path):
    with open(path) as f:
        return [int(r["step"]) for r in csv.DictReader(f)]


def checkpoint(exe, tmp):
    problems = []
    ck = os.path.join(tmp, "ck")
    out = os.path.join(tmp, "out")
    rc, lines, s = train(exe, ["--steps", "2", "--checkpoint", ck, "--out", out], tmp)
    if rc != 0:
        return f"the first run failed ({rc}): {lines[-1:]}"
    data = open(ck, "rb").read()
    print(f"  checkpoint of {len(data)} bytes after 2 steps ({s:.1f} s)")
    bad = os.path.join(tmp, "bad")
    positions = [0, 100, len(data) // 4, len(data) // 2, 3 * len(data) // 4, len(data) - 200, len(data) - 40, len(data) - 1]
    cases = []
    for pos in positions:
        cases.append((f"byte {pos} flipped", data[:pos] + bytes([data[pos] ^ 0x10]) + data[pos + 1:]))
    cases.append(("truncated by 100 bytes", data[:-100]))
    cases.append(("a foreign file", b"PK\x03\x04" + b"\x00" * 200))
    for name, content in cases:
        with open(bad, "wb") as f:
            f.write(content)
        rc, lines, s = train(exe, ["--steps", "4", "--resume", bad, "--out", os.path.join(tmp, "o2")], tmp)
        msg = lines[-1] if lines else ""
        print(f"  {name}: exit {rc}, {s:.1f} s: {msg[:160]}")
        if rc != 2 or len(lines) != 1:
            problems.append(f"{name}: exit {rc}, {len(lines)} stderr lines")
    rc, lines, s = train(exe, ["--steps", "4", "--resume", ck, "--model", "cifarnet", "--out", os.path.join(tmp, "o3")], tmp)
    print(f"  another model's checkpoint: exit {rc}: {(lines[-1] if lines else '')[:160]}")
    if rc != 2:
        problems.append(f"another model's checkpoint: exit {rc}")
    rc, lines, s = train(exe, ["--steps", "4", "--resume", ck, "--out", out], tmp)
    got = steps_of(os.path.join(out, "steps.csv")) if rc == 0 else []
    print(f"  intact checkpoint resumed into the same --out: exit {rc}, steps.csv steps {got}")
    if rc != 0 or got != [0, 1, 2, 3]:
        problems.append(f"resume into the same --out: exit {rc}, steps {got} (want [0, 1, 2, 3])")
    return "; ".join(problems) or None


CASES = {"launcher-death": launcher_death, "checkpoint": checkpoint}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--terngrad", required=True)
    ap.add_argument("--only", choices=sorted(CASES))
    a = ap.parse_args()
    exe = os.path.abspath(a.terngrad)
    failed = 0
    for name, fn in CASES.items():
        if a.only and name != a.only:
            continue
        with tempfile.TemporaryDirectory(prefix="tg-train-hostile-") as tmp:
            print(f"{name}:", flush=True)
            problem = fn(exe, tmp)
        print(f"  -> {'ok' if not problem else 'FAIL: ' + problem}", flush=True)
        failed += bool(problem)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
