"""terngrad-bench: turns the multi-seed study of scripts/train-seeds.sh into reports/train/seeds.md and its
figures: per arm (codec setting) and worker count, the mean final test accuracy over seeds with a 95%
t-interval, the paired float-minus-arm gap with its interval (runs of one seed share initialization and
data order), and accuracy against steps, communicated bytes and time with per-seed bands.
Raw run folders are not kept in git (a LeNet run's steps.csv alone is about 1 MB); every render writes one
small digest per finished run into <out>/seeds-digest/<run>.json (what the report needs: settings, bytes, final
accuracy, the accuracy curve with cumulative bytes and time, wall time and its split into the step's phases,
load average and pause), and renders
from the digests it finds there together with the raw runs, which win over a digest of the same name. The
digests are committed, so a study spread over several machines or sessions adds up.
Run: python -m terngrad.report seeds [--runs reports/train/seeds] [--out reports/train]."""
import json
import math
import pathlib
import re
import statistics
import sys

from .common import runs_report_main, InputError, md_table, pyplot, read_json, read_train_run, save_figure, write_output

RUNS = pathlib.Path("reports/train/seeds")
OUT = pathlib.Path("reports/train")
DIGESTS = "seeds-digest"  # folder under the report's --out
DIGEST_VERSION = 1
RUN_NAME = re.compile(r"^(?P<net>[a-z0-9]+)-(?P<arm>[a-z0-9-]+?)-w(?P<workers>\d+)-s(?P<seed>\d+)$")

# Two-sided 95% quantiles of Student's t, t_{0.975, df} for df = 1..30 (standard tables).
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]

# The paper's float-minus-TernGrad gaps in accuracy points, and what they were measured on.
PAPER = {
    "lenet": ("MNIST, 10K iterations, total batch 64, 2 to 64 workers: both about 99.2%, within about 0.2 points",
              0.0, 0.2),
    "cifarnet": ("CIFAR-10, 2 workers, 300K iterations: float 86.56%, TernGrad 85.64%", 0.92, None),
}
# Effects within TernGrad that the study's arms isolate: (name, arm a, arm b), reported as a - b paired by seed.
EFFECTS = (("clipping", "terngrad", "terngrad-noclip"), ("shared scalar", "terngrad", "terngrad-noshare"))
TIME_COLUMNS = ("compute_s", "encode_s", "comm_s", "decode_s", "optimizer_s")  # comm_s = wait_s + wire_s
# The full study of `scripts/train-seeds.sh full` (its NETS, WORKERS, SEEDS and ARMS defaults): what the
# status line counts the finished runs against.
PLANNED_NETS = ("lenet", "cifarnet")
PLANNED_WORKERS = (2, 4)
PLANNED_SEEDS = 5
PLANNED_ARMS = ("float", "terngrad", "terngrad-noclip", "terngrad-noshare", "qsgd", "signsgd-ef")


def t975(df):
    """t_{0.975, df}; beyond the table, the normal quantile 1.96 (within 0.09 of t for df > 30)."""
    return T975[df - 1] if df <= len(T975) else 1.96


def mean_ci(xs):
    """(mean, half-width of the 95% t-interval or None for fewer than 2 values)."""
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, None
    return m, t975(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))


def fmt_ci(m, h, scale=100.0, digits=2):
    if h is None:
        return f"{scale * m:.{digits}f} (1 seed: no interval)"
    return f"{scale * m:.{digits}f} +- {scale * h:.{digits}f}"


def step_bytes(row):
    """Bytes one worker communicates in this step: uplink + downlink when the run counts both, else uplink."""
    if row.get("uplink_bytes") not in (None, ""):
        return float(row["uplink_bytes"]) + float(row.get("downlink_bytes") or 0.0)
    return float(row["payload_bytes"])


def wire_bytes(run):
    """(uplink, downlink) bytes per worker per step from run.json; downlink None for runs that record only
    the uplink (the payload)."""
    b = run["bytes_per_worker_step"]
    if "uplink" in b:
        return b["uplink"], b.get("downlink", 0)
    return b["payload_all"], None


def step_time(row):
    return sum(float(row[c]) for c in TIME_COLUMNS if row.get(c) not in (None, ""))


