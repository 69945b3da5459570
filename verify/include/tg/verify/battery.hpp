// terngrad-bench: the statistical verification battery (docs/statistics.md): profiles, the checks
// (verify/src/checks/), the runner, its self-calibration, and its reports (table, JSON, JUnit XML).
// `terngrad verify` and `terngrad calibrate` (apps/cmd_verify.cpp, apps/cmd_calibrate.cpp) are the
// command-line front ends; run_battery and calibrate are usable from tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tg/verify/sampler.hpp"

namespace tg::verify {

/// Sizes and error rates of one run.
struct Profile {
  std::string name;
  std::size_t d = 0;               // elements of the single-tensor families
  std::uint32_t steps = 0;         // draws per family (unbiased, variance, independence)
  std::uint32_t stream_steps = 0;  // draws of the streams check
  std::uint32_t agg_workers = 0;   // workers of the aggregate check
  std::uint32_t agg_steps = 0;     // draws of the aggregate check
  std::size_t cross_d = 0;         // elements per family in the cross-implementation check
  std::size_t large_d = (std::size_t{1} << 20) + 3;  // the large job's tensor (and the tails row's large clipped draws)
  std::size_t probe_large_d = (std::size_t{1} << 20) + 3;  // the collision check's large probe
  double alpha_total = 1e-6;
  double beta = 1e-3;
};
/// "quick", "ci" or "full"; tg::Error(invalid_argument) otherwise.
Profile profile_named(const std::string& name);

/// One line of the report.
struct Row {
  std::string check;
  std::string family;
  std::string kind;        // "exact" (deterministic fact), "stat" (uses alpha), "info" (reported only),
                           // "skipped" (a check left out by --skip: one row per check, saying so)
  std::string statistic;
  std::string threshold;
  std::string pvalue;      // p-value, its bound, or an interval
  std::string power;       // smallest effect detected with probability >= 1 - beta
  double alpha = 0.0;      // share of alpha_total (stat rows)
  bool pass = true;
  std::string detail;      // why it failed, or what it compared
  std::string id;          // unique within a run: check/family[/label]; the same on every seed
  /// Standardized statistic (stat rows with a known null variance): S / sqrt(Var S) under H0, so its
  /// SD over seeds is 1 for a calibrated row (terngrad calibrate). NaN where there is none.
  double z = std::numeric_limits<double>::quiet_NaN();
  /// The row's p-value (per-coordinate rows: Bonferroni-adjusted exact binomial) or its upper bound
  /// (Bernstein rows; may exceed 1), compared with alpha; NaN for exact and info rows.
  double p = std::numeric_limits<double>::quiet_NaN();
  /// Bernstein rows, in the units the row prints (a bias per coordinate, a relative error, a
  /// correlation): the measured effect (the pooled rows: the peak of their partial sums in p order, which
  /// is the total where the sums grow steadily), the acceptance half-width, the detectable effect. NaN
  /// elsewhere.
  double effect = std::numeric_limits<double>::quiet_NaN();
  double limit = std::numeric_limits<double>::quiet_NaN();
  double detectable = std::numeric_limits<double>::quiet_NaN();
};

struct Options {
  Profile profile;
  std::uint64_t seed = 20171204;
  std::set<std::string> skip;  // check names to leave out (e.g. "cross")
  /// What the implementation implements (capability_names()); empty: everything. The battery plans
  /// only the rows that apply, runs the per-gradient, streams and collision checks in the first
  /// clipping mode it has (none, else clip, else saturate), and leaves a skipped row with the reason
  /// for every check it cannot run.
  std::set<std::string> supports;
  /// false: the implementation draws fresh randomness on every call (a framework's global generator, as
  /// GRACE does), so the same key does not give the same bytes. Only the same-key comparisons of structure
  /// and the cross check are left out; values, signs, scalars, fresh gradients, tails and sure-keeps stay.
  bool reproducible = true;
  bool progress = false;       // progress line on stderr
  std::function<void()> poll;  // if set, called after each block of draws; may throw to stop the run
};

struct Result {
  std::string impl;
  Options options;
  std::vector<Row> rows;
  std::size_t decisions = 0;
  double alpha_each = 0.0;
  double seconds = 0.0;
  std::string expected;  // self-test: "pass" or "reject" (a mutant); empty: "pass"
  /// Set by the Python bindings for a draw function: how to name it in the call that reproduces the run
  /// (module.qualname), whatever `impl` (its report name) says.
  std::string python_function;
  bool pass() const;
  bool as_expected() const;
  std::vector<std::string> failed_checks() const;
};

/// Names of the checks, in report order.
const std::vector<std::string>& check_names();
/// Capabilities an implementation may declare: none, clip, saturate (clipping modes), shared-scalar
/// (encode_with_scalar: a given scalar, for layerwise and aggregate), spec-stream (the spec's Philox
/// stream and keep rule, so its bytes can equal the reference's: the cross check).
const std::vector<std::string>& capability_names();

/// Runs the battery on `sampler`. Errors of the implementation (an external program that fails)
/// propagate as exceptions; check failures are rows with pass == false. The run plans its decisions
/// before drawing and throws std::logic_error if the stat rows it produced differ from the plan.
Result run_battery(Sampler& sampler, const Options& options);

/// The clip bound's tolerance (docs/statistics.md, "float32 sigma"). The spec computes sigma in double; a
/// correct codec may compute it in float32, by sums made of sequential runs of at most kFloat32RunMax
/// terms combined by a pairwise tree (pairwise sums, NumPy's, GPU block reductions): each term then
/// passes through at most
/// h(d) = ceil(log2 d) + min(d, kFloat32RunMax) + 2 roundings (float32_sum_roundings). The mean, the
/// deviations, their squares, the sum, the division, sqrt, a scaling against over- and underflow and
/// the product with c bound c sigma's relative error by (h(d) + 10) / 2 units of 2^-24, which is
/// clip_bound_ulps(d) = ceil((h(d) + 10) / 2) + 1 float32 ulps of the spec's rounded value: 8 ulps at one
/// element, 142 at 8,192, 147 at 2^22 + 3. Further away, the structure check fails and says by how many.
inline constexpr std::uint32_t kFloat32RunMax = 256;
std::uint32_t float32_sum_roundings(std::size_t d);
std::uint32_t clip_bound_ulps(std::size_t d);
/// The large job's tensor (family `large`: pladder's layout, large_gradient) and the collision check's large probe at quick
/// (Profile::large_d, Profile::probe_large_d; 2^22 + 3 and kLargeProbeElements at ci and full): bugs that begin
/// above a size, where every family is smaller.
inline constexpr std::size_t kLargeElements = (std::size_t{1} << 20) + 3;
/// The collision check's large probe at ci and full: 2^24 + 2^20 + 3 elements, a million past 2^24, where a
/// float32 element index stops being exact (pairs of elements share a uniform) and where a stream kept in chunks
/// of 2^24 (or 2^23) restarts; real layers are that large (AlexNet's fc6 has 37.7 million weights, VGG's 103
/// million). Only the probe: its stream bugs need one draw, where the large job's per-coordinate rows on that
/// many coordinates would double ci's time.
inline constexpr std::size_t kLargeProbeElements = (std::size_t{1} << 24) + (std::size_t{1} << 20) + 3;
/// The collision check's finding threshold in mask bits (a run that appears twice): the smallest run >= 72
/// for which `pairs` (2 x the sum over its passes of places^2, places = streams x elements) x 2^-run, the
/// chance of any finding under H0, stays within alpha / 2, half the row's share.
std::size_t collision_run(double pairs, double alpha);
/// The collision check's long probe: its H steps of one key as (first step, count) blocks: steps
/// 0 .. H - 1 - kLongProbeBlocks b, then kLongProbeBlocks blocks of b = floor(H / (2 kLongProbeBlocks))
/// consecutive steps, block i at an offset drawn from the stream seed within slot i of the rest of the
/// 32-bit step range (disjoint, all below 2^32), so that a step map of a large period P meets itself.
inline constexpr std::uint32_t kLongProbeBlocks = 32;
std::vector<std::pair<std::uint32_t, std::uint32_t>> long_probe_blocks(std::uint32_t H, std::uint64_t stream_seed);
/// The collision check's id ladders, drawn beside the long probe (one draw of its elements at step 0 per
/// id, as tensor ids under worker 0 and as worker ids under tensor 0): the ids 1 .. B - 1 and B, 2B, .., B^2
/// (B = id_ladder_base). With the long probe's key (worker 0, tensor 0, step 0), every difference
/// 1 .. B^2 is the difference of two drawn ids (jB - i, i < B), so an id reduced modulo any P <= B^2 maps
/// two of them to one stream. B is 0 (no ladder) where the long probe has no steps.
std::uint32_t id_ladder_base(const Profile& p, std::size_t d);
std::vector<std::uint32_t> id_ladder(std::uint32_t B);
/// The large job's draws: the profile's draws / 32 on 2^20 + 3 elements, fewer in proportion on a larger
/// large_d, at least 8 (quick 8 on 2^20 + 3, ci 8 and full 32 on 2^22 + 3).
std::uint32_t large_steps(const Profile& p);
/// Where a correct float32 codec's clip bound (or scalar) may lie for one tensor. The spec's value, and
/// [lo, hi]: lo is clip_bound_ulps(d) below the spec's; hi is clip_bound_ulps(d) above the larger of the
/// spec's and c sqrt(sigma^2 + delta^2), where delta = (h(d) + 1) 2^-24 mean|g| bounds the error of a
/// float32 mean summed as above. Every deviation g - mean inherits that error, so such a codec's sigma is
/// sqrt(sigma^2 + delta'^2) with |delta'| <= delta, up to roundings relative to sigma that the ulps cover.
/// A running mean (Welford, Chan's merges) carries it to first order, both ways: the window widens by
/// (h(d) + 1) 2^-24 |mean| / sigma relative on each side. Both matter only where the mean is large
/// against sigma; elsewhere the window is clip_bound_ulps(d) each way (one more where the wide value rounds
/// to the next float). A scalar's window is at most max|g|.
struct ClipWindow {
  float spec = 0.0f, lo = 0.0f, hi = 0.0f;
  std::uint32_t ulps = 0;  // the tolerance in float32 ulps, clip_bound_ulps(d) (0 without clipping)
  bool wide = false;       // hi or lo more than 2 ulps away from the spec's value: the mean's rounding dominates
  bool contains(float s) const { return s == spec || (std::isfinite(s) && s >= lo && s <= hi); }
};
/// Under a given (shared) scalar with clipping the draws do not show the codec's own clip bound: a tensor's
/// magnitudes are judged at the lowest bound a correct codec may use (lo). Where the spec's bound is subnormal, a
/// float32 ulp is the absolute 2^-149, not a relative step: a correct codec lands within a few of them (its roundings
/// onto the subnormal grid) plus the relative tolerance, so lo is that far below, not clip_bound_ulps(d) units (which
/// reached 0 on a bound of 4 x 2^-149 and judged every keep a wrong sign). judgeable is false where the bound binds
/// (lo < max|g|) and the possible bounds spread more than kMaxGivenBoundSpread relative above lo (a nearly constant
/// tensor, a mean that dwarfs sigma, a subnormal bound of a few units): no keep probability can be stated there.
struct GivenScalarBound {
  float lo = 0.0f, hi = 0.0f;  // the lowest and highest bound a correct codec may use
  double spread = 0.0;  // (min(max|g|, hi) - lo) / lo where the bound binds, else 0
  bool judgeable = true;
};
inline constexpr double kMaxGivenBoundSpread = 0x1p-15;  // p moves by at most this much, relative: undetectable
GivenScalarBound given_scalar_bound(const ClipWindow& bound, float max_abs);
/// The clip bound's window of gradient g under params (ClipMode::none: spec = lo = hi = +inf).
ClipWindow clip_bound_window(std::span<const float> g, const Params& params);
/// The scalar's window of gradient g under params with its own scalar (ClipMode::none: the spec's only).
ClipWindow clip_scalar_window(std::span<const float> g, const Params& params);
/// A clause naming the clipping rule a scalar outside its window (under clipping, on gradient g) follows, where it is
/// one of the wrong rules real codecs have: "; it is c times ..." the sample standard deviation (over n - 1,
/// torch.std()'s default), the root mean square of g (the mean not subtracted) or the standard deviation of |g|,
/// each within the spec's window scaled by that sigma over the spec's (one ulp more each side), below max|g|;
/// squares of g - mean below float32's smallest normal (a float32 sum of squares underflows) for a scalar below
/// the window; for a scalar equal to max|g| where the spec's is below it, the question "clipping none?" and the
/// rules above whose bound reaches max|g|, with a float32 sum of squares that overflows; for a scalar in the spec's
/// bound's window above max|g|, "the minimum left out?" (the spec's scalar is min(max|g|, c sigma)). Empty otherwise.
std::string sigma_rule_hint(std::span<const float> g, const Params& params, float got);
/// "; the scalar is the spec's rounded to 11 significant bits, as float16 holds it: ..." (or 8, bfloat16) where got is
/// spec rounded to that many bits (to nearest, down or up) and not spec itself, or below 2^-14 a multiple of 2^-24
/// (float16's subnormal step) so rounded: a scalar stored in half precision. Empty otherwise.
std::string precision_hint(float got, float spec);
/// "; the scalar is max g, the largest positive element, and max|g| lies at a negative one: ..." (or -min g and a
/// positive one): a maximum taken without the absolute value; where the scalar is also the largest |g| of a prefix
/// (partial_max_hint), that reading follows ("Or ..."): one tensor cannot tell them apart. Empty otherwise.
std::string sign_max_hint(std::span<const float> g, float scalar);
/// "the scalar is the largest |g| among the first k of d elements (...): a maximum over part of the tensor?" (no
/// leading "; ") where the scalar is below max|g| and is the largest |g| of g's first k elements. Empty otherwise.
std::string partial_max_hint(std::span<const float> g, float scalar);
/// "; the scalar is ||g||_2, the L2 norm (QSGD's scale): ..." (or mean |g|, the root mean square, ||g||_1), within
/// a relative 1e-5 (another summation order), where that norm is not max|g| itself. Empty otherwise.
std::string norm_hint(std::span<const float> g, float scalar);
/// The first of precision_hint, sign_max_hint and norm_hint that says something (the last two only for a tensor's
/// own scalar: a shared scalar is given, not computed from g). Empty otherwise.
std::string specific_scalar_hint(std::span<const float> g, float got, float spec, bool own_scalar);
/// Under clipping, a scalar at max|g| while an element at max|g| was left out in some of its n draws (kept[k]:
/// element k's keeps): with that scalar and no clipping its p is 1, so the values were clipped while the scalar
/// stayed max|g| ("; the scalar is max|g|, yet element 7, at max|g|, was kept in 3 of 8 draws: the values were
/// clipped (at spec?) ..."). Empty otherwise (the spec's scalar at max|g| too, or every such element always kept).
std::string clipped_values_hint(std::span<const float> g, float scalar, float max_abs, float spec,
                                const std::uint32_t* kept, std::uint32_t n);
/// specific_scalar_hint where it says something (the more specific readings), else sigma_rule_hint.
std::string scalar_hint(std::span<const float> g, const Params& params, float got, float spec);
/// The sure keeps' allowance: an element the spec keeps with probability 1 (|x| at or above the scalar)
/// may be left out by a correct float32 codec with probability up to this per draw. Its p is one or two
/// float32 roundings away from 1 (|x| * (1/s) is 1 - 2^-24 for about 15% of scalars) and its uniform has
/// 24 bits or more, so it misses with probability <= 3 * 2^-24 + 2^-24 = 2^-22. The misses of a run are
/// one decision (row sure-keeps: P(Bin(N, 2^-22) >= misses) <= alpha), not a structure failure.
inline constexpr double kSureKeepMiss = 0x1p-22;
/// The near drops: elements whose keep probability p (with the observed scalar) is below this. The spec
/// keeps one with probability p (its 32-bit threshold: at most p + 2^-32). A correct float32 codec's uniform
/// lies on a grid of step 2^-23 (the mantissa form 1.m - 1) or finer (24 bits: 2^-24), so it keeps one with
/// probability at most p + 2^-23 < kNearDropKeep + kNearDropP, whatever rounding its p has. A k-bit uniform
/// keeps every p < 2^-k with probability 2^-k: 21 bits keep them about 3.6 times as often as the allowance,
/// 22 bits 1.8 times. The keeps of a run are one decision
/// (row near-drops: P(Bin(N, kNearDropKeep + kNearDropP) >= keeps) <= alpha).
inline constexpr double kNearDropP = 0x1p-26;
/// The near drops' allowance beyond their own p, per element-draw (above).
inline constexpr double kNearDropKeep = 0x1p-23;
/// Distance in float32 ulps between two finite floats (their ordinal difference; of opposite signs, the
/// sum of both magnitudes' ordinals, so a negated scalar is never within a tolerance).
std::uint64_t ulp_distance(float a, float b);

/// The battery checking itself under the null: run it on a correct implementation over many seeds
/// and compare each row's standardized statistic and rejection rate with what it claims.
struct CalibrateOptions {
  Options base;                   // profile, skip, first seed (seed i = base.seed + i)
  std::uint32_t seeds = 400;
  double alpha_total = 0.05;      // the runs' alpha_total (large, so rejections are frequent enough to count)
  double ci = 0.95;               // 1 - the verdict's false-alarm rate, split over every row's decisions and the whole-run rate
  unsigned threads = 0;           // 0: hardware threads
  bool progress = false;
};
struct CalibrationRow {
  std::string id, check, family;
  std::size_t n = 0;                        // seeds with a value
  double z_mean = 0, z_sd = 0;              // standardized statistic over seeds (NaN if the row has none)
  double mean_lo = 0, mean_hi = 0;          // simultaneous CI of the mean
  double sd_lo = 0, sd_hi = 0;              // simultaneous CI of the SD (chi-squared)
  std::size_t p05 = 0;                      // seeds with the row's p-value (or bound) <= 0.05
  std::size_t fails = 0;                    // seeds on which the row failed at its alpha share
  double alpha = 0;                         // its alpha share in those runs
  bool has_z = false;
  bool ok = true;
  std::string problem;                      // why not ok
};
struct Calibration {
  std::string impl;
  CalibrateOptions options;
  std::vector<CalibrationRow> rows;
  std::size_t runs = 0, run_fails = 0;      // whole runs, and those that failed at alpha_total
  double run_fail_lo = 0, run_fail_hi = 0;  // Clopper-Pearson 95% interval of the whole-run fail rate
  double seconds = 0;
  bool ok() const;
  std::vector<std::string> problems() const;
};
/// `make` builds one sampler per worker thread. Throws what run_battery throws.
Calibration calibrate(const std::function<std::unique_ptr<Sampler>()>& make, const std::string& impl,
                      const CalibrateOptions& options);
std::string format_calibration(const Calibration& c);
std::string format_calibration_json(const Calibration& c);

/// Samples of one tensor drawn elsewhere (a codec in another language, a GPU run saved to disk):
/// `steps` rows of trits (row-major, steps x g.size()) and the scalar of each row, all with the
/// same stream except the step (row j = step j). `scalar`: the shared scalar the draws were asked
/// for (encode_with_scalar semantics); empty when each row carries the tensor's own scalar.
struct TensorSamples {
  std::span<const float> g;
  std::span<const std::int8_t> trits;
  std::span<const float> scalars;
  std::optional<float> scalar;
  std::string defect;  // e.g. from draws_from_values: values not of the form {-s, 0, +s}
};

struct SampleCheckOptions {
  Params params;             // clip mode and c that the draws used (packing is irrelevant)
  double alpha_total = 1e-6;  // false-fail rate of the whole call, split over its decisions
  double beta = 1e-3;         // power is reported as the smallest effect found with prob. 1 - beta
  bool independence = true;   // the block and lag tests of the masks (as many as the size supports)
  std::string family = "samples";  // label of the rows
};

/// The battery's per-gradient checks on given samples: structure (exact: values, signs, the scalar
/// against the spec's, |g| >= s kept, 0 never kept), unbiased per coordinate (exact binomial) and
/// pooled (Bernstein), the variance identity (Bernstein, exact variance) and, if asked, independence
/// (block scales and lags, as the size supports). Several tensors = one layer-wise gradient (tensor
/// i = layer i). Result's impl is "samples"; alpha_total is split equally over the planned decisions
/// (3 plus the independence rows). Needs >= 2 steps,
/// non-empty tensors, finite g; tg::Error(invalid_argument) naming the problem otherwise.
Result check_samples(std::span<const TensorSamples> tensors, const SampleCheckOptions& options);

/// Bit-for-bit comparison of two implementations (`terngrad compare`, and the battery's cross check):
/// for every gradient family and clipping mode, both draw the same stream keys; scalars and trits
/// must be equal, and where both have a codec, the 2bit and base3 payloads byte-identical.
struct CompareOptions {
  std::size_t d = 4099;            // elements per family (lenet keeps its shapes)
  std::uint32_t steps = 2;         // draws per request
  std::uint64_t seed = 20171204;   // of the gradients and the stream keys
  std::vector<ClipMode> modes = {ClipMode::none, ClipMode::clip, ClipMode::saturate};
  bool shared_scalar = true;       // one more case per family and mode: a shared scalar (twice the own one)
  bool all_layers = true;          // false: layers 0, 1 and the last of multi-layer families
  bool stop_at_first = false;      // stop after the first differing case
  bool keys = true;                // one more case: 27 keys (ids and steps at 8/16/24/32-bit edges, seeds' words)
  bool progress = false;           // progress line on stderr
  // Under clipping (own scalar), A may compute sigma in float32: its scalar may lie anywhere in
  // clip_scalar_window (B must be the spec's, e.g. the reference); A's trits must then be the spec
  // stream's under A's own scalar, and the payloads (whose headers hold the scalar) are not compared.
  // Under a given scalar with clipping A's own bound may lie anywhere in clip_bound_window: its trits
  // must lie between the spec stream's at the window's two ends. false: scalars equal bit for bit.
  bool float32_sigma = false;
};
struct CompareCase {
  std::string family, layer, mode;  // mode: none | clip | saturate, "+shared" with a shared scalar
  std::uint64_t trits = 0;          // trits compared
  std::uint32_t payloads = 0;       // payloads compared byte for byte
  std::uint64_t scalar_ulps = 0;    // largest distance of A's scalar from B's where float32_sigma allowed one
  bool bound_window = false;        // given scalar under clipping: A's trits judged within the window of clip bounds
  std::string difference;           // empty when identical; else the first difference
};
struct CompareResult {
  std::string a, b;
  CompareOptions options;
  std::vector<CompareCase> cases;
  double seconds = 0.0;
  bool identical() const;
  std::uint64_t trits() const;
  std::uint64_t payloads() const;
  const CompareCase* first_difference() const;
};
CompareResult compare_samplers(Sampler& a, Sampler& b, const CompareOptions& options);
std::string format_compare(const CompareResult& result);
std::string format_compare_json(const CompareResult& result);

/// Two implementations whose random streams differ, compared in distribution (`terngrad compare
/// --stat`, verify/src/compare_stat.cpp): per case (family, layer, clipping mode) A and B draw N
/// independent encodings; scalars and signs must agree (none: exactly; clipping: within
/// clip_bound_ulps(d)), and two tests with alpha_total split over them compare the total keep count
/// (with equal scalars this is also the variance) and the per-coordinate keep rates, both conditional
/// on each coordinate's total count (hypergeometric).
struct StatCompareOptions {
  std::size_t d = 4099;           // elements per family (lenet keeps its shapes)
  std::uint32_t draws = 256;      // encodings drawn by each implementation per case
  std::uint64_t seed = 20171204;  // of the gradients and the stream keys
  std::vector<ClipMode> modes = {ClipMode::none, ClipMode::clip, ClipMode::saturate};
  double alpha_total = 1e-6;      // probability that two implementations with the same distribution differ
  double beta = 1e-3;             // 1 - power at which detectable effects are stated
  bool progress = false;
};
struct StatCompareCase {
  std::string family, layer, mode;
  float scalar_a = 0.0f, scalar_b = 0.0f;       // first draw's
  std::uint64_t kept_a = 0, kept_b = 0;         // kept elements over all draws
  double z_total = 0.0;                         // standardized K_A - K_B given the per-coordinate totals
  double p_total = 1.0;                         // its two-sided p-value (normal)
  double detectable_total = 0.0;                // relative keep-rate difference found with power 1 - beta
  double z_signed = 0.0;                        // standardized sum of sign(g_k) (K_Ak - K_Bk): the drift
  double p_signed = 1.0;                        // its two-sided p-value (normal)
  std::uint64_t coordinates = 0;                // coordinates kept at least once
  double z_coordinates = 0.0;                   // (T - E T) / sd T of the per-coordinate statistic
  double p_coordinates = 1.0;                   // its upper-tail p-value (scaled chi-squared)
  double detectable_coordinates = 0.0;          // per-coordinate relative differences +-eps found with 1 - beta
  std::string difference;                       // empty when no difference was found
};
struct StatCompareResult {
  std::string a, b;
  StatCompareOptions options;
  std::vector<StatCompareCase> cases;
  std::size_t decisions = 0;
  double alpha_per_decision = 0.0;
  double seconds = 0.0;
  bool same() const;
};
StatCompareResult compare_statistically(Sampler& a, Sampler& b, const StatCompareOptions& options);
std::string format_stat_compare(const StatCompareResult& result);
std::string format_stat_compare_json(const StatCompareResult& result);

/// Report writers.
/// Text columns, two spaces apart, each at most its `width` characters wide (narrower when its widest cell is); a
/// longer cell wraps onto the row's next lines (tg::wrap_line: at a space where there is one, else after one of
/// ",;/-.", else anywhere). `right` right-aligns a column. One line per row when nothing wraps; no trailing spaces.
struct TextColumn {
  std::string head;
  std::size_t width;
  bool right = false;
};
std::string format_columns(const std::vector<TextColumn>& columns, const std::vector<std::vector<std::string>>& rows);
/// The battery's table: the run's header lines, one row per check (columns wrapped as format_columns, so
/// that no line is much wider than 160 characters), the failures with their details, the verdict.
std::string format_table(const Result& result);
std::string format_json(const std::vector<Result>& results);
std::string format_junit(const std::vector<Result>& results);
/// A few lines for an assertion message: the verdict, each failed row with its effect against the
/// detectable one and the reason, and the command line that reproduces the run.
std::string format_summary(const Result& result);

}  // namespace tg::verify
