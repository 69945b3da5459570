// terngrad-bench: what the battery's checks share (internal to verify/src): the run context, the
// planned decisions, row builders, the Bernstein decision, progress. One file per check family
// lives next to this one; verify/src/battery.cpp plans the run and calls them.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tg/strf.hpp"
#include "tg/verify/battery.hpp"
#include "tg/verify/families.hpp"

namespace tg::verify {

// The checks format their texts with tg::strf (common/include/tg/strf.hpp; found from here unqualified).

namespace checks {

constexpr double kTwo32 = 4294967296.0;

/// Exact keep probability of the spec rule for magnitude a (already clamped) and rule scale 2^32/s:
/// P(u < a * scale) = ceil(a * scale) / 2^32 for a 32-bit uniform u.
inline double keep_probability(float a, double scale) {
  double t = static_cast<double>(a) * scale;
  if (t >= kTwo32) return 1.0;
  return std::ceil(t) / kTwo32;
}

inline int sign_of(float g) { return g > 0.0f ? 1 : (g < 0.0f ? -1 : 0); }

/// Progress line on stderr for long runs; also polls for interruption between blocks of draws.
class Progress {
 public:
  Progress(bool on, double total, std::function<void()> poll = {});
  ~Progress() { finish(); }
  void add(double units, const std::string& what);
  void finish();