def run_logs(runs_dir):
    """({run: load average at its start}, {run: "about S s, why"}, {run: "<cpu model> x <cores>"}, {run: 15-minute
    load average at its end}, {run: source commit of the binary}) from the study's schedule.log and the hand-written pauses.log ("<run name> <seconds> <why>" per line), where they
    exist."""
    loads, pauses, cpus, end_loads, sources = {}, {}, {}, {}, {}
    sched = runs_dir / "schedule.log"
    if sched.is_file():
        for line in sched.read_text().splitlines():  # the last start of a run is the one that finished
            m = re.search(r" start (\S+) load ([0-9.]+)", line)
            if m:
                loads[m.group(1)] = float(m.group(2))
                c = re.search(r" cpu (.+)$", line)
                cpus[m.group(1)] = c.group(1).strip() if c else None
                src = re.search(r" source (\S+)", line)
                sources[m.group(1)] = src.group(1) if src and src.group(1) != "unknown" else None
            m = re.search(r" done (\S+) load [0-9.]+ [0-9.]+ ([0-9.]+)", line)
            if m:
                end_loads[m.group(1)] = float(m.group(2))
    log = runs_dir / "pauses.log"
    if log.is_file():  # a run stopped several times: the seconds added up, the reasons in order
        seconds, why = {}, {}
        for line in log.read_text().splitlines():
            parts = line.split(None, 2)
            if len(parts) >= 2 and not line.startswith("#"):
                try:
                    s = float(parts[1])
                except ValueError:
                    raise InputError(f"{log}: '{line}' is not '<run name> <seconds> <why>'") from None
                seconds[parts[0]] = seconds.get(parts[0], 0.0) + s
                why.setdefault(parts[0], []).extend(parts[2:])
        for run, total in seconds.items():
            pauses[run] = "about %g s%s" % (total, ", " + "; ".join(why[run]) if why[run] else "")
    return loads, pauses, cpus, end_loads, sources


def last_step_noise(runs):
    """A sentence on how much the accuracy moves between the last two evaluations where they lie close together
    (at most 1% of the run's steps or 10 steps apart, as at the end of an epoch-based run: the regular evaluation,
    then the one at the last step): the final accuracy of one run is one draw of that movement, so it is part of
    the seed-to-seed spread. None when no run has such a pair."""
    deltas, gaps = [], set()
    for r in runs:
        c = r.get("curve") or []
        if len(c) >= 2 and 0 < c[-1][0] - c[-2][0] <= max(10, 0.01 * c[-1][0]):
            deltas.append(100 * abs(c[-1][1] - c[-2][1]))
            gaps.add(c[-1][0] - c[-2][0])
    if not deltas:
        return None
    apart = "%d" % min(gaps) if len(gaps) == 1 else "%d-%d" % (min(gaps), max(gaps))
    return ("Final-iterate noise: in %d run%s the last two evaluations lie %s steps apart, and their accuracies differ by "
            "a median of %.2f points (largest %.2f). The final accuracy is one draw of that movement, so the spread over "
            "seeds includes it." % (len(deltas), "s"[len(deltas) == 1:], apart, statistics.median(deltas), max(deltas)))


def wall_text(runs):
    """The wall-time cell of the accuracy table: the median over the runs that kept a wall time and were not
    stopped (SIGSTOP, pauses.log), "(n runs)" when that is fewer than the runs; "(stopped)" when every run with a
    wall time was stopped (their median, pauses included); "-" when no run kept one."""
    runs = list(runs)
    timed = [r for r in runs if r.get("wall_s") is not None]
    clean = [r["wall_s"] for r in timed if not r.get("pause")]
    if clean:
        return "%.0f%s" % (statistics.median(clean), "" if len(clean) == len(runs) else " (%d run%s)" % (len(clean), "s"[len(clean) == 1:]))
    if timed:
        return "%.0f (stopped)" % statistics.median(r["wall_s"] for r in timed)
    return "-"


def digest(run, name, load=None, pause=None, cpu=None, load15_at_end=None, binary_source=None):
    """What the report keeps of one finished raw run (see the module's docstring)."""
    return {"digest_version": DIGEST_VERSION, "name": name, "source": "raw run", "config": run["config"],
            "steps_done": run["steps_done"], "final_test_accuracy": run["final_test_accuracy"],
            "bytes_per_worker_step": run["bytes_per_worker_step"], "wall_s": run["time_s"]["wall"],
            "curve": [list(c) for c in curves(run)], "load_at_start": load, "pause": pause, "cpu": cpu,
            "load15_at_end": load15_at_end, "time_s": run.get("time_s"), "binary_source": binary_source}


