"""terngrad-bench: plots, tables and README.md of the convex experiments (reports/convex) from the summary.json
files `terngrad converge` writes and the commands scripts/reproduce-convex.sh ran (commands.txt).
Run: python -m terngrad.report convex [reports/convex]   (with the built package on PYTHONPATH:
build/<preset>/python/package; scripts/reproduce-convex.sh runs the experiments, then this)."""
import argparse
import sys
from pathlib import Path

from .common import InputError, pyplot, read_json, save_figure, write_output

COLORS = {"float": "black", "tern": "tab:blue", "tern-clip": "tab:orange", "tern-saturate": "tab:orange",
          "tern-global": "tab:red", "tern-unshared": "tab:purple", "qsgd": "tab:green", "sign": "tab:gray",
          "tern-mutant-2s": "tab:brown"}
A3_RUNS = ("a3-gauss", "a3-heavy", "a3-sparse")  # Assumption 3 as a bound: Gaussian, heavy-tailed, sparse features
RUNS = ("decay", "ball", "layerwise", "clip", "logistic", "stall") + A3_RUNS + ("checks",)  # scripts/reproduce-convex.sh


def load(folder, name):
    path = Path(folder) / name / "summary.json"
    if not path.exists():
        raise InputError(f"missing {path} (run scripts/reproduce-convex.sh first)")
    return read_json(path)


def subtitle(s):
    c = s["config"]
    return (f"{c['problem']}, {s['parameters']} parameters, n={c['samples']}, {c['workers']} workers x batch "
            f"{c['batch']}, {c['schedule']}, {c['seeds']} seeds (generated data)")


def decay(folder, out, name="decay", title=None):
    plt = pyplot()
    s = load(folder, name)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for c in s["curves"]:
        t = [x for x in c["t"]]
        col = COLORS.get(c["method"], None)
        ax.loglog(t[1:], c["dist2_mean"][1:], color=col,
                  label=f"{c['method']} (slope {c['slope_last_half']:.2f})")
        ax.fill_between(t[1:], c["dist2_p10"][1:], c["dist2_p90"][1:], color=col, alpha=0.12)
        if c["dist2_predicted"]:
            ax.loglog(t[1:], c["dist2_predicted"][1:], color=col, ls="--", lw=1)
    ax.set_xlabel("step t")
    ax.set_ylabel("||w_t - w*||^2 (mean over seeds; band 10-90%)")
    ax.set_title(title or ("Assumption 2 steps: TernGrad converges at float SGD's 1/t rate\n"
                           "(dashed: exact prediction with the identity's variance)"), fontsize=10)
    ax.text(0.01, 0.01, subtitle(s), transform=ax.transAxes, fontsize=7)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, out)


