#!/usr/bin/env python3
# terngrad-bench: checks `terngrad model` against measured multi-process LeNet runs (c10d/Gloo over
# loopback) under emulated bandwidths: every rank of a run sits in one network namespace whose loopback
# is shaped by one tc tbf qdisc, so all ranks share one link (the model's `--topology shared`).
# Needs root (ip netns, tc). Writes reports/model/{validation.csv,validation.json,validation.md,
# paper.csv,paper.json,*.png}; the raw runs go to reports/model/.runs/ (not in git).
#   sudo build/venv/bin/python scripts/model_validate.py --terngrad build/default/apps/terngrad
#   build/venv/bin/python scripts/model_validate.py --terngrad build/default/apps/terngrad --report-only
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

TRANSFER_HELPER = r"""
import socket, sys, threading, time
nbytes, flows = int(sys.argv[1]), int(sys.argv[2])
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(flows)
port = srv.getsockname()[1]
got = []
def receive():
    c, _ = srv.accept(); n = 0
    while True:
        b = c.recv(1 << 20)
        if not b: break
        n += len(b)
    got.append(n)
def send():
    c = socket.create_connection(("127.0.0.1", port)); buf = b"\0" * (1 << 16); sent = 0
    while sent < nbytes:
        c.sendall(buf); sent += len(buf)
    c.close()
rs = [threading.Thread(target=receive) for _ in range(flows)]
for r in rs: r.start()
t0 = time.perf_counter()
ss = [threading.Thread(target=send) for _ in range(flows)]
for s in ss: s.start()
for s in ss + rs: s.join()
print(sum(got), time.perf_counter() - t0)
"""


def fail(msg):
    print(f"model_validate.py: {msg}", file=sys.stderr)
    sys.exit(2)


def run(cmd, log, **kw):
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, **kw)
    if r.returncode != 0:
        fail(f"command failed (exit {r.returncode}), see {log}: {' '.join(cmd)}")


def netns_up(name, mbit):
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "mtu", "1500", "up"], check=True)
    # burst 64 kbit (8 KB) holds a few 1500-byte packets; latency 50 ms bounds the queue
    subprocess.run(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate",
                    f"{mbit}mbit", "burst", "64kbit", "latency", "50ms"], check=True)


def goodput(ns, mbit, flows):
    nbytes = int(mbit * 1e6 / 8 * 2 / flows)  # about 2 s of traffic
    cmd = ([] if ns is None else ["ip", "netns", "exec", ns]) + [sys.executable, "-c", TRANSFER_HELPER, str(nbytes), str(flows)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120).stdout.split()
    total, seconds = int(out[0]), float(out[1])
    return total * 8 / seconds / 1e6


def steps_stats(path, warmup):
    rows = list(csv.DictReader(open(path)))[warmup:]
    if not rows:
        fail(f"{path} has no steps after the {warmup} warm-up steps")
    cols = ["compute_s", "encode_s", "comm_s", "decode_s", "optimizer_s"]
    mean = {c: statistics.fmean(float(r[c]) for r in rows) for c in cols}
    mean["step_s"] = sum(mean[c] for c in cols)
    mean["steps"] = len(rows)
    return mean


# The measured arms: trainer options, and the `terngrad model` scheme that describes the same exchange.
# The float arm names its exchange explicitly (the trainer's default is the allreduce): a prediction for
# the allgather compared with an allreduce run would be off by (N-1)S / (2(N-1)S/N) on the link.
ARMS = {
    "float": (["--codec", "float", "--float-exchange", "allreduce"], "float-allreduce"),
    "float-allgather": (["--codec", "float", "--float-exchange", "allgather"], "float-allgather"),
    "terngrad": (["--codec", "terngrad"], "terngrad-allgather"),
}
COLORS = {"float": "tab:blue", "float-allgather": "tab:green", "terngrad": "tab:red"}