def check_digest(d, path):
    """A digest as read from path, or InputError naming what is wrong with it."""
    if not isinstance(d, dict):
        raise InputError(f"{path}: a digest is a JSON object")
    if d.get("digest_version") != DIGEST_VERSION:
        raise InputError(f"{path}: digest version {d.get('digest_version')!r}; this renderer reads {DIGEST_VERSION}")
    for k in ("name", "config", "steps_done", "final_test_accuracy", "bytes_per_worker_step"):
        if k not in d:
            raise InputError(f"{path}: digest without '{k}'")
    if not isinstance(d["name"], str) or not RUN_NAME.match(d["name"]) or path.stem != d["name"]:
        raise InputError(f"{path}: digest name {d['name']!r} is not the file's name <net>-<arm>-w<workers>-s<seed>")
    return d


# the run settings the report states (its "Settings" and "Arms" lines)
CONFIG_KEYS = ("codec", "batch", "optimizer", "lr", "lr_policy", "weight_decay", "test_limit")


def is_number(v, least=0.0, most=math.inf):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and least <= v <= most


def check_values(d, where):
    """d (a digest, or one made from a raw run) if the values the report computes with are of the right kind, else
    InputError naming the first that is not: a run's accuracy NaN or a string would otherwise become a NaN mean or
    a traceback."""
    if not is_number(d["final_test_accuracy"], 0.0, 1.0):
        raise InputError(f"{where}: final_test_accuracy {d['final_test_accuracy']!r} is not a number in [0, 1]")
    if not isinstance(d["steps_done"], int) or isinstance(d["steps_done"], bool) or d["steps_done"] < 0:
        raise InputError(f"{where}: steps_done {d['steps_done']!r} is not a whole number >= 0")
    if not isinstance(d["config"], dict):
        raise InputError(f"{where}: config is not an object")
    c = d["config"]
    needed = CONFIG_KEYS + (("c",) if c.get("codec") == "terngrad" and c.get("clip") not in (None, "none") else ())
    lacking = [k for k in needed if k not in c]
    if lacking:
        raise InputError(f"{where}: config lacks " + ", ".join(repr(k) for k in lacking))
    b = d["bytes_per_worker_step"]
    if not isinstance(b, dict) or not all(is_number(v) for v in b.values()) or not (
            "uplink" in b or "payload_all" in b):
        raise InputError(f"{where}: bytes_per_worker_step is not an object of byte counts with uplink or payload_all")
    t = d.get("time_s")
    if t is not None and (not isinstance(t, dict) or not all(is_number(v) for v in t.values())):
        raise InputError(f"{where}: time_s is not an object of seconds (finite numbers >= 0)")
    if d.get("wall_s") is not None and not is_number(d["wall_s"]):
        raise InputError(f"{where}: wall_s {d['wall_s']!r} is not a number of seconds >= 0")
    c = d.get("curve")
    if c is not None and (not isinstance(c, list) or not all(
            isinstance(p, list) and len(p) == 4 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in p)
            for p in c)):
        raise InputError(f"{where}: curve is not a list of [step, accuracy, bytes, seconds]")
    return d


def load_runs(runs_dir, digest_dir=None):
    """{(net, workers, arm): {seed: digest}} of every finished run: the digests in digest_dir, then every raw
    run in runs_dir (a folder with .complete and run.json), whose digest replaces one of the same name and is
    written to digest_dir."""
    found, paths = {}, {}
    if digest_dir is not None and digest_dir.is_dir():
        for f in sorted(digest_dir.glob("*.json")):
            found[f.stem] = check_digest(read_json(f), f)
            paths[f.stem] = f
    if runs_dir.is_dir():
        loads, pauses, cpus, end_loads, sources = run_logs(runs_dir)
        for d in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
            if not RUN_NAME.match(d.name) or not (d / ".complete").is_file():
                continue
            run = read_train_run(d)
            if run is None:
                continue
            found[d.name] = digest(run, d.name, loads.get(d.name), pauses.get(d.name), cpus.get(d.name),
                                   end_loads.get(d.name), sources.get(d.name))
            paths[d.name] = d / "run.json"
            check_values(found[d.name], paths[d.name])  # before its digest is written
            if digest_dir is not None:
                digest_dir.mkdir(parents=True, exist_ok=True)
                write_output(digest_dir / f"{d.name}.json", json.dumps(found[d.name], indent=1, sort_keys=True) + "\n")
    for name, run in found.items():  # the digests no raw run replaced
        check_values(run, paths[name])
    groups = {}
    for name, run in found.items():
        m = RUN_NAME.match(name)
        groups.setdefault((m["net"], int(m["workers"]), m["arm"]), {})[int(m["seed"])] = run
    return groups