def assumption3(folder, out):
    plt = pyplot()
    s = load(folder, "decay")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for c in s["curves"]:
        if c["method"] not in ("float", "tern", "qsgd"):
            continue
        col = COLORS.get(c["method"])
        t = c["t"]
        axes[0].loglog(t[1:], c["update_sq"][1:], color=col, label=f"E||update||^2, {c['method']}")
        if c["method"] == "tern":
            axes[0].loglog(t[1:], c["assumption3"][1:], color="k", ls=":",
                           label="mean_w ||g_w||_inf ||g_w||_1")
            axes[0].loglog(t[1:], c["grad_sq"][1:], color="k", ls="--", label="mean_w ||g_w||_2^2")
        if c["method"] != "float":
            axes[1].loglog(t[1:], c["var_measured"][1:], color=col, label=f"{c['method']}: measured")
            axes[1].loglog(t[1:], c["var_identity"][1:], color=col, ls="--", lw=2, alpha=0.6,
                           label=f"{c['method']}: identity")
    axes[0].set_title("Assumption 3's ||g_w||_inf ||g_w||_1 vs SGD's ||g_w||_2^2 (per worker),\n"
                      "and the second moment of the aggregated update", fontsize=10)
    axes[1].set_title("per-step codec variance ||update - E[update|g]||^2:\nmeasured vs identity", fontsize=10)
    for ax in axes:
        ax.set_xlabel("step t")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    fig.text(0.01, 0.005, subtitle(s), fontsize=7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    save_figure(fig, out)


def ball(folder, out):
    plt = pyplot()
    s = load(folder, "ball")
    fig, ax = plt.subplots(figsize=(8, 5))
    for c in s["curves"]:
        col = COLORS.get(c["method"])
        ax.semilogy(c["t"], c["dist2_mean"], color=col, label=f"{c['method']} measured")
        if c["dist2_predicted"]:
            ax.semilogy(c["t"], c["dist2_predicted"], color=col, ls="--", lw=2, alpha=0.7,
                        label=f"{c['method']} predicted")
    ax.set_xlabel("step t")
    ax.set_ylabel("E||w_t - w*||^2 (mean over seeds)")
    ax.set_title("Constant step from w*: the noise ball matches the prediction\n"
                 "(tern-mutant-2s: a deliberately wrong codec with twice the scalar; its prediction is the identity's)",
                 fontsize=10)
    fig.text(0.01, 0.005, subtitle(s), fontsize=7)
    ax.legend(fontsize=8, loc="lower right", ncol=3)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    save_figure(fig, out)


def layerwise(folder, out):
    plt = pyplot()
    s = load(folder, "layerwise")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for c in s["curves"]:
        col = COLORS.get(c["method"])
        for b, ax in enumerate(axes):
            ax.semilogy(c["t"], c["block_dist2_normalized"][b], color=col, label=c["method"],
                        ls="--" if c["method"] == "tern-global" else "-")
    axes[0].set_title("block 0 (scale 1): ||w_t,0 - w*_0||^2 (tern and tern-global overlap)", fontsize=10)
    axes[1].set_title("block 1 (scale 1/100): ||w_t,1 - w*_1||^2 / scale^2", fontsize=10)
    for ax in axes:
        ax.set_xlabel("step t")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Multi-scale problem, constant step from w*: one global scalar inflates the small block's noise ball",
                 fontsize=10)
    fig.text(0.01, 0.005, subtitle(s), fontsize=7)
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    save_figure(fig, out)


def clip(folder, out):
    plt = pyplot()
    s = load(folder, "clip")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = [p["method"] for p in s["polyak"]]
    shifts = [p["shift"] for p in s["polyak"]]
    pred = [p.get("predicted_shift") for p in s["polyak"]]
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], shifts, width=0.4, color=[COLORS.get(n, "gray") for n in names],
           label="measured: ||mean Polyak iterate - w*||")
    ax.bar([i + 0.2 for i in x], [p if p is not None else 0 for p in pred], width=0.4, color="none",
           edgecolor="k", hatch="//", label="predicted: 0 (unbiased) or ||w_c - w*|| (clipping)")
    for i, p in enumerate(pred):
        if p is None:
            ax.text(i + 0.2, 0.005, "n/a", ha="center", fontsize=8)
    ax.set_xticks(list(x))
    ax.set_xticklabels(names)
    ax.set_ylabel("distance from w*")
    ax.set_title("Clipping moves the fixed point to w_c, where E[clamp(g)] = 0\n"
                 "(data with spikes: clipping cuts their large coordinate)", fontsize=10)
    ax.text(0.01, -0.2, subtitle(s) + f"; Polyak average from step {s['polyak'][0]['from_step']}",
            transform=ax.transAxes, fontsize=7)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out)