 private:
  double elapsed() const;
  bool on_;
  double total_, done_ = 0.0, last_ = 0.0;
  bool tty_, shown_ = false;
  std::function<void()> poll_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// The context every check runs in.
struct Ctx {
  Sampler& sampler;
  const Options& opt;
  double alpha = 0.0;  // per statistical decision
  std::vector<Row>& rows;
  Progress& progress;
};

/// The implementation's capability (Options::supports; empty = everything).
bool supports(const Options& o, const std::string& capability);
/// Parameters of the checks that run in one mode: the first clipping mode the implementation has.
Params base_params(const Options& o);
/// Every clipping mode the implementation has, in the order none, clip, saturate (the structure rows that draw
/// in each: fresh gradients, tails, extreme uniforms).
std::vector<ClipMode> supported_modes(const Options& o);
/// The clipping modes a shared scalar is asked in besides the base mode (layerwise, aggregate): clip and
/// saturate where supported, without the base mode itself (which the plain layerwise and aggregate run).
std::vector<Params> shared_clip_modes(const Options& o);

/// Row ids: check/family[/label]. Stat rows must appear in the plan with exactly this id.
std::string row_id(const std::string& check, const std::string& family, const std::string& label = "");

Row stat_row(const Ctx& c, const std::string& check, const std::string& family, const std::string& label = "");
Row exact_row(const std::string& check, const std::string& family, const std::string& label = "");
Row info_row(const std::string& check, const std::string& family, const std::string& label = "");

/// A Bernstein decision on a sum S of independent zero-mean terms (under H0) with |term| <= b and
/// known total variance V > 0. Fills threshold/detectable (in S units), z = S / sqrt(V), the tail
/// bound p (uncapped) and pass = |S| <= threshold.
struct BernsteinOutcome {
  double S = 0, threshold = 0, detectable = 0, z = 0, p = 1;
  double judged = 0;  // what was compared with the threshold: S, or the partial sum of largest |.|
  bool pass = true;
};
BernsteinOutcome bernstein_decide(double S, double V, double b, double alpha, double beta);

/// The largest partial sum of a row's terms taken in an order fixed before the draws (the coordinates by
/// their keep probability): its value, the keep probability where it is reached, and how many of the
/// row's coordinates it sums.
struct PartialPeak {
  double S = 0.0, p = 0.0;
  std::size_t count = 0, of = 0;
};
/// Adds terms one at a time, in the order they are given, and keeps the largest |partial sum| seen.
struct PartialWalk {
  PartialPeak peak;
  double S = 0.0;
  void add(double v, double p) {
    S += v;
    ++peak.of;
    if (std::fabs(S) > std::fabs(peak.S)) peak.S = S, peak.p = p, peak.count = peak.of;
  }
};
/// The order of the partial sums: (p, position) for every position, sorted by p, ties by position. It is fixed
/// by the spec's keep probabilities, before any draw.
std::vector<std::pair<double, std::size_t>> p_order(const std::vector<double>& p);
/// The same decision on every partial sum S_1, ..., S_m = S of the terms in a fixed order: fails when the
/// largest |S_j| exceeds the threshold of S. Under H0 the partial sums are a martingale with increments
/// in [-b, b] and variance at most V, and Freedman's inequality (1975, Theorem 1.6, in its Bernstein form)
/// bounds the chance that any of them leaves [-t, t] by the bound Bernstein gives for S alone: the error
/// rate is unchanged, and an error that changes sign along the order, and cancels in S, shows where it
/// changes sign. z stays S / sqrt(V) (calibrate checks the variance with it); p is the bound at the peak.
BernsteinOutcome bernstein_decide_partial(double S, const PartialPeak& peak, double V, double b, double alpha,
                                          double beta);
/// "partial-sum peak +0.12 s at p = 0.0003 (812/4096)": the largest partial sum in p order, peak.S / unit, and
/// how many of the row's coordinates it sums.
std::string partial_text(const PartialPeak& peak, double unit, const std::string& units);
/// Copies an outcome into a row: z, p, the p-value text, pass, and the numeric effect, limit and
/// detectable effect in the row's printed units (judged / unit, threshold / unit, detectable / unit).
void apply(Row& r, const BernsteinOutcome& o, double unit);
/// The p-value column of a Bernstein row: "p <= 0.012", or "bound 3.4 (>= 1)" when the bound says nothing.
std::string bound_text(double p);
/// A failed row's detail starts with what was observed and where the line was.
void mark_rejected(Row& r);

/// The pooled unbiasedness rows: S = sum of M terms in [-1, 1] with variance V under H0 (sign(x) t - p for
/// the keep rate, t - sign(x) p for the drift), reported per term in units of the scalar as `measure`.
enum class Pooled { bias, drift };
/// With `peak`, the row also judges the partial sums (bernstein_decide_partial).
Row pooled_bias_row(const Ctx& c, const std::string& check, const std::string& family, double S, double V,
                    double M, const std::string& detail, Pooled what = Pooled::bias,
                    const PartialPeak* peak = nullptr);

/// Whether row j carries no scalar: every output 0 and the scalar 0. Its values are zero whatever the scalar,
/// and a codec read from its values (exec:, a Python draw function, --samples) has 0 there for "no output". A
/// correct float32 codec may miss a sure keep (at most kSureKeepMiss per keep, counted by the row sure-keeps),
/// so on a tensor whose other elements are small such a row occurs; it must not fail an exact row as "scalar 0".
/// A codec that sends nothing in some rows is judged by its missed sure keeps, not by this row's scalar.
bool row_without_scalar(const Draws& d, std::uint32_t j);

/// The scalar of the first row of d that carries one (row_without_scalar), or 0 if none does.
float first_row_scalar(const Draws& d);
/// One draw (one step) of g under params and key with the implementation's own scalar, its size checked
/// (tg::Error otherwise): the structure rows tails and fresh gradients. A row without a scalar (above) from a
/// gradient with a nonzero element takes the scalar of the first row that has one among steps 1..7 of the same
/// key (drawn once more); when none has, the row keeps its 0, which the checks judge as the scalar.
Draws draw_one(Ctx& c, const std::vector<float>& g, const Params& params, const StreamKey& key);
/// A draw whose values are not of the form {-s, 0, +s} (its defect: a magnitude other than the row's largest)
/// counts one violation into `bad`, named in `msg` after `what` when nothing was wrong before; true if so. Checked
/// before the scalar, which is the row's largest magnitude and so would be wrong too.
bool count_defect(const Draws& dr, const std::string& what, std::uint64_t& bad, std::string& msg);
/// Counts the elements whose trit is neither 0 nor their gradient's sign into `bad`; names the first in `msg`,
/// after `what`, when nothing was wrong before.
void count_wrong_signs(const Draws& dr, const std::vector<float>& g, const std::string& what, std::uint64_t& bad,
                       std::string& msg);
/// An exact row that counts violations: passes iff bad == 0; its detail is `first` (the first violation)
/// when it fails, `ok` when it passes.
Row violations_row(const std::string& check, const std::string& family, std::uint64_t bad, const std::string& power,
                   const std::string& first, const std::string& ok);

/// A sum with no randomness under H0 (zero variance): passes iff |S| <= tol (rounding only).
void deterministic_row(Row& r, double S, double tol, const std::string& what);

// ---- the per-gradient job: structure, unbiased (per coordinate, pooled, by bins of p), variance,
// independence (several scales and lags) --------------------------------------------------------

/// Keep-probability bins of the bias-by-p rows: [edge[i], edge[i+1]), kPBins of them.
inline constexpr std::size_t kPBins = 14;
const std::vector<double>& p_bin_edges();
std::string p_bin_label(std::size_t bin);
/// Block scales and lags of the independence rows.
inline constexpr std::size_t kBlockScales[] = {8, 64, 512, 4096};
inline constexpr std::size_t kLags[] = {64, 512, 4096};

struct JobSpec {
  std::string check;  // row prefix: "" for the main checks, "clipping", "layerwise"
  Gradient grad;
  Params params;
  bool global_scalar = false;
  // Which rows of the job are reported (--skip): the job computes everything, since the variance
  // sums feed layerwise.ratio and the pooled sums the all-families row.
  bool structure = true, unbiased = true, variance = true;
  bool independence = false;
  bool p_bins = false;
  std::uint32_t steps = 0;
  std::uint64_t stream_seed = 0;
  std::vector<std::optional<float>> given_scalars;  // per layer: the shared scalar asked for, if any
  bool fixed_samples = false;  // draws given by the caller (check_samples): no determinism re-draw
};

/// What a job reports to the run: its pooled sums (the all-family pooled row) and its variances.
/// One coordinate's pooled terms summed over its draws (keep rate, and times sign(x) for the drift), with its spec
/// keep probability: what the rows over all families walk in p order.
struct PooledTerm {
  double p = 0.0, bias = 0.0, drift = 0.0;
};
struct JobOut {
  double pooled_S = 0.0, drift_S = 0.0, pooled_V = 0.0;  // drift_S: the pooled terms, each times sign(x)
  std::vector<PooledTerm> terms;  // in the job's p order; empty when the job's pooled sums have no randomness
  double var_observed = 0.0, var_identity = 0.0;  // absolute units
  // The sure keeps (|x| at or above the observed scalar): element-draws, misses, where the first miss was.
  std::uint64_t sure_n = 0, sure_miss = 0, sure_n_neg = 0, sure_miss_neg = 0;  // _neg: at negative elements
  std::string sure_msg;
  std::uint32_t sure_most = 0;  // the most misses of one sure keep, and where
  std::string sure_most_msg;
  // The near drops (0 < p < kNearDropP with the observed scalar): element-draws, keeps, where the first keep was;
  // near drops kept at least once; the most keeps of one near drop kept in more than half its draws, and where.
  std::uint64_t near_n = 0, near_keep = 0, near_kept = 0;
  std::uint64_t near_n_neg = 0, near_keep_neg = 0;  // at negative elements (sure_*_neg likewise)
  std::uint32_t near_most = 0;
  std::string near_msg, near_most_msg;
  std::string job;  // "clipping gaussian", "large", ...
  std::size_t job_elements = 0;
};
/// The run's sure-keeps decision (one per run, over every job): misses of elements the spec keeps for
/// sure, against the float32 allowance kSureKeepMiss. `sure_keeps_id` is its planned id.
std::string sure_keeps_id();
Row sure_keeps_row(const Ctx& c, const std::vector<JobOut>& outs);
/// The run's near-drops decision (one per run, over every job): keeps of elements with p < kNearDropP, against
/// the float32 allowance kNearDropKeep + kNearDropP per element-draw. `near_drops_id` is its planned id.
std::string near_drops_id();
Row near_drops_row(const Ctx& c, const std::vector<JobOut>& outs);

/// The ids of the stat rows run_job will produce, in order (from the spec alone, before any draw).
std::vector<std::string> plan_job(const JobSpec& job);
JobOut run_job(Ctx& c, const JobSpec& job);
/// clipping.bias (info): bias norm, angle, fraction clipped vs the Gaussian prediction.
void clipping_info(Ctx& c, const Gradient& G, const Params& params);

// ---- the other checks ---------------------------------------------------------------------------
std::vector<std::string> plan_streams(const std::string& family);
void run_streams(Ctx& c, const Gradient& G, std::uint64_t stream_seed);
std::vector<std::string> plan_collision();
/// The collision check's long probe: H steps of one key on kLongProbeElements elements (H = 256 x
/// the profile's draws, at most 2^18; 0 below 192 elements), against which every probe row is looked up,
/// and whose rows are compared with each other.
inline constexpr std::size_t kLongProbeElements = 256;
std::uint32_t long_probe_steps(const Profile& p, std::size_t d);
void run_collision(Ctx& c, std::size_t d, std::uint64_t stream_seed);
/// The aggregate check in mode `params` (the base mode, or one of shared_clip_modes: rows aggregate.clip.*,
/// aggregate.saturate.*).
std::vector<std::string> plan_aggregate(const Options& o, const Params& params);
void run_aggregate(Ctx& c, std::size_t d, const Params& params);
void run_cross(Ctx& c);
/// structure/fresh gradients (exact): steps 0..2 of one key with gradients A, B, A in every mode the
/// implementation has; each call must give its gradient the scalar and signs the same codec gives it under a key of its own
/// (state kept between calls; checks/fresh.cpp).
void run_fresh_gradient(Ctx& c, std::size_t d);
/// structure/tails (exact): the unique maximum planted at the last, the first and (negated) the last
/// element of tensors of every remainder mod 16, one draw each in every mode (checks/tails.cpp).
void run_tails(Ctx& c);
/// structure/extreme uniforms (exact): two keys of the spec's stream where an element's word is 0 (g = 0 planted
/// there) and 0xffffff3b (the maximum planted there), one draw each in every mode; values in {-s, 0, +s}, signs
/// right (checks/extreme.cpp). Only for implementations of the spec's stream.
void run_extreme_uniforms(Ctx& c);
/// Elements the extreme-uniforms row draws per mode (for the progress total).
std::uint64_t extreme_elements();
/// How many passes of its key list the collision check draws (each mode, and each with a given scalar).
std::size_t collision_passes(const Options& o);
/// The probe streams of one pass of the collision key list (steps of every listed key).
std::size_t collision_streams();
/// The elements of one draw at each of the collision check's small probe sizes (its small pass).
std::size_t small_probe_elements();
/// Elements the tails row draws per mode (for the progress total).
std::uint64_t tails_elements();

}  // namespace checks
}  // namespace tg::verify