def curves(run):
    """Per evaluation: (step, accuracy, cumulative bytes per worker, cumulative step time in s)."""
    steps = run["_steps"]
    cum_b, cum_t, by_step = 0.0, 0.0, {}
    for row in steps:
        cum_b += step_bytes(row)
        cum_t += step_time(row)
        by_step[int(row["step"]) + 1] = (cum_b, cum_t)  # after step k (0-based), k + 1 steps are done
    out = []
    for e in run["_evals"]:
        s = int(e["step"])
        b, t = by_step.get(s, (float("nan"), float("nan")))
        out.append((s, float(e["test_accuracy"]), b, t))
    return out


def figure(net, groups, path):
    """Writes the net's three panels to path; False (and nothing written) when no run of the net kept its curve."""
    if not any(r.get("curve") for k in groups if k[0] == net for r in groups[k].values()):
        return False
    plt = pyplot()
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    keys = sorted(k for k in groups if k[0] == net)
    for i, key in enumerate(keys):
        _, w, arm = key
        runs = [groups[key][s] for s in sorted(groups[key]) if groups[key][s].get("curve")]
        cs = [r["curve"] for r in runs]
        n = min((len(c) for c in cs), default=0)
        if n == 0:  # no run of this group kept its curve
            continue
        color = "C%d" % (i % 10)
        label = f"{arm}, {w} workers ({len(runs)} seeds)"
        for j, (xi, name) in enumerate(((0, "step"), (2, "bytes"), (3, "time"))):
            xs = [statistics.fmean(c[k][xi] for c in cs) for k in range(n)]
            if xi == 2:
                xs = [x / 1e6 for x in xs]
            acc = [[100 * c[k][1] for c in cs] for k in range(n)]
            ax[j].plot(xs, [statistics.fmean(a) for a in acc], color=color, marker="o", ms=3, label=label)
            if len(runs) > 1:
                ax[j].fill_between(xs, [min(a) for a in acc], [max(a) for a in acc], color=color, alpha=0.15)
    ax[0].set_xlabel("step")
    ax[1].set_xlabel("MB communicated per worker (cumulative)")
    ax[1].set_xscale("log")
    ax[2].set_xlabel("time in the step loop, s")
    for a in ax:
        a.set_ylabel("test accuracy (%)")
        a.grid(alpha=0.3)
    ax[0].legend(fontsize=8)
    fig.suptitle(f"{net} on Fashion-MNIST: mean over seeds, band = lowest to highest seed")
    fig.tight_layout()
    save_figure(fig, path)
    return True