def stall(folder, out):
    plt = pyplot()
    s = load(folder, "stall")
    fig, ax = plt.subplots(figsize=(8, 5))
    for c in s["curves"]:
        col = COLORS.get(c["method"])
        ax.loglog(c["t"][1:], c["dist2_mean"][1:], color=col, label=f"{c['method']} measured")
        if c["dist2_predicted"]:
            ax.loglog(c["t"][1:], c["dist2_predicted"][1:], color=col, ls="--", lw=1,
                      label=f"{c['method']} exact prediction (unbiased)")
    for p in s["polyak"]:
        if p.get("predicted_stall"):
            ax.axhline(p["predicted_stall"], color=COLORS.get(p["method"]), ls=":", lw=2,
                       label=f"{p['method']}: predicted floor ||w_c - w*||^2 = {p['predicted_stall']:.4g}")
    ax.set_xlabel("step t")
    ax.set_ylabel("E||w_t - w*||^2 (mean over seeds)")
    ax.set_title("Theorem 1's decaying steps: clipped TernGrad stalls at the floor its bias predicts\n"
                 "(E[clamp(g)](w*) != 0: outside the theorem, which needs an unbiased gradient)", fontsize=10)
    ax.text(0.01, 0.01, subtitle(s), transform=ax.transAxes, fontsize=7)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, out)


def a3_method(s, name="tern"):
    for m in s["assumption3"]["methods"]:
        if m["method"] == name:
            return m
    raise InputError(f"no Assumption 3 fit for method {name}")