def train_args(args, arm, out):
    return ["--model", "lenet"] + ARMS[arm][0] + ["--batch", str(args.batch), "--steps", str(args.steps),
            "--train-limit", "4096", "--test-limit", "256", "--eval-every", "0", "--no-progress",
            "--seed", "1", "--out", out]


def measure(args, out_dir):
    if os.geteuid() != 0:
        fail("the measured runs need root (ip netns, tc); run with sudo, or --report-only")
    runs = os.path.join(out_dir, ".runs")  # hidden: `terngrad report` would list its runs as training results
    os.makedirs(runs, exist_ok=True)
    log = os.path.join(runs, "commands.log")
    meta = {"cpus": os.cpu_count(), "rates_mbit": args.mbits, "ranks": args.ranks, "steps": args.steps,
            "batch_total": args.batch, "warmup": args.warmup, "goodput_mbit": {}, "goodput_2flows_mbit": {},
            "load": {}}
    created = []
    try:
        for mbit in args.mbits:
            ns = f"tgm{mbit}"
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            netns_up(ns, mbit)
            created.append(ns)
            meta["goodput_mbit"][str(mbit)] = goodput(ns, mbit, 1)
            meta["goodput_2flows_mbit"][str(mbit)] = goodput(ns, mbit, 2)
            print(f"{mbit} mbit tbf: TCP goodput {meta['goodput_mbit'][str(mbit)]:.1f} Mbit/s (1 flow), "
                  f"{meta['goodput_2flows_mbit'][str(mbit)]:.1f} Mbit/s (2 flows together)", flush=True)
        for n in args.ranks:
            for codec in ARMS:
                for mbit in [0] + args.mbits:
                    name = f"lenet-{codec}-{n}r-{'unshaped' if mbit == 0 else f'{mbit}mbit'}"
                    out = os.path.join(runs, name)
                    shutil.rmtree(out, ignore_errors=True)
                    prefix = [] if mbit == 0 else ["ip", "netns", "exec", f"tgm{mbit}"]
                    load0 = os.getloadavg()[0]
                    t0 = time.time()
                    run(prefix + [args.terngrad, "launch", "--nproc", str(n), "--"] + train_args(args, codec, out), log)
                    meta["load"][name] = {"before": load0, "after": os.getloadavg()[0]}
                    print(f"{name}: {time.time() - t0:.0f} s, load average {load0:.2f} -> {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        for ns in created:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    # codec rates measured once, in-process, right after the runs, and kept with them: every prediction
    # (and a later --report-only) uses these
    tmp = os.path.join(runs, "model-tmp")
    os.makedirs(tmp, exist_ok=True)
    meta["codec_rates"] = predict(args, tmp, ["--net", "lenet", "--compute-s", "0", "--workers", "1",
                                              "--codec-rates", "measure"])["codec_rates_elements_per_s"]
    meta["codec_rates"]["load"] = os.getloadavg()[0]
    json.dump(meta, open(os.path.join(runs, "meta.json"), "w"), indent=1)


def predict(args, tmp, extra):
    path = os.path.join(tmp, "model.json")
    r = subprocess.run([args.terngrad, "model", "--quiet", "--json", path] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        fail("terngrad model " + " ".join(extra) + ": " + r.stderr.strip())
    return json.load(open(path))["configs"][0]


def report(args, out_dir):
    runs = os.path.join(out_dir, ".runs")  # hidden: `terngrad report` would list its runs as training results
    if not os.path.isfile(os.path.join(runs, "meta.json")):
        fail(f"{runs}/meta.json is missing: there are no measured runs to report; run without --report-only first")
    with open(os.path.join(runs, "meta.json")) as f:
        meta = json.load(f)
    tmp = os.path.join(runs, "model-tmp")
    os.makedirs(tmp, exist_ok=True)
    r = meta["codec_rates"]
    rate_arg = f"{r['ternary_encode']:.6g},{r['ternary_aggregate']:.6g},{r['float_encode']:.6g},{r['float_decode']:.6g}"
    rows = []
    for n in meta["ranks"]:
        for codec in ARMS:
            unshaped = os.path.join(runs, f"lenet-{codec}-{n}r-unshaped")
            if not os.path.exists(os.path.join(unshaped, "steps.csv")):
                fail(f"{unshaped}/steps.csv is missing: measure the runs again (without --report-only)")
            base = steps_stats(os.path.join(unshaped, "steps.csv"), meta["warmup"])
            for mbit in meta["rates_mbit"]:
                name = f"lenet-{codec}-{n}r-{mbit}mbit"
                if not os.path.exists(os.path.join(runs, name, "steps.csv")):
                    fail(f"{runs}/{name}/steps.csv is missing: measure the runs again (without --report-only)")
                m = steps_stats(os.path.join(runs, name, "steps.csv"), meta["warmup"])
                gp = meta["goodput_mbit"][str(mbit)]
                cfg = predict(args, tmp, ["--net", "lenet", "--batch", str(meta["batch_total"] // n), "--workers", str(n),
                                          "--compute-from", os.path.join(unshaped, "steps.csv"), "--warmup", str(meta["warmup"]),
                                          "--topology", "shared", "--bandwidth-gbps", f"{gp / 1000:.6g}", "--latency-us", "0",
                                          "--codec-rates", rate_arg])
                p = next(x for x in cfg["rows"] if x["scheme"] == ARMS[codec][1])
                measured = meta["batch_total"] / m["step_s"]
                rows.append({
                    "ranks": n, "codec": codec, "scheme": ARMS[codec][1], "tbf_mbit": mbit, "goodput_mbit": round(gp, 2),
                    "measured_img_s": round(measured, 2), "predicted_img_s": round(p["images_per_s"], 2),
                    "rel_error": round(p["images_per_s"] / measured - 1, 4),
                    "measured_step_s": round(m["step_s"], 4), "predicted_step_s": round(p["step_s"], 4),
                    "measured_comm_s": round(m["comm_s"], 4), "predicted_comm_s": round(p["comm_s"], 4),
                    "measured_compute_s": round(m["compute_s"] + m["optimizer_s"], 4),
                    "predicted_compute_s": round(p["compute_s"], 4),
                    "measured_codec_s": round(m["encode_s"] + m["decode_s"], 4),
                    "predicted_codec_s": round(p["encode_s"] + p["decode_s"], 4),
                    "unshaped_comm_s": round(base["comm_s"], 4),
                    "load_before": round(meta["load"][name]["before"], 2), "load_after": round(meta["load"][name]["after"], 2),
                })
    with open(os.path.join(out_dir, "validation.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    json.dump({"meta": meta, "codec_rates": r, "rows": rows}, open(os.path.join(out_dir, "validation.json"), "w"), indent=1)
    errs = [abs(x["rel_error"]) for x in rows]
    lines = ["| ranks | arm (model scheme) | tbf | goodput Mbit/s | measured img/s | predicted img/s | error | step s meas / pred | comm s meas / pred | compute s meas / pred | codec s meas / pred | load avg |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for x in rows:
        lines.append(f"| {x['ranks']} | {x['codec']} ({x['scheme']}) | {x['tbf_mbit']} mbit | {x['goodput_mbit']:.1f} | {x['measured_img_s']:.1f} | "
                     f"{x['predicted_img_s']:.1f} | {100 * x['rel_error']:+.1f}% | {x['measured_step_s']:.3f} / {x['predicted_step_s']:.3f} | "
                     f"{x['measured_comm_s']:.3f} / {x['predicted_comm_s']:.3f} | {x['measured_compute_s']:.3f} / {x['predicted_compute_s']:.3f} | "
                     f"{x['measured_codec_s']:.4f} / {x['predicted_codec_s']:.4f} | {x['load_before']:.1f} -> {x['load_after']:.1f} |")
    lines.append("")
    lines.append(f"Mean |error| {100 * statistics.fmean(errs):.1f}%, largest {100 * max(errs):.1f}% over {len(rows)} runs.")
    open(os.path.join(out_dir, "validation.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    # the paper preset, for the figure
    subprocess.run([args.terngrad, "model", "--preset", "paper", "--quiet", "--json", os.path.join(out_dir, "paper.json"),
                    "--csv", os.path.join(out_dir, "paper.csv")], check=True)
    shutil.rmtree(tmp, ignore_errors=True)
    plot(out_dir, rows, meta)


def plot(out_dir, rows, meta):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not found: no figures (run with build/venv/bin/python)")
        return
    fig, axes = plt.subplots(1, len(meta["rates_mbit"]), figsize=(5 * len(meta["rates_mbit"]), 4), squeeze=False)
    for ax, mbit in zip(axes[0], meta["rates_mbit"]):
        for codec, color in COLORS.items():
            sel = [x for x in rows if x["codec"] == codec and x["tbf_mbit"] == mbit]
            ax.plot([x["ranks"] for x in sel], [x["measured_img_s"] for x in sel], "o-", color=color, label=f"{ARMS[codec][1]} measured")
            ax.plot([x["ranks"] for x in sel], [x["predicted_img_s"] for x in sel], "x--", color=color, label=f"{ARMS[codec][1]} predicted")
        ax.set_title(f"LeNet, Fashion-MNIST, Gloo ranks on loopback\ntbf {mbit} mbit (goodput {meta['goodput_mbit'][str(mbit)]:.0f} Mbit/s), 2 cores")
        ax.set_xlabel("ranks")
        ax.set_ylabel("images/s")
        ax.set_xticks(meta["ranks"])
        ax.set_yscale("log")  # float and TernGrad differ by 3-13x: on a linear axis the float lines are flat
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8)  # one legend, below: none covers a line
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(os.path.join(out_dir, "validation.png"), dpi=110)
    paper = json.load(open(os.path.join(out_dir, "paper.json")))["configs"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 7))
    for k, c in enumerate(paper):
        ax = axes[k % 2][k // 2]
        for scheme, color in (("float-ps", "tab:blue"), ("terngrad-ps", "tab:red")):
            sel = [x for x in c["rows"] if x["scheme"] == scheme]
            ax.plot([x["workers"] for x in sel], [x["images_per_s"] for x in sel], "o-", color=color, label=scheme, ms=3)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(c["label"], fontsize=10)
        ax.set_xlabel("workers (GPUs)")
        ax.set_ylabel("images/s")
        ax.legend(fontsize=8)
    fig.suptitle("terngrad model --preset paper (assumed GPU step times; see README)")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "paper_preset.png"), dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--terngrad", required=True, help="the terngrad program")
    ap.add_argument("--out", default="reports/model")
    ap.add_argument("--mbits", default="200,50", help="tbf rates in Mbit/s, comma-separated")
    ap.add_argument("--ranks", default="2,3,4")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=96, help="total batch (divisible by every rank count)")
    ap.add_argument("--report-only", action="store_true", help="only the predictions and the report, from runs/")
    args = ap.parse_args()
    try:
        args.mbits = [int(x) for x in args.mbits.split(",")]
        args.ranks = [int(x) for x in args.ranks.split(",")]
    except ValueError:
        fail("--mbits and --ranks take comma-separated integers")
    if any(m <= 0 for m in args.mbits) or any(n < 1 for n in args.ranks):
        fail("--mbits and --ranks must be positive")
    if any(args.batch % n for n in args.ranks):
        fail(f"--batch {args.batch} is not divisible by every rank count {args.ranks}")
    if args.steps <= args.warmup:
        fail("--steps must exceed --warmup")
    if not os.access(args.terngrad, os.X_OK):
        fail(f"{args.terngrad} is not an executable")
    args.terngrad = os.path.abspath(args.terngrad)
    if not args.report_only:
        measure(args, args.out)
    report(args, args.out)


if __name__ == "__main__":
    main()