def render(runs_dir, out_dir):
    groups = load_runs(runs_dir, out_dir / DIGESTS)
    if not groups:
        raise InputError(f"{runs_dir} holds no finished run of scripts/train-seeds.sh "
                         "(folders named <net>-<arm>-w<workers>-s<seed> with .complete and run.json), "
                         f"and {out_dir / DIGESTS} no digest of one")
    out_dir.mkdir(parents=True, exist_ok=True)
    out = []
    w = out.append
    w("# Training runs with several seeds: means and 95% confidence intervals\n")
    w("Generated by `python -m terngrad.report seeds` from the runs of `scripts/train-seeds.sh` (`terngrad train`,")
    w("in-process simulation of the workers, CPU only, **one run at a time**; column \"threads\": the workers'")
    w("gradients computed on that many threads (`--sim-threads`, one LibTorch thread each; the same bits as one")
    w("thread, so only the times depend on it)). The data is")
    w("**Fashion-MNIST** (Debian package dataset-fashion-mnist), not MNIST or CIFAR-10, which are not on this")
    w("machine. Raw runs are not kept in git; the command under Reproduce writes them again. What this report"
      " needs of each run is kept in `%s/<run>.json` (committed); each render adds the raw runs it finds.\n" % DIGESTS)
    w("Intervals: mean over seeds +- t_{0.975, n-1} s / sqrt(n) (Student's t, 95%), s the standard deviation over")
    w("seeds. Gaps are paired by seed (a seed fixes initialization and data order for every arm), so the interval")
    w("of a gap is the t-interval of the per-seed differences. The test set is the same for every run.\n")
    w(status_line(groups) + "\n")
    every = [r for g in groups.values() for r in g.values()]
    loads = [r["load_at_start"] for r in every if r.get("load_at_start") is not None]
    if loads:
        w("Load average (1 min) at the start of each run (%d of %d runs recorded it): median %.2f, highest %.2f"
          " (2 cores); times below are only as clean as that.\n" % (len(loads), len(every), statistics.median(loads), max(loads)))
    ends = [r["load15_at_end"] for r in every if r.get("load15_at_end") is not None]
    if ends:
        w("15-minute load average at the end of each run (%d runs recorded it; a run alone on the machine with"
          " its 2 simulation threads keeps it near 2): median %.2f, highest %.2f.\n" % (len(ends), statistics.median(ends), max(ends)))
    machines = {}
    for r in every:
        machines.setdefault(r.get("cpu") or "not recorded", []).append(r)
    if len(machines) > 1 or "not recorded" not in machines:
        w("Machines (CPU model x cores, from schedule.log): " + "; ".join(
            "%s: %d runs" % (m, len(rs)) for m, rs in sorted(machines.items())) + ". Wall times compare only"
          " within one machine. Accuracies can differ in the last bits between CPUs (LibTorch's CPU kernels"
          " depend on the instruction set), not between thread counts on one machine.\n")
    binaries = {}
    for r in every:
        if r.get("source", "raw run") == "raw run":
            binaries.setdefault(r.get("binary_source") or "not recorded", []).append(r)
    if set(binaries) - {"not recorded"}:
        w("Binaries (the source commit `terngrad --version` named at each run's start, from schedule.log): " + "; ".join(
            "%s: %d runs" % (b, len(rs)) for b, rs in sorted(binaries.items())) + ". Accuracies and bytes do not depend"
          " on it where the code's bits did not change; times can.\n")
    notes = ["%s (%s)" % (r["name"], r["pause"]) for r in sorted(every, key=lambda r: r["name"]) if r.get("pause")]
    if notes:
        w("Runs stopped (SIGSTOP) for a while, so that their wall time includes the pause: " + "; ".join(notes) + ".\n")
    for src in sorted({r.get("source", "raw run") for r in every} - {"raw run"}):
        n = sum(r.get("source") == src for r in every)
        w("%d runs are known only from %s: their final accuracies and bytes are in the tables here; their curves,"
          " wall times, load averages and thread counts are there, not here, and the figures leave them out.\n" % (n, src))
    for net in sorted({k[0] for k in groups}):
        keys = sorted(k for k in groups if k[0] == net)
        first = next(iter(groups[keys[0]].values()))
        c = first["config"]
        w(f"## {net}\n")
        w("Settings of the first run: batch %s (total), %s steps, optimizer %s, lr %g (%s policy), weight decay %g"
          " (%s), test accuracy on %s test images." % (
              c["batch"], first["steps_done"], c["optimizer"], c["lr"], c["lr_policy"], c["weight_decay"],
              "in the loss, so part of the exchanged gradient" if c.get("weight_decay_in") == "loss"
              else "applied after the exchange", c["test_limit"] or "all 10000"))
        w("Arms: " + "; ".join(sorted({"%s = codec %s%s" % (k[2], groups[k][next(iter(groups[k]))]["config"]["codec"],
                                                            clip_text(groups[k][next(iter(groups[k]))]["config"]))
                                       for k in keys})) + ".\n")
        rows = []
        for key in keys:
            _, wk, arm = key
            runs = groups[key]
            accs = [runs[s]["final_test_accuracy"] for s in sorted(runs)]
            m, h = mean_ci(accs)
            up, down = wire_bytes(runs[next(iter(runs))])
            base = groups.get((net, wk, "float"))
            ratio = "-"
            if base:
                fu, fd = wire_bytes(base[next(iter(base))])
                if (fd is None) == (down is None):  # compare like with like: both with downlink or neither
                    ratio = "%.2fx" % ((fu + (fd or 0)) / (up + (down or 0)))
            wall = wall_text(runs.values())
            rows.append([arm, wk, len(runs), fmt_ci(m, h), ", ".join("%.2f" % (100 * a) for a in accs),
                         "%d" % up, "%d" % down if down is not None else "-", ratio, wall, threads_text(runs.values())])
        w(md_table(["arm", "workers", "seeds", "final test accuracy, % (mean +- 95% CI)", "per seed",
                    "uplink bytes / worker / step", "downlink", "float arm's bytes / this arm's",
                    "wall s per run (median)", "threads"], rows))
        noise = last_step_noise(r for key in keys for r in groups[key].values())
        if noise:
            w(noise + "\n")
        gaps = []
        for key in keys:
            _, wk, arm = key
            if arm == "float":
                continue
            pair = paired(groups, (net, wk, "float"), key)
            if pair:
                gaps.append((wk, arm) + pair)
        intervals = sum(g[4] is not None for g in gaps)
        if gaps:
            w("Float minus arm, paired by seed (accuracy points):\n")
            w(md_table(["workers", "arm", "pairs", "gap (mean +- 95% CI)", "verdict"],
                       [[g[0], g[1], g[2], fmt_ci(g[3], g[4]), g[5]] for g in gaps]))
            growth = gap_growth_rows(groups, net)
            if growth:
                w("Does the gap change with the worker count? Per seed, the float-minus-arm gap at the larger"
                  " count minus the gap at the smaller one (the same seed fixes the initialization and the images"
                  " of every step at both counts; only their split among the workers differs), accuracy points:\n")
                w(md_table(["arm", "workers", "seeds", "change of the gap (mean +- 95% CI)", "verdict"], growth))
                intervals += len(growth)
        effects = []
        for name, a, b in EFFECTS:
            for wk in sorted({k[1] for k in keys}):
                pair = paired(groups, (net, wk, a), (net, wk, b))
                if pair:
                    effects.append([name, "%s minus %s" % (a, b), wk, pair[0], fmt_ci(pair[1], pair[2]), pair[3]])
                    intervals += pair[2] is not None
        if effects:
            w("Effects within TernGrad, paired by seed (accuracy points; positive: the first arm is the more"
              " accurate). Clipping is TernGrad's gradient clipping at c sigma before ternarizing (the noclip arm"
              " leaves it out); the shared scalar is one scalar per layer for all workers (the noshare arm lets"
              " each worker use its own):\n")
            w(md_table(["effect", "difference", "workers", "pairs", "mean +- 95% CI", "verdict"], effects))
        if intervals > 1:
            w("Each interval above covers its true value with probability 95%% on its own. Of these %d intervals"
              " about %.1f would exclude 0 by chance alone if none of these differences were real (the expected number of"
              " false exclusions), so one \"interval excludes 0\" among them is weak evidence of an effect.\n"
              % (intervals, intervals / 20))
        if net in PAPER:
            what, gap, tol = PAPER[net]
            w("The paper (%s). These runs use other data and, for CifarNet, far fewer iterations, so absolute"
              " accuracies are not comparable; what carries over is the sign and size of the gap." % what)
            for g in gaps:
                if g[1] == "terngrad" and g[4] is not None:
                    lo, hi = 100 * (g[3] - g[4]), 100 * (g[3] + g[4])
                    inside = lo <= gap <= hi
                    w("- %d workers: the paper's gap %.2f points is %s our interval [%.2f, %.2f]."
                      % (g[0], gap, "inside" if inside else "outside", lo, hi))
            w("")
        split = time_split_rows(groups, keys)
        if split:
            w("Where a run's time goes: seconds per run, median over the runs of the arm that kept the split (from"
              " run.json's time_s; runs stopped for a while are left out, their pause lies in one of the phases)."
              " In the simulation one process computes every worker's gradient (`--sim-threads` at once), then"
              " encodes and decodes every worker's payload in turn on one thread, so the codec columns add up"
              " all workers. TernGrad's codec is the project's optimized one (tg::cpu); QSGD's and EF-SignSGD's"
              " are the trainer's one-thread baselines (experiments/train/src/baselines.cpp; 2-4x faster from"
              " source 762e444 on, the same bytes: see the Binaries line), so their codec columns compare"
              " implementations as well as methods. The float arm's encode is the simulation's sum of the"
              " workers' gradients (the allreduce's arithmetic), its decode the division by the worker count. \"other\" is the wall time outside the"
              " steps (evaluations, loading the data; from source f9192ed on the evaluations share the"
              " --sim-threads threads too, with the same bits).\n")
            w(md_table(["arm", "workers", "runs", "compute", "encode", "decode", "exchange (wait + wire)",
                        "optimizer", "other", "wall", "encode + decode, % of wall"], split))
        png = f"{net}_seeds.png"
        if figure(net, groups, out_dir / png):
            w(f"![{net}]({png})\n")
            w("Bytes on the x axis of the middle panel: cumulative bytes per worker from steps.csv, uplink + downlink"
              " (uplink only for runs that record no downlink).\n")
        threads = sorted({r["config"].get("sim_threads", 1) for k in keys for r in groups[k].values()
                          if r.get("curve") and r["config"].get("sim_threads", 1) is not None})
        if len(threads) > 1:  # the right panel's mean times then average runs of different speeds
            w("The right panel averages runs made with %s simulation threads (column \"threads\"): its times mix"
              " those settings; the accuracies do not depend on them.\n" % " and ".join(map(str, threads)))
    w("## Reproduce\n")
    w("    cmake --build build/<dir> --target terngrad tg_python")
    w("    bash scripts/train-seeds.sh build/<dir>/apps/terngrad full    # NETS=lenet for LeNet alone")
    w("    PYTHONPATH=build/<dir>/python/package build/venv/bin/python -m terngrad.report seeds")
    w("    git add reports/train/seeds.md reports/train/*_seeds.png reports/train/%s    # the digests\n" % DIGESTS)
    w("The script's header states the budget on the project's 2-core machine (CifarNet: about 7 minutes per run);"
      " `smoke` is the minute-long form CI runs, under build/smoke/. The report needs only the committed digests: a"
      " fresh clone renders this file again from them, and `KEEP_DIGESTED=1` makes the script skip the runs they"
      " hold, so a study continued on another machine runs only what is missing.\n")
    path = out_dir / "seeds.md"
    write_output(path, "\n".join(out) + "\n")
    return path