def assumption3_bound(folder, out):
    plt = pyplot()
    fig, axes = plt.subplots(1, len(A3_RUNS), figsize=(15, 4.8))
    for ax, name in zip(axes, A3_RUNS):
        s = load(folder, name)
        f = a3_method(s)
        bins = f["bins"]
        r = [b["r_mean"] for b in bins]
        ax.errorbar(r, [b["fit_mean"] for b in bins], yerr=[b["ucb"] - b["fit_mean"] for b in bins], fmt="o",
                    color="tab:blue", capsize=3, label="fit seeds: bin mean, up to its upper bound")
        held = [(b["r_mean"], b["bound"] + b["held_excess"]) for b in bins if b["held_seeds"] >= 3]
        ax.plot([h[0] for h in held], [h[1] for h in held], "x", color="tab:red", label="held-out seeds: bin mean")
        lo, hi = min(r) / 2, max(r) * 2
        grid = [lo * (hi / lo) ** (k / 50) for k in range(51)]
        ax.plot(grid, [f["A"] + f["B"] * x for x in grid], color="k", label=f"fitted {f['A']:.3g} + {f['B']:.3g} r")
        ex = s["assumption3"].get("exact")
        if ex:
            ax.plot(grid, [ex["a_at_w_star"] + ex["b_min"] * x for x in grid], color="tab:orange", ls="--",
                    label=f"exact: F(w*) + lambda_max(M) r, B_min = {ex['b_min']:.3g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(plt.NullFormatter())  # minor labels collide when the axis spans < 2 decades
        c = s["config"]
        kind = ("heavy-tailed (Student-t, %g dof)" % c["tail_dof"]) if c.get("tail_dof") else "Gaussian"
        if c.get("density", 1) < 1:
            kind += f", density {c['density']:g}"
        ax.set_title(f"{kind} features, d = {s['parameters']}\nheld out: "
                     f"{'holds' if f['holds_on_held_out'] else 'REFUTED'}", fontsize=9)
        ax.set_xlabel("||w_t - w*||^2")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    axes[0].set_ylabel("mean_w ||g_w||_inf ||g_w||_1 (tern runs)")
    fig.suptitle("Assumption 3 as a bound: fitted on 20 seeds, tested on 20 held-out seeds; exact constant for comparison",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    save_figure(fig, out)


def commands(folder):
    """The commands scripts/reproduce-convex.sh ran, keyed by output folder name, and the date it ran: from
    commands.txt (the '#' and '+ ' lines of its run.log), or from run.log itself when commands.txt is missing."""
    path = Path(folder) / "commands.txt"
    if not path.exists():
        path = Path(folder) / "run.log"
    try:
        log = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the commands that made {folder}: {e}")
    head = log[0] if log and log[0].startswith("# commands run by ") else ""
    out = {"date": head.split(" on ")[-1] if head else "?",
           "script": head[len("# commands run by "):].split(" on ")[0] if head else "?"}
    for line in log:
        if line.startswith("+ "):
            words = line[2:].split()
            name = Path(words[words.index("--out") + 1]).name
            out[name] = "terngrad " + " ".join(words[1:])
    return out


def fmt(x):
    return "n/a" if x is None else f"{x:.4g}"


def curve_table(s, with_pred=True, slope=True):
    rows = ["| method | E‖w_T − w*‖² at the last step (mean of seeds) | exact prediction | slope of log E‖w_t − w*‖² on log t (last half) "
            "| loss gap at T | codec variance per step, measured / identity (mean over run) |",
            "|---|---|---|---|---|---|"]
    for c in s["curves"]:
        vm = [v for v in c["var_measured"] if v is not None]
        vi = [v for v in c["var_identity"] if v is not None]
        pred = c["dist2_predicted"][-1] if c["dist2_predicted"] else None
        ratio = f"{sum(vm) / len(vm):.4g} / {sum(vi) / len(vi):.4g}" if vi and sum(vi) > 0 else "0 / 0"
        rows.append(f"| {c['method']} | {fmt(c['final_dist2'])} | {fmt(pred)} | "
                    f"{fmt(c['slope_last_half']) if slope else '-'} | {fmt(c['loss_gap'][-1])} | {ratio} |")
    return "\n".join(rows)


def write_readme(folder):
    cmd = commands(folder)
    checks = load(folder, "checks")
    decay_s, ball_s, lw_s, clip_s, log_s = (load(folder, n) for n in ("decay", "ball", "layerwise", "clip", "logistic"))
    by_name = {c["name"]: c for c in checks.get("checks", [])}
    runs = {n: load(folder, n) for n in RUNS}
    seconds = ", ".join(f"{n} {runs[n]['seconds']:.1f} s" for n in RUNS if isinstance(runs[n].get("seconds"), (int, float)))

    def check_row(name, what):
        c = by_name.get(name)
        if c is None:
            return f"| {name} | {what} | (not run) |"
        keys = [k for k in ("measured", "predicted", "t", "t_crit", "min_detectable_codec_rel", "converged", "need",
                            "layerwise", "global", "q_mean", "q_se", "shift") if c.get(k) is not None]
        detail = ", ".join(f"{k} = {fmt(c[k]) if isinstance(c[k], float) else c[k]}" for k in keys)
        return f"| {name} | {what} | {'PASS' if c['passed'] else 'FAIL'}: {detail} |"

    lw_rows = ["| method | block 0: ‖w_0 − w*_0‖² (mean over t ≥ 500) | block 1: ‖w_1 − w*_1‖² / scale² (mean over t ≥ 500) |",
               "|---|---|---|"]
    for c in lw_s["curves"]:
        idx = [i for i, t in enumerate(c["t"]) if t >= 500]
        b0 = sum(c["block_dist2_normalized"][0][i] for i in idx) / len(idx)
        b1 = sum(c["block_dist2_normalized"][1][i] for i in idx) / len(idx)
        lw_rows.append(f"| {c['method']} | {b0:.4g} | {b1:.4g} |")
    stall_s = load(folder, "stall")
    stall_rows = ["| method | E‖w_T − w*‖² (T = 20000) | exact prediction (unbiased) | ‖E[g̃](w*)‖ | predicted floor ‖w_c − w*‖² | ‖mean w_T − w*‖² | E‖w_T − w_c‖² | q_T = ⟨w_T − w*, w_c − w*⟩/‖w_c − w*‖² (mean ± s.e.) | t-test of E q_T = 1 |",
                  "|---|---|---|---|---|---|---|---|---|"]
    pol = {p["method"]: p for p in stall_s["polyak"]}
    for c in stall_s["curves"]:
        p = pol.get(c["method"], {})
        f = p.get("final")
        pred = c["dist2_predicted"][-1] if c["dist2_predicted"] else None
        stall_rows.append(
            f"| {c['method']} | {fmt(c['final_dist2'])} | {fmt(pred)} | {fmt(p.get('bias_at_optimum', 0.0))} | "
            f"{fmt(p.get('predicted_stall', 0.0))} | {fmt(f['bias2']) if f else '-'} | {fmt(f['dist2_to_wc']) if f else '-'} | "
            + (f"{f['q_mean']:.4f} ± {f['q_se']:.4f} | t = {f['t']:.3g}, |t| ≤ {f['t_crit']:.3g}: "
               f"{'consistent' if f['consistent'] else 'REJECTED'} |" if f else "- | - |"))
    clip_p = pol.get("tern-clip", {})
    a3_rows = ["| features | method | exact B_min = λ_max(M) (SGD's); exact F(w*) | fitted A + B r (SGD's) | held-out test (8 bins) | detectable excess (fraction of the bound, power 0.999) | single held-out steps above the bound | where the fitted bound fails (exact) |",
               "|---|---|---|---|---|---|---|---|"]
    a3_cmds = []
    for name in A3_RUNS:
        s3 = load(folder, name)
        ex = s3["assumption3"].get("exact", {})
        a3_cmds.append(f"`{cmd.get(name, '?')}`")
        for f in s3["assumption3"]["methods"]:
            where = ("holds everywhere" if f.get("global_holds") else
                     (f"‖w − w*‖² = {fmt(f['violation_r'])} along M's top eigenvector (visited ≤ {fmt(f['visited_r_max'])})"
                      if f.get("violation_r") is not None else "off M's top eigenvector"))
            a3_rows.append(
                f"| {name[3:]} | {f['method']} | {fmt(ex.get('b_min'))} ({fmt(ex.get('sgd_b_min'))}); F(w*) = {fmt(ex.get('a_at_w_star'))} | "
                f"{fmt(f['A'])} + {fmt(f['B'])} r ({fmt(f['sgd_A'])} + {fmt(f['sgd_B'])} r) | "
                f"{'holds' if f['holds_on_held_out'] else 'REFUTED'} (false-refute ≤ {f['alpha']:g}) | "
                f"{fmt(f['max_detectable_rel'])} | {f['held_steps_above']} of {f['held_steps']} (max {fmt(f['max_ratio'])}x) | {where} |")
    clip_rows = ["| method | ‖mean Polyak iterate − w*‖ | predicted | projection on w_c − w* (fraction of the predicted shift) |",
                 "|---|---|---|---|"]
    for p in clip_s["polyak"]:
        clip_rows.append(f"| {p['method']} | {fmt(p['shift'])} | {fmt(p.get('predicted_shift'))} | {fmt(p.get('q'))} |")

    text = f"""# Convex convergence: reference results

Runs made by `bash {cmd['script']}` on {cmd['date']}; regenerate everything here with
`bash scripts/reproduce-convex.sh [path/to/terngrad]` (tables, figures and text:
`python -m terngrad.report convex` from the `summary.json` files next to this one and the commands in
`commands.txt`; the raw curves `*/curves.csv` and the full console output `run.log` are not kept in git, the
script writes them again). Time of each run (`seconds` in its summary.json): {seconds}. All data are
generated (no data sets): least squares and logistic regression on Gaussian features with condition number 4
unless stated. Every run goes through the real codec (`tg::make_optimized_codec(1)`), so a seed reproduces it
exactly. Method names: see `experiments/convex/README.md`.

## 1. Assumption 2 steps (gamma_t = 4/(t + 20)): TernGrad converges at float SGD's rate

`{cmd.get('decay', '?')}`

![decay](decay.png)

{curve_table(decay_s)}

The dashed lines are the exact expectation of ‖w_t − w*‖² (second-moment recursion of minibatch SGD, plus
gamma_t² times the per-coordinate variance the identity gives for the gradients each run saw). TernGrad,
QSGD and float SGD all decay as 1/t; the codecs shift the curve up by their variance, as predicted.
SignSGD (biased, no prediction) decays more slowly here.

![assumption 3](assumption3.png)

Left: along the TernGrad run, the per-worker ‖g‖_inf ‖g‖_1 of Assumption 3 against SGD's ‖g‖_2², and the
second moment of the aggregated update. Right: the codec's per-step variance, measured against the identity.

Logistic regression (no exact prediction; gamma_t = 30/(t + 10), n = 1000, lambda = 0.01):

`{cmd.get('logistic', '?')}`

![logistic](logistic.png)

{curve_table(log_s)}

## 2. Constant step: the noise ball has the predicted size

`{cmd.get('ball', '?')}`

![ball](ball.png)

{curve_table(ball_s, slope=False)}

`tern-mutant-2s` is a deliberately wrong codec (the shared scalar doubled): unbiased, but with about twice the
variance the identity states, so its ball is far above the identity's prediction.

## 3. Layer-wise scalars shrink the noise ball of the small-scale block

`{cmd.get('layerwise', '?')}`

![layerwise](layerwise.png)

{chr(10).join(lw_rows)}

With one global scalar the small block (scale 1/100) is quantized with the large block's scalar, so its
variance per element is about 100x larger; layer-wise scalars remove that. Each worker's own scalar
(`tern-unshared`) is smaller still than the max shared across workers.

## 4. Clipping moves the fixed point by the predicted bias

`{cmd.get('clip', '?')}`

![clip](clip.png)

{chr(10).join(clip_rows)}

Every 10th data point is 3·e_0 with label noise +3, so its gradient is one large coordinate that clipping at
2.5 sigma cuts. The estimator is then unbiased for clamp(g), not g: the iterates settle at w_c, where
E[clamp(g)](w_c) = 0 (computed exactly with batch 1 as a sum over the 400 points, by Newton steps).

## 5. Clipping with Theorem 1's decaying steps: a biased gradient stalls where the bias predicts

`{cmd.get('stall', '?')}`

![stall](stall.png)

{chr(10).join(stall_rows)}

Theorem 1 needs an unbiased gradient, E[g̃] = ∇C. Clipping (Eq. 7) breaks it: the codec is unbiased for
clamp(g), and on this problem (the spikes of section 4) E[g̃](w*) = E[clamp(g)](w*) has norm
{fmt(clip_p.get('bias_at_optimum'))}, computed exactly as a sum over the 400 points. So w* is not a fixed point
of the mean dynamics, and with Σγ_t = ∞ the iterates go to w_c, where E[clamp(g)](w_c) = 0, not to w*:
E‖w_t − w*‖² = ‖w_c − w*‖² + E‖w_t − w_c‖², whose second term decays like the unclipped run's while the first
stays. The predicted floor ‖w_c − w*‖² = {fmt(clip_p.get('predicted_stall'))} (the first-order estimate
‖H⁻¹E[g̃](w*)‖² = {fmt((clip_p.get('linear_shift') or 0) ** 2)} is lower: the clamp is nonlinear in w) is checked
against the final iterates: the squared distance of their mean from w* and the projection q_T (two-sided
t-test of E q_T = 1 at alpha = {clip_p.get('final', {}).get('alpha', 0):g}). This is a property of clipping,
outside the theorem, not a failure of TernGrad's unbiased form (`tern` above converges at 1/t).

## 6. Assumption 3 tested as a bound

{chr(10).join(a3_cmds)}

![assumption 3 as a bound](assumption3_bound.png)

{chr(10).join(a3_rows)}

Method (`experiments/convex/include/tg/convex/assumption3.hpp`): per worker g, F(w) = E‖g‖_inf‖g‖_1. Seeds
1–20 fit, 21–40 are held out. The visited ‖w_t − w*‖² are cut into 8 log-spaced bins; per seed and bin the
mean of the recorded mean_w ‖g_w‖_inf‖g_w‖_1 (an unbiased sample of F at w_t); per bin an upper confidence
bound (mean + t s.e. over the fit seeds, Bonferroni over the bins: all hold at once with probability
≥ 1 − alpha, normal approximation of seed averages). (A, B) is the line above every bound with the smallest
sum over the bins. On the held-out seeds, per bin, a one-sided t-test of "mean excess over A + B r ≤ 0"
(alpha/8 each): "holds" means no bin refutes it; the detectable excess is the power statement. Least
squares with batch 1 also has the exact answer: F(w* + e) = eᵀMe + 2mᵀe + F(w*) with
M = (1/n) Σ ‖x_i‖_inf‖x_i‖_1 x_i x_iᵀ, so no B below λ_max(M) bounds F on the whole space; the last
column gives the first distance, along M's top eigenvector, where the fitted bound fails.

What this shows: the bound fitted on the iterates holds on held-out iterates (the average over the
iterates the runs visit), but it is a statement about the directions SGD travels. With heavy-tailed features
the exact constant is far above the fitted one, single samples exceed the fitted line by large factors,
and A fitted on iterates that never came close to w* is below the exact F(w*) (so the fitted line fails at
w* itself: r = 0 in the last column); Assumption 3's B is larger than SGD's (λ_max of the
‖x‖_inf‖x‖_1-weighted against the ‖x‖_2²-weighted second moment), which is what the ternary variance
‖g‖_inf‖g‖_1 − ‖g‖_2² costs.

## The statistical checks

`{cmd.get('checks', '?')}` (the same checks run in ctest: `tg_convex_tests`)

| check | claim | result |
|---|---|---|
{check_row("decay-float", "float SGD's window-mean error equals the exact prediction")}
{check_row("decay-tern", "TernGrad's equals float's plus the identity's variance")}
{check_row("decay-tern-fraction", "fraction of seeds with error <= 20x predicted (Clopper-Pearson)")}
{check_row("ball-float", "float SGD's noise ball equals the prediction")}
{check_row("ball-tern", "TernGrad's noise ball equals the prediction")}
{check_row("multiscale-ball-tern", "layer-wise ball (small block) equals the prediction")}
{check_row("multiscale-ball-tern-global", "global-scalar ball (small block) equals the prediction")}
{check_row("layerwise-vs-global", "layer-wise ball < global ball (disjoint intervals)")}
{check_row("clip-fixed-point", "clipped TernGrad settles at w_c (q = 1), not at w* (q = 0)")}

Each decision has false-fail probability alpha = {checks.get('alpha_per_decision', 1e-5):g} (normal approximation of per-seed
averages over thousands of steps), {len(checks.get('checks', []))} decisions, at most {checks.get('alpha_total', 0):.1g} in all; the power
of each is printed in `run.log` (written again by the script) and asserted in `experiments/convex/tests/test_checks.cpp`.
"""
    write_output(Path(folder) / "README.md", text)


def render(folder):
    """Writes the eight figures and README.md into folder from its summary.json files and commands.txt."""
    folder = Path(folder)
    commands(folder)  # before any file is written: the README needs them
    decay(folder, folder / "decay.png")
    assumption3(folder, folder / "assumption3.png")
    ball(folder, folder / "ball.png")
    layerwise(folder, folder / "layerwise.png")
    clip(folder, folder / "clip.png")
    stall(folder, folder / "stall.png")
    assumption3_bound(folder, folder / "assumption3_bound.png")
    decay(folder, folder / "logistic.png", "logistic",
          "L2-regularized logistic regression (w* by Newton), Assumption 2 steps\n(no exact prediction: nonlinear)")
    write_readme(folder)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m terngrad.report convex",
                                 description="Render the figures and README.md of reports/convex from the "
                                             "summary.json files of scripts/reproduce-convex.sh.")
    ap.add_argument("folder", nargs="?", type=Path, default=Path("reports/convex"),
                    help="folder with <run>/summary.json and commands.txt (default: reports/convex)")
    args = ap.parse_args(argv)
    try:
        for name in RUNS:
            load(args.folder, name)
        render(args.folder)
    except InputError as e:
        print(f"terngrad.report convex: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, IndexError, TypeError, ZeroDivisionError) as e:
        print(f"terngrad.report convex: error: a summary.json under {args.folder} lacks what the report needs: {e!r}",
              file=sys.stderr)
        return 2
    print(f"wrote decay.png, assumption3.png, ball.png, layerwise.png, clip.png, logistic.png, stall.png, assumption3_bound.png, README.md in {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