SPLIT_PHASES = ("compute", "encode", "decode", "exchange", "optimizer")


def time_split(run):
    """{phase: seconds} of one digest's run (exchange = wait + wire, or communicate where the run has no
    split of it), with "other" = wall - the phases; None when the digest kept no time_s or the run was
    stopped for a while."""
    t = run.get("time_s")
    if not isinstance(t, dict) or run.get("pause") or not t.get("wall"):
        return None
    out = {p: float(t.get(p) or 0.0) for p in ("compute", "encode", "decode", "optimizer")}
    out["exchange"] = float(t.get("wait") or 0.0) + float(t.get("wire") or 0.0)
    if not out["exchange"]:
        out["exchange"] = float(t.get("communicate") or 0.0)
    out["wall"] = float(t["wall"])
    out["other"] = out["wall"] - sum(out[p] for p in SPLIT_PHASES)
    return out


def time_split_rows(groups, keys):
    """Table rows of the median time split per (workers, arm), for the arms with at least one split."""
    rows = []
    for _, wk, arm in keys:
        splits = [s for s in (time_split(r) for r in groups[(_, wk, arm)].values()) if s]
        if not splits:
            continue
        med = {p: statistics.median(s[p] for s in splits) for p in SPLIT_PHASES + ("other", "wall")}
        codec = statistics.median(100.0 * (s["encode"] + s["decode"]) / s["wall"] for s in splits)
        rows.append([arm, wk, len(splits)] + ["%.0f" % med[p] for p in SPLIT_PHASES + ("other", "wall")]
                    + ["%.0f" % codec])
    return rows


def paired(groups, key_a, key_b):
    """Per-seed differences a - b of the final test accuracy over the seeds both groups hold:
    (pairs, mean, half-width of the 95% t-interval or None, verdict), or None when no seed is shared."""
    ga, gb = groups.get(key_a), groups.get(key_b)
    if not ga or not gb:
        return None
    seeds = sorted(set(ga) & set(gb))
    if not seeds:
        return None
    m, h = mean_ci([ga[s]["final_test_accuracy"] - gb[s]["final_test_accuracy"] for s in seeds])
    verdict = "-"
    if h is not None:
        lo, hi = 100 * (m - h), 100 * (m + h)
        verdict = "interval excludes 0" if lo > 0 or hi < 0 else "interval includes 0"
    return len(seeds), m, h, verdict


def gap_growth_rows(groups, net):
    """Per arm with runs at two or more worker counts: for each pair of consecutive counts, the per-seed
    change of the float-minus-arm gap, with its t-interval over the seeds present in all four groups."""
    rows = []
    counts = sorted({k[1] for k in groups if k[0] == net})
    for arm in sorted({k[2] for k in groups if k[0] == net and k[2] != "float"}):
        for lo, hi in zip(counts, counts[1:]):
            keys = [(net, lo, "float"), (net, lo, arm), (net, hi, "float"), (net, hi, arm)]
            if not all(k in groups for k in keys):
                continue
            seeds = sorted(set.intersection(*(set(groups[k]) for k in keys)))
            if len(seeds) < 2:
                continue
            acc = lambda k, sd: groups[k][sd]["final_test_accuracy"]
            d = [(acc(keys[2], sd) - acc(keys[3], sd)) - (acc(keys[0], sd) - acc(keys[1], sd)) for sd in seeds]
            m, h = mean_ci(d)
            lo_ci, hi_ci = 100 * (m - h), 100 * (m + h)
            rows.append([arm, "%d -> %d" % (lo, hi), len(seeds), fmt_ci(m, h),
                         "interval excludes 0" if lo_ci > 0 or hi_ci < 0 else "interval includes 0"])
    return rows


def status_line(groups):
    """How far the full study is: per planned net and worker count, the finished runs out of seeds x arms,
    and the arms that have fewer than the planned seeds."""
    parts = []
    for net in PLANNED_NETS:
        for wk in PLANNED_WORKERS:
            have = {arm: len(groups.get((net, wk, arm), {})) for arm in PLANNED_ARMS}
            done = sum(min(n, PLANNED_SEEDS) for n in have.values())
            short = ["%s %d" % (arm, n) for arm, n in have.items() if n < PLANNED_SEEDS]
            text = "%s, %d workers: %d of %d" % (net, wk, done, PLANNED_SEEDS * len(PLANNED_ARMS))
            if short and done:
                text += " (seeds so far: " + ", ".join(short) + ")"
            parts.append(text)
    return ("Study status (runs of `scripts/train-seeds.sh full` finished, out of %d seeds x %d arms): "
            % (PLANNED_SEEDS, len(PLANNED_ARMS)) + "; ".join(parts) + ".")


def threads_text(runs):
    """The --sim-threads settings of some runs ("1/2"), "?" for runs that did not keep it (run.json of runs
    before --sim-threads has no sim_threads: one thread)."""
    ts = {r["config"].get("sim_threads", 1) for r in runs}
    return "/".join([str(t) for t in sorted(t for t in ts if t is not None)] + (["?"] if None in ts else []))


def clip_text(c):
    codec = c.get("codec")
    if codec == "terngrad":
        own = ", own scalars (not shared)" if c.get("shared_scalar") is False else ""
        return ", clip %s%s%s" % (c.get("clip"), " c=%g" % c["c"] if c.get("clip") != "none" else "", own)
    if codec == "qsgd":
        bucket = c.get("qsgd_bucket")
        return ", %s levels%s" % (c.get("qsgd_levels"), "" if bucket is None else
                                  ", a norm per %s elements" % bucket if bucket else ", one norm per tensor")
    if codec == "float" and c.get("float_exchange"):
        return " by " + c["float_exchange"]
    return ""


def main(argv=None):
    return runs_report_main(argv, "seeds", "reports/train/seeds.md and its figures", RUNS, OUT, "scripts/train-seeds.sh",
                            render, kept_in=lambda out: out / DIGESTS)


if __name__ == "__main__":
    sys.exit(main())
