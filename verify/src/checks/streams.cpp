// terngrad-bench: independence of the random streams across keys. `streams`: correlation of the
// keep masks of two steps, two workers, two tensors (Bernstein). `collision`: a probe gradient with
// keep probability 1/2 everywhere turns every mask bit into a fair coin; any run of >= 72 mask bits
// that appears twice, at any offset, in any stream of many keys (including keys far apart) is a
// reused stream (docs/statistics.md, "Collision").
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <iterator>
#include <unordered_map>

#include "checks/common.hpp"
#include "tg/verify/keys.hpp"

namespace tg::verify::checks {

namespace {
// The fourth pairs element k of step 2i+1 with element k + floor(d/2) of step 2i: a stream that hands part
// of one step's uniforms to the next at an offset, transformed (u + c mod 1), correlates only there. The other
// pairs: steps 2i+1 and 2i+2 (a lane of step k+1 left with step k's uniform on even steps only), steps k and
// k+L for every L = 2..16 (a ring buffer of L uniform arrays with a lane not refilled: double and triple
// buffering, ...), workers 1 and 2 and tensors 1 and 2 (ids that share part of a stream only from 1 on). Every
// pairing is disjoint, so its products are independent. At lag L two pairings, each tested on its own: phase 0
// pairs (2L i + r, 2L i + r + L), phase 1 pairs (2L i + L + r, 2L i + 2L + r), r < L; a ring that leaves a lane
// unrefilled only on the steps k with k / L even, or only odd, is in one of them.
constexpr int kPairs = 8;
const char* kStreamPairs[kPairs] = {"steps k,k+1",  "workers 0,1",     "tensors 0,1", "steps k,k+1 at +d/2",
                                    "steps 2i+1,2i+2", "steps k,k+L", "workers 1,2", "tensors 1,2"};
constexpr int kLagRow = 5;
constexpr std::uint32_t kMinStepLag = 2, kMaxStepLag = 16;  // the lag row's lags (lag 1: the rows above)
constexpr std::size_t kStepLags = 2 * (kMaxStepLag - kMinStepLag + 1);  // (lag, phase): index 2 (L - 2) + phase
}

std::vector<std::string> plan_streams(const std::string& family) {
  std::vector<std::string> ids;
  for (const char* p : kStreamPairs) ids.push_back(row_id("streams", family, p));
  return ids;
}

namespace {

// The row "steps k,k+L": for each lag L = 2..16 and each of its two pairings (phases), the sum over its disjoint
// pairs of steps of (b_k - p_k)(b'_k - p_k), Bernstein at alpha / 30 each (Bonferroni over the 30 tests: one
// decision); it fails where any does. Its p-value is 30 times the smallest bound; it has no standardized statistic
// (a maximum over tests).
std::string lag_name(std::size_t l) {
  return strf("L = %zu (phase %zu)", l / 2 + kMinStepLag, l % 2);
}

Row step_lags_row(const Ctx& c, const std::string& family, const std::array<double, kStepLags>& S,
                  const std::array<double, kStepLags>& pairs, double sv, double sv2, double bias_same, std::uint32_t n, std::size_t d) {
  Row r = stat_row(c, "streams", family, kStreamPairs[kLagRow]);
  const double a = c.alpha / static_cast<double>(kStepLags);
  std::size_t worst = kStepLags, fails = 0, tested = 0;  // worst: the test of the largest |S| / threshold
  double worst_ratio = -1.0, min_p = 1.0, fewest = 0.0, most = 0.0;
  std::array<BernsteinOutcome, kStepLags> o{};
  for (std::size_t l = 0; l < kStepLags; ++l) {
    if (pairs[l] == 0) continue;
    ++tested;
    o[l] = bernstein_decide(S[l], pairs[l] * sv2, 1.0, a, c.opt.profile.beta);
    const double ratio = o[l].threshold > 0 ? std::fabs(S[l]) / o[l].threshold : 0.0;
    if (ratio > worst_ratio) worst_ratio = ratio, worst = l;
    min_p = std::min(min_p, o[l].p);
    fails += !o[l].pass;
    if (fewest == 0.0 || pairs[l] < fewest) fewest = pairs[l];
    most = std::max(most, pairs[l]);
  }
  const std::string lags = strf("L = %u..%u", kMinStepLag, kMaxStepLag);
  if (worst == kStepLags) {  // a profile of fewer than 4 draws (a custom one; every built-in one has 256 or more)
    r.statistic = "not tested";
    r.p = 1.0, r.pvalue = bound_text(1.0);
    r.detail = strf("steps k,k+L: no pair of draws at any lag %s among %u draws: not tested", lags.c_str(), n);
    return r;
  }
  const BernsteinOutcome& w = o[worst];
  const double E = pairs[worst] * sv;  // E[S] = rho * pairs * sum v_k under a common correlation rho
  const BernsteinOutcome weakest = bernstein_decide(0.0, fewest * sv2, 1.0, a, c.opt.profile.beta);
  r.statistic = strf("steps k,k+L: corr %+.4f at %s (the largest against its threshold)", E > 0 ? S[worst] / E : 0.0,
                     lag_name(worst).c_str());
  r.threshold = strf("|.| <= %.3g there", E > 0 ? w.threshold / E : 0.0);
  r.power = strf("corr >= %.3g at any %s", fewest * sv > 0 ? weakest.detectable / (fewest * sv) : 1.0, lags.c_str());
  if (E > 0) r.effect = S[worst] / E, r.limit = w.threshold / E;
  if (fewest * sv > 0) r.detectable = weakest.detectable / (fewest * sv);
  r.p = std::min(1.0, static_cast<double>(kStepLags) * min_p);
  r.pvalue = bound_text(r.p);
  r.pass = fails == 0;
  r.detail = strf("steps k,k+L: for each lag %s, two pairings of the draws, each disjoint (phase 0: steps 2L i + r and "
                  "2L i + r + L; phase 1: 2L i + L + r and 2L i + 2L + r; r < L: %.0f to %.0f pairs), each summed over the "
                  "%zu coordinates of (b_k - p_k)(b'_k - p_k), b the keep masks (independent terms in [-1,1]); Bernstein at "
                  "alpha/%zu for each of the %zu tests (Bonferroni); catches a ring buffer of L uniform arrays that leaves "
                  "part of one unrefilled",
                  lags.c_str(), fewest, most, d, kStepLags, tested);
  mark_rejected(r);
  if (!r.pass && E > 0) {
    std::string failed;
    for (std::size_t l = 0; l < kStepLags; ++l)
      if (pairs[l] > 0 && !o[l].pass)
        failed += strf("%s%s (%+.4f)", failed.empty() ? "" : ", ", lag_name(l).c_str(), S[l] / (pairs[l] * sv));
    r.detail += strf("; tests that fail: %s", failed.c_str());
    const double from_bias = pairs[worst] * bias_same / E, corr = S[worst] / E;
    if (std::fabs(corr - from_bias) <= w.threshold / E)
      r.detail += strf("; the keep rates are not the spec's p, the same in every draw: per element, (observed rate - p)^2 "
                       "accounts for corr %+.4f of it at %s, and the rest lies within the threshold: the keep "
                       "probabilities are off (the unbiased rows say where), not a stream reused",
                       from_bias, lag_name(worst).c_str());
  }
  return r;
}

}  // namespace

void run_streams(Ctx& c, const Gradient& G, std::uint64_t stream_seed) {
  const Layer& L = G.layers.front();
  const std::size_t d = L.g.size();
  const std::uint32_t n = c.opt.profile.stream_steps;  // even
  const Params params = base_params(c.opt);
  // Keep masks b_k = [t_k != 0], centred with the keep probabilities of the scalar the implementation
  // reports (set from its first draw), so that a wrong scalar does not read as a correlation: under
  // H0 the products of two independent draws have mean 0 and variance v_k v_k.
  std::vector<double> p(d);
  const std::size_t h = d / 2;
  double sv = 0.0, sv2 = 0.0, sh = 0.0, sh2 = 0.0;  // sh: sum sqrt(v_k v_{k+h}), sh2: sum v_k v_{k+h}
  bool centred = false;
  auto centre = [&](float observed) {
    centred = true;
    const double sc = observed > 0.0f ? kTwo32 / static_cast<double>(observed) : 0.0;
    for (std::size_t k = 0; k < d; ++k) {
      const float a = std::fabs(L.g[k]);
      p[k] = observed > 0.0f ? (a > observed ? 1.0 : keep_probability(a, sc)) : 0.0;
      sv += p[k] * (1 - p[k]);
      sv2 += p[k] * (1 - p[k]) * p[k] * (1 - p[k]);
    }
    for (std::size_t k = 0; k + h < d; ++k) {
      const double v1 = p[k] * (1 - p[k]), v2 = p[k + h] * (1 - p[k + h]);
      sh += std::sqrt(v1 * v2);
      sh2 += v1 * v2;
    }
  };
  // element k of row a against element k + h of row b
  auto prod_shifted = [&](std::span<const std::int8_t> a, std::span<const std::int8_t> b) {
    double s = 0.0;
    for (std::size_t k = 0; k + h < d; ++k) s += ((a[k] != 0) - p[k]) * ((b[k + h] != 0) - p[k + h]);
    return s;
  };
  auto prod = [&](std::span<const std::int8_t> a, std::span<const std::int8_t> b) {
    double s = 0.0;
    for (std::size_t k = 0; k < d; ++k) s += ((a[k] != 0) - p[k]) * ((b[k] != 0) - p[k]);
    return s;
  };
  double S[kPairs] = {};
  double pairs_of[kPairs] = {};
  std::vector<std::uint32_t> kept(d, 0);  // element k kept in how many of worker 0's n draws (for the note below)
  std::uint32_t chunk = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(c.sampler.max_request_elements() / d, 2, n));
  chunk -= chunk % 2;
  // the last kMaxStepLag steps, kept until their partners at every lag arrive, in this request or a later one
  std::vector<std::vector<std::int8_t>> held(kMaxStepLag, std::vector<std::int8_t>(d));
  std::array<double, kStepLags> lag_S{}, lag_pairs{};
  for (std::uint32_t j0 = 0; j0 < n; j0 += chunk) {
    const std::uint32_t cnt = std::min(chunk, n - j0);
    Draws w0 = c.sampler.draw({L.g, params, {stream_seed, 0, 0, j0}, cnt, std::nullopt});
    if (!centred) centre(first_row_scalar(w0));
    for (std::uint32_t j = 0; j < cnt; ++j) {
      const std::span<const std::int8_t> row = w0.row(j);
      for (std::size_t k = 0; k < d; ++k) kept[k] += row[k] != 0;
    }
    // pairs of consecutive steps (2i, 2i+1): disjoint, so the pair products are independent
    for (std::uint32_t j = 0; j + 1 < cnt; j += 2) {
      S[0] += prod(w0.row(j), w0.row(j + 1));
      S[3] += prod_shifted(w0.row(j + 1), w0.row(j));  // disjoint pairs too: each element of a row once
      pairs_of[0] += 1, pairs_of[3] += 1;
    }
    for (std::uint32_t j = 1; j + 1 < cnt; j += 2) S[4] += prod(w0.row(j), w0.row(j + 1)), pairs_of[4] += 1;
    for (std::uint32_t j = 0; j < cnt; ++j) {
      const std::uint32_t step = j0 + j;
      const std::span<const std::int8_t> row = w0.row(j);
      // every step from L on has its partner step - L, in phase 0 where step / L is odd (step = 2L i + r + L) and
      // in phase 1 where it is even (step = 2L i + 2L + r)
      for (std::uint32_t lag = kMinStepLag; lag <= kMaxStepLag && lag <= step; ++lag) {
        const std::size_t t = 2 * (lag - kMinStepLag) + ((step / lag) % 2 == 1 ? 0 : 1);
        lag_S[t] += prod(held[(step - lag) % kMaxStepLag], row);
        lag_pairs[t] += 1;
      }
      std::copy(row.begin(), row.end(), held[step % kMaxStepLag].begin());
    }
    // workers 1, 2 and tensors 1, 2 at steps j0 .. j0 + cnt/2: 1 paired with worker 0 tensor 0 at the same steps,
    // 2 with 1
    const std::uint32_t half = cnt / 2;
    Draws w1 = c.sampler.draw({L.g, params, {stream_seed, 1, 0, j0}, half, std::nullopt});
    Draws t1 = c.sampler.draw({L.g, params, {stream_seed, 0, 1, j0}, half, std::nullopt});
    Draws w2 = c.sampler.draw({L.g, params, {stream_seed, 2, 0, j0}, half, std::nullopt});
    Draws t2 = c.sampler.draw({L.g, params, {stream_seed, 0, 2, j0}, half, std::nullopt});
    for (std::uint32_t j = 0; j < half; ++j) {
      S[1] += prod(w0.row(j), w1.row(j));
      S[2] += prod(w0.row(j), t1.row(j));
      S[6] += prod(w1.row(j), w2.row(j));
      S[7] += prod(t1.row(j), t2.row(j));
      pairs_of[1] += 1, pairs_of[2] += 1, pairs_of[6] += 1, pairs_of[7] += 1;
    }
    c.progress.add(3.0 * cnt * d, "streams");
  }

  // A keep rate q_k off the spec's p_k, the same in every draw, gives each product the mean (q_k - p_k)(q_k' - p_k')
  // with no reused stream at all. Its part of each sum is estimated from worker 0's n draws: (qh_k - p_k)^2 less
  // qh_k (1 - qh_k) / (n - 1) estimates (q_k - p_k)^2 without bias; elements k and k + h are different coins.
  double bias_same = 0.0, bias_shift = 0.0;
  for (std::size_t k = 0; k < d; ++k) {
    const double q = static_cast<double>(kept[k]) / n;
    bias_same += (q - p[k]) * (q - p[k]) - q * (1.0 - q) / (n - 1.0);
    if (k + h < d) bias_shift += (q - p[k]) * (static_cast<double>(kept[k + h]) / n - p[k + h]);
  }
  for (int i = 0; i < kPairs; ++i) {
    if (i == kLagRow) {
      c.rows.push_back(step_lags_row(c, G.family, lag_S, lag_pairs, sv, sv2, bias_same, n, d));
      continue;
    }
    const double pairs = pairs_of[i];
    Row r = stat_row(c, "streams", G.family, kStreamPairs[i]);
    const double V = pairs * (i == 3 ? sh2 : sv2);
    auto o = bernstein_decide(S[i], V, 1.0, c.alpha, c.opt.profile.beta);
    const double E = pairs * (i == 3 ? sh : sv);  // E[S] = rho * pairs * sum sqrt(v v') under a common correlation rho
    r.statistic = strf("%s: corr %+.4f", kStreamPairs[i], E > 0 ? S[i] / E : 0.0);
    r.threshold = strf("|.| <= %.3g", E > 0 ? o.threshold / E : 0.0);
    r.power = strf("corr >= %.3g", E > 0 ? o.detectable / E : 0.0);
    apply(r, o, E);
    r.detail = i == 3 ? strf("%s: sum over %.0f pairs of steps (2i, 2i+1) and the %zu coordinates k < d - floor(d/2) "
                             "of (b_k - p_k)(b'_{k+h} - p_{k+h}), b of step 2i+1, b' of step 2i, h = floor(d/2) "
                             "(independent terms in [-1,1]); catches uniforms handed on from one step to the next "
                             "at an offset", kStreamPairs[i], pairs, d - h)
                      : strf("%s: sum over %.0f pairs of draws and %zu coordinates of (b_k - p_k)(b'_k - p_k), b the keep "
                             "masks (independent terms in [-1,1]); catches a partly reused stream", kStreamPairs[i], pairs, d);
    if (pairs == 0)  // a profile of fewer than 16 draws (a custom one; every built-in one has 256 or more)
      r.detail = strf("%s: no pair of draws of this kind among %u draws: not tested", kStreamPairs[i], n);
    mark_rejected(r);
    if (!r.pass && E > 0) {
      const double from_bias = pairs * (i == 3 ? bias_shift : bias_same) / E, corr = S[i] / E;
      if (std::fabs(corr - from_bias) <= o.threshold / E)
        r.detail += strf("; the keep rates are not the spec's p, the same in every draw: per element, (observed rate - "
                         "p)^2 accounts for corr %+.4f of it, and the rest, %+.4f, lies within the threshold: the keep "
                         "probabilities are off (the unbiased rows say where), not a stream reused",
                         from_bias, corr - from_bias);
      else if (std::fabs(from_bias) > o.threshold / E)
        r.detail += strf("; of it, keep rates off the spec's p (the same in every draw) account for corr %+.4f", from_bias);
    }
    c.rows.push_back(r);
  }
}

// ---- collision ---------------------------------------------------------------------------------------

namespace {

// 64-bit windows starting every kStride bits are indexed, so any common run of >= 64 + kStride - 1 bits
// holds an indexed window whole. The finding threshold (a common run of `run` bits) is the smallest run
// >= kMinRun whose false-fail bound over all pairs of places stays within half the row's alpha share
// (collision_run): 72 on small probes, up to about 90 at the full profile. A stride reuse in runs of 96
// at lag 96 (no lag row, no block of 64 sees it) is found at quick and ci. Shorter runs are the block and
// lag rows' class.
constexpr std::size_t kStride = 8;
constexpr std::size_t kMinRun = 72;
static_assert(kMinRun >= 64 + kStride - 1, "a run of kMinRun bits must hold an indexed window");
// A degenerate implementation (masks far from fair coins: long runs of zeros) makes many windows equal;
// a scan stops after kMaxRepeats findings or kMaxCompares comparisons.
constexpr std::uint64_t kMaxRepeats = 16, kMaxCompares = 2000000;

std::string key_text(const StreamKey& k) {
  return strf("(seed %#llx, worker %u, tensor %u, step %u)", static_cast<unsigned long long>(k.seed), k.worker, k.tensor,
              k.step);
}

// "; 2^24 apart: a step kept in 24 bits or fewer?" where two keys that share a stream differ by a power of two in
// one field (a field cut to k bits meets itself 2^k apart); "" otherwise. `lead` goes before the note.
std::string power_of_two_note(std::uint32_t diff, const char* what, const char* lead = "; ") {
  if (diff < 2 || !std::has_single_bit(diff)) return "";
  const int k = std::countr_zero(diff);
  return strf("%s2^%d apart: %s kept in %d bits or fewer?", lead, k, what, k);
}

// For two keys that differ in the tensor or the worker id only: which ids, and the period that maps them to one.
std::string id_map_hint(const StreamKey& x, const StreamKey& y) {
  if (x.seed != y.seed || x.step != y.step || (x.worker != y.worker) == (x.tensor != y.tensor)) return "";
  const bool tensors = x.tensor != y.tensor;
  const std::uint32_t a = tensors ? x.tensor : x.worker, b = tensors ? y.tensor : y.worker;
  const std::uint32_t diff = std::max(a, b) - std::min(a, b);
  return strf(" (%s ids %u and %u: an id reduced modulo a divisor of %u?%s)", tensors ? "tensor" : "worker",
              std::min(a, b), std::max(a, b), diff, power_of_two_note(diff, "an id").c_str());
}

// The same for two keys of one seed, worker and tensor whose steps differ by a power of two.
std::string step_map_hint(const StreamKey& x, const StreamKey& y) {
  if (x.seed != y.seed || x.worker != y.worker || x.tensor != y.tensor || x.step == y.step) return "";
  const std::string note = power_of_two_note(std::max(x.step, y.step) - std::min(x.step, y.step), "a step", "");
  return note.empty() ? "" : " (steps " + note + ")";
}

struct ProbeStream {
  StreamKey key;
  std::size_t n = 0;                // mask bits (the tensor's elements)
  std::vector<std::uint64_t> bits;  // mask bit k at word k/64, bit k%64, and one word more
  std::string name() const { return key_text(key); }
};

// The keys: a grid of small ones (additive or swapped keys collide there), keys far apart in each
// field (truncation to 8, 16 or 31 bits collides there), and seeds differing in the high word only.
struct KeyBlock {
  StreamKey first;
  std::uint32_t steps;
};
std::vector<KeyBlock> collision_keys(std::uint64_t S) {
  std::vector<KeyBlock> k;
  for (std::uint32_t w = 0; w < 4; ++w)
    for (std::uint32_t t = 0; t < 2; ++t) k.push_back({{S, w, t, 0}, 4});
  k.push_back({{S, 0, 0, 65535}, 3});
  k.push_back({{S, 0, 0, 0x7fffffffu}, 2});
  k.push_back({{S, 0, 0, 0xfffffffeu}, 2});
  for (std::uint32_t w : {255u, 256u, 65536u, 0x80000000u, 0xffffffffu}) k.push_back({{S, w, 0, 0}, 1});
  for (std::uint32_t t : {16u, 256u, 65536u, 0x80000000u, 0xffffffffu}) k.push_back({{S, 0, t, 0}, 1});
  // (bit 62, not 63: the battery's seeds stay below 2^63 for codecs that parse them as signed)
  for (std::uint64_t s : {S ^ (std::uint64_t{1} << 32), S ^ (std::uint64_t{1} << 62), S + 1}) k.push_back({{s, 0, 0, 0}, 1});
  // Powers of ten as steps, tensors and workers: key maps that pack fields in decimal (step x 10^4 + tensor
  // meets (tensor 10^4, step 0) at (step 1, tensor 0)) or reduce one modulo a power of ten (step mod 10^6
  // meets step 10^6 at step 0) collide only at such keys.
  for (std::uint64_t power = 10; power <= 1000000000u; power *= 10) {
    const auto p = static_cast<std::uint32_t>(power);
    k.push_back({{S, 0, 0, p}, 1});
    k.push_back({{S, 0, p, 0}, 1});
    k.push_back({{S, p, 0, 0}, 1});
  }
  return k;
}

// The indexed windows, sorted by value and bucketed by their top bits (compact: 16 bytes a window, where a
// hash multimap would take three times that at the full profile's 1.7 million windows a pass).
class WindowIndex {
 public:
  struct Entry {
    std::uint64_t window;
    std::uint32_t stream, offset;
  };
  explicit WindowIndex(std::vector<Entry> e) : e_(std::move(e)) {
    std::sort(e_.begin(), e_.end(), [](const Entry& a, const Entry& b) { return a.window < b.window; });
    while (bits_ < 24 && (std::size_t{1} << bits_) < e_.size()) ++bits_;
    start_.assign((std::size_t{1} << bits_) + 1, 0);
    for (const Entry& x : e_) ++start_[bucket(x.window) + 1];
    for (std::size_t b = 1; b < start_.size(); ++b) start_[b] += start_[b - 1];
    // A bitmap of the windows' top fbits_ bits, 8 bits per entry (a few MiB: it stays in cache where the
    // entries do not), so that most lookups of an absent window touch nothing else.
    while (fbits_ < 28 && (std::size_t{1} << fbits_) < 8 * e_.size()) ++fbits_;
    filter_.assign(((std::size_t{1} << fbits_) + 63) / 64, 0);
    for (const Entry& x : e_) filter_[fslot(x.window) / 64] |= std::uint64_t{1} << (fslot(x.window) % 64);
  }
  // Whether some entry may have window w (false: none has).
  bool maybe(std::uint64_t w) const { return (filter_[fslot(w) / 64] >> (fslot(w) % 64)) & 1; }
  // The entries whose window equals w.
  std::pair<const Entry*, const Entry*> equal_range(std::uint64_t w) const {
    const Entry* lo = e_.data() + start_[bucket(w)];
    const Entry* hi = e_.data() + start_[bucket(w) + 1];
    while (lo < hi && lo->window < w) ++lo;
    const Entry* end = lo;
    while (end < hi && end->window == w) ++end;
    return {lo, end};
  }

 private:
  std::size_t bucket(std::uint64_t w) const { return bits_ ? static_cast<std::size_t>(w >> (64 - bits_)) : 0; }
  std::size_t fslot(std::uint64_t w) const { return fbits_ ? static_cast<std::size_t>(w >> (64 - fbits_)) : 0; }
  std::vector<Entry> e_;
  std::vector<std::uint32_t> start_;
  std::vector<std::uint64_t> filter_;
  int bits_ = 0, fbits_ = 0;
};

// The probe gradient on n elements: element 0 is 1 (the scalar), every other +-1/2 (alternating signs).
std::vector<float> probe_gradient(std::size_t n) {
  std::vector<float> g(n, 0.5f);
  for (std::size_t k = 1; k < n; k += 2) g[k] = -0.5f;
  if (n) g[0] = 1.0f;
  return g;
}

// One draw's keep mask as a probe stream.
ProbeStream mask_stream(std::span<const std::int8_t> row, const StreamKey& key) {
  ProbeStream ps;
  ps.key = key;
  ps.n = row.size();
  ps.bits.assign((ps.n + 63) / 64 + 1, 0);
  for (std::size_t k = 0; k < ps.n; ++k)
    if (row[k] != 0) ps.bits[k / 64] |= std::uint64_t{1} << (k % 64);
  return ps;
}

// The kept bits of a probe stream but element 0's (the scalar's, always kept).
__attribute__((target_clones("popcnt", "default"))) std::uint64_t kept_after_first(const ProbeStream& ps) {
  std::uint64_t c = 0;
  for (std::uint64_t w : ps.bits) c += static_cast<std::uint64_t>(std::popcount(w));  // bits past n are 0
  return ps.n ? c - (ps.bits[0] & 1u) : 0;
}

// Where a repeat's two streams are not both fair coins (either's kept fraction outside 1/2 +- t, t the Hoeffding
// band at 1e-9: a correct codec's stream of n bits of p = 1/2 lies outside it with probability below 1e-9), the note
// that says so: at that density windows agree by chance, so the finding points at the keep probabilities of these
// draws rather than at a reused stream. "" otherwise. Only the message depends on it, not the verdict: the scan's
// bound holds for fair coins, which a correct codec's probe masks are.
constexpr const char* kUnfairLead = "; but these masks are not fair coins";
std::string unfair_note(const ProbeStream& a, const ProbeStream& b) {
  auto frac = [](const ProbeStream& ps) { return ps.n > 1 ? static_cast<double>(kept_after_first(ps)) / static_cast<double>(ps.n - 1) : 0.5; };
  auto band = [](const ProbeStream& ps) { return ps.n > 1 ? std::sqrt(std::log(2e9) / (2.0 * static_cast<double>(ps.n - 1))) : 1.0; };
  const double fa = frac(a), fb = frac(b);
  if (std::fabs(fa - 0.5) <= band(a) && std::fabs(fb - 0.5) <= band(b)) return {};
  return strf("%s, though p = 1/2 at every element of the probe: %s kept %.4f of its "
              "%zu bits and %s %.4f (1/2 +- %.3f expected): at that density windows agree by chance, so the keep "
              "probabilities of these draws are off (a scalar not the spec's? see structure), which a reused stream "
              "need not explain",
              kUnfairLead, a.name().c_str(), fa, a.n - 1, b.name().c_str(), fb, std::max(band(a), band(b)));
}

// Whether mask bits 64..m-1 of a and b agree (flip = 0) or are complements (flip = 1).
bool agree_from_64(const std::uint64_t* a, const std::uint64_t* b, std::size_t m, int flip) {
  const std::uint64_t want = flip ? ~std::uint64_t{0} : 0;  // the bits of a ^ b where they agree
  for (std::size_t w = 1; w * 64 < m; ++w) {
    const std::size_t bits = std::min<std::size_t>(64, m - w * 64);
    const std::uint64_t used = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
    if (((a[w] ^ b[w]) & used) != (want & used)) return false;
  }
  return true;
}

inline int bit_at(const std::vector<std::uint64_t>& b, std::size_t k) { return static_cast<int>((b[k / 64] >> (k % 64)) & 1u); }
inline std::uint64_t window_at(const std::vector<std::uint64_t>& b, std::size_t j) {
  const std::size_t w = j / 64, r = j % 64;
  return r == 0 ? b[w] : (b[w] >> r) | (b[w + 1] << (64 - r));
}

}  // namespace

std::vector<std::string> plan_collision() {
  return {row_id("collision", "p=1/2 probe"), row_id("collision", "p=1/2 probe", "every lag")};
}

std::uint32_t long_probe_steps(const Profile& p, std::size_t d) {
  if (std::min<std::size_t>(d, kLongProbeElements) < 192) return 0;
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(std::uint64_t{256} * p.steps, std::uint64_t{1} << 18));
}

namespace {

// One probe pass: every listed key drawn under one mode (and scalar), its mask bits, and the scan of
// every window at every offset for a run of >= min_run bits holding an indexed window of another place.
struct ProbeScan {
  std::vector<ProbeStream> streams;
  double kept = 0.0, bits = 0.0;  // the fair-coin tally (element 0 left out)
  std::uint64_t repeats = 0, windows = 0;
  bool stopped = false;
  std::string first;
  std::size_t longest = 0;  // the longest repeated run found
};

ProbeScan probe_and_scan(Ctx& c, const std::vector<float>& g, const Params& params, std::optional<float> scalar,
                         const std::vector<KeyBlock>& keys, std::size_t min_run) {
  const std::size_t d = g.size();
  ProbeScan P;
  for (const auto& kb : keys) {
    Draws dr = c.sampler.draw({g, params, kb.first, kb.steps, scalar});
    for (std::uint32_t j = 0; j < kb.steps; ++j) {
      StreamKey key = kb.first;
      key.step = kb.first.step + j;
      P.streams.push_back(mask_stream(dr.row(j), key));
    }
    c.progress.add(static_cast<double>(kb.steps) * d, "collision");
  }
  for (const auto& ps : P.streams) P.kept += static_cast<double>(kept_after_first(ps)), P.bits += static_cast<double>(d - 1);
  if (std::fabs((P.bits > 0 ? P.kept / P.bits : 0.5) - 0.5) > 0.05) return P;  // not judged: see the caller
  // Index the 64-bit windows starting every kStride bits; slide over every offset of every stream. Two
  // streams (or two places of one) sharing a run of >= min_run bits share at least one indexed window.
  const std::size_t last = d >= 64 ? d - 64 : 0;
  const auto& streams = P.streams;
  std::vector<WindowIndex::Entry> entries;
  entries.reserve(streams.size() * (d / kStride + 1));
  for (std::uint32_t s = 0; s < streams.size(); ++s)
    for (std::size_t j = 0; j + 64 <= d; j += kStride)
      entries.push_back({window_at(streams[s].bits, j), s, static_cast<std::uint32_t>(j)});
  const WindowIndex indexed(std::move(entries));
  // (stream, stream, offset difference, complemented)
  std::vector<std::tuple<std::uint32_t, std::uint32_t, std::int64_t, int>> seen;
  std::tuple<std::uint32_t, std::uint32_t, std::int64_t, int> first_diag{};  // the named finding's, and its distance
  std::uint64_t first_dist = 0;
  std::uint64_t compares = 0;
  // Each window is looked up as it is and complemented: a run of uniforms reused as 1 - u ("antithetic
  // variates") gives the complemented mask bits on the p = 1/2 probe, at any distance.
  for (std::uint32_t s = 0; s < streams.size() && d >= 64 && !P.stopped; ++s) {
    const auto& A = streams[s].bits;
    for (std::size_t j = 0; j <= last && !P.stopped; ++j) {
      ++P.windows;
      for (int flip = 0; flip < 2 && !P.stopped; ++flip) {
        const std::uint64_t key = window_at(A, j) ^ (flip ? ~std::uint64_t{0} : 0);
        if (!indexed.maybe(key)) continue;
        auto range = indexed.equal_range(key);
        for (const auto* it = range.first; it != range.second; ++it) {
          const std::uint32_t s2 = it->stream, j2 = it->offset;
          if (s2 == s && j2 == j) continue;  // the window itself (never its own complement)
          if (++compares > kMaxCompares || P.repeats >= kMaxRepeats) {
            P.stopped = true;
            break;
          }
          auto diag = std::make_tuple(std::min(s, s2), std::max(s, s2),
                                      s <= s2 ? static_cast<std::int64_t>(j) - j2 : static_cast<std::int64_t>(j2) - j, flip);
          if (std::find(seen.begin(), seen.end(), diag) != seen.end()) continue;  // a run already found
          const auto& B = streams[s2].bits;
          std::size_t back = 0, fwd = 0;
          while (back < j && back < j2 && (bit_at(A, j - back - 1) ^ flip) == bit_at(B, j2 - back - 1)) ++back;
          while (j + 64 + fwd < d && j2 + 64 + fwd < d && (bit_at(A, j + 64 + fwd) ^ flip) == bit_at(B, j2 + 64 + fwd)) ++fwd;
          const std::size_t run = back + 64 + fwd;
          if (run < min_run) continue;
          seen.push_back(diag);
          P.longest = std::max(P.longest, run);
          // The first finding is named; a later one of the same two streams at a smaller distance replaces it (a
          // stream that repeats every 2^16 bits is found first where its run starts at bit 0, maybe at 2^17).
          const std::uint64_t dist = j > j2 ? j - j2 : j2 - j;
          const bool first = P.repeats++ == 0;
          if (first || (std::get<0>(diag) == std::get<0>(first_diag) && std::get<1>(diag) == std::get<1>(first_diag) &&
                        flip == std::get<3>(first_diag) && dist < first_dist)) {
            first_diag = diag, first_dist = dist;
            P.first = strf("mask bits %zu..%zu of %s %s bits %zu..%zu of %s (%zu bits)", j - back, j - back + run - 1,
                           streams[s].name().c_str(), flip ? "are the complement of" : "equal", j2 - back,
                           j2 - back + run - 1, streams[s2].name().c_str(), run) +
                      (j == j2 ? id_map_hint(streams[s].key, streams[s2].key) + step_map_hint(streams[s].key, streams[s2].key)
                               : std::string()) +
                      unfair_note(streams[s], streams[s2]);
          }
        }
      }
    }
  }
  return P;
}

// The lag scan: on the probe every mask bit but element 0's is a fair coin, so for a lag L the products
// s_k s_{k+L} (s = 2b - 1, k = 1 .. d-1-L) of one stream are independent Rademacher signs (along each chain
// k, k+L, k+2L, ... a product of consecutive independent signs is a new independent sign). Their sum over
// the pass's streams, S_L, is a sum of N_L independent +-1 terms under H0: P(|S_L| >= z sqrt(N_L)) <=
// 2 exp(-z^2 / 2) (Hoeffding), for every lag L = 1 .. kMaxLag. A reuse at any lag up to kMaxLag, in runs
// of any length, correlates the pairs at that lag (a stride bug in runs of L at lag L: half the pairs
// equal, correlation 1/2); a reuse as 1 - u anticorrelates them.
constexpr std::size_t kMaxLag = 1024;
// The lags a set of streams is scanned at: 1 .. the largest (n - 1) / 2, at most kMaxLag (sizes only).
std::size_t scanned_lags(std::size_t n) { return n >= 3 ? std::min(kMaxLag, (n - 1) / 2) : 0; }
// The small pass's streams are scanned at every lag that has a pair, 1 .. n - 2 (element 0 left out): a
// remainder loop of width W reuses the block before at lag W, or restarts the stream at lag n - (n mod W),
// both above (n - 1) / 2. At lags above (n - 1) / 2 the pairs (k, k + L) are disjoint, so independent too.
constexpr std::size_t kSmallMaxLag = 4094;
std::size_t scanned_lags_whole(std::size_t n) { return n >= 3 ? std::min(kSmallMaxLag, n - 2) : 0; }
struct LagScan {
  std::size_t lag = 0;  // the lag of the largest |z| (0: none scanned)
  double z = 0.0, n = 0.0;  // its standardized sum and its number of terms N_L
  double n_min = 0.0;       // the smallest N_L (at the largest lag)
};
// Each stream takes part at the lags L <= lags(n) of its own length n (scanned_lags, or scanned_lags_whole
// for the small pass).
// (Built twice, with and without the popcnt instruction, the one the CPU has picked at load time: the
// portable popcount is a library call, and this loop is most of the collision check at quick.)
__attribute__((target_clones("popcnt", "default"))) LagScan lag_scan(const std::vector<ProbeStream>& streams,
                                                                      std::size_t (*lags)(std::size_t) = scanned_lags) {
  LagScan out;
  std::size_t max_lag = 0;
  for (const auto& ps : streams) max_lag = std::max(max_lag, lags(ps.n));
  for (std::size_t L = 1; L <= max_lag; ++L) {
    double ones = 0.0, n = 0.0;
    for (const auto& ps : streams) {
      if (lags(ps.n) < L) continue;
      const std::size_t last = ps.n - 1 - L;  // pairs k = 1 .. last
      std::uint64_t c = 0;
      for (std::size_t w = 0; w * 64 <= last; ++w) {
        std::uint64_t x = ps.bits[w] ^ window_at(ps.bits, w * 64 + L);
        if (w == 0) x &= ~std::uint64_t{1};  // element 0: the scalar's, always kept
        if (w * 64 + 63 > last) x &= (last - w * 64 == 63) ? ~std::uint64_t{0} : (std::uint64_t{1} << (last - w * 64 + 1)) - 1;
        c += static_cast<std::uint64_t>(std::popcount(x));
      }
      ones += static_cast<double>(c);
      n += static_cast<double>(last);
    }
    const double z = (n - 2.0 * ones) / std::sqrt(n);
    if (out.lag == 0 || std::fabs(z) > std::fabs(out.z)) out.lag = L, out.z = z, out.n = n;
    out.n_min = n;  // N_L decreases with L: the last is the smallest
  }
  return out;
}

// The small pass: the probe at sizes whose remainders modulo 4, 8, ..., 2048 are as large as they get
// (2^k - 1) and two others, `steps` draws each: a SIMD or per-thread remainder loop that reuses the
// uniforms of the block before it (lag = the block width, in a run shorter than the width) or restarts
// the stream (lag = the elements before the remainder) shows in the lag scan there, where a large tensor
// dilutes it. Scanned at every lag of each size (scanned_lags_whole), so block widths up to 2048.
constexpr std::size_t kSmallProbeSizes[] = {3, 7, 15, 31, 63, 100, 127, 255, 511, 767, 1023, 2047, 4095};
std::string small_pass_name() { return "small (3..4095 elements)"; }
// "2^20+3" for 2^20 + 3 elements, "2^24+2^20+3" for 2^24 + 2^20 + 3 (the large pass's sizes): powers of two
// from 2^10 up (at most three), then a remainder below 16; the number otherwise.
std::string large_label(std::size_t n) {
  std::string label;
  std::size_t r = n;
  int terms = 0;
  for (int e = 40; e >= 10 && r >= 16; --e)
    if (r >= (std::size_t{1} << e)) label += strf("2^%d+", e), r -= std::size_t{1} << e, ++terms;
  if (label.empty() || r >= 16 || terms > 3) return strf("%zu", n);
  return r ? label + strf("%zu", r) : label.substr(0, label.size() - 1);
}

struct ProbePass {
  Params params;
  std::optional<float> scalar;
  std::string name;
};
std::vector<ProbePass> probe_passes(const Options& o) {
  const Params params = base_params(o);
  std::vector<ProbePass> passes{{params, std::nullopt, to_string(params.clip)}};
  for (ClipMode m : {ClipMode::none, ClipMode::clip, ClipMode::saturate}) {
    if (!supports(o, to_string(m))) continue;
    Params pm = params;
    pm.clip = m;
    if (m != params.clip) passes.push_back({pm, std::nullopt, to_string(m)});
    if (supports(o, "shared-scalar")) passes.push_back({pm, 1.0f, std::string(to_string(m)) + " with a given scalar"});
  }
  return passes;
}

}  // namespace

std::size_t collision_passes(const Options& o) { return probe_passes(o).size(); }

std::size_t collision_streams() {
  std::size_t n = 0;
  for (const auto& kb : collision_keys(0)) n += kb.steps;
  return n;
}

std::size_t small_probe_elements() {
  std::size_t n = 0;
  for (std::size_t m : kSmallProbeSizes) n += m;
  return n;
}


void run_collision(Ctx& c, std::size_t d, std::uint64_t stream_seed) {
  // Probe: element 0 is 1 (the scalar), every other is +-1/2 (alternating signs), so p_k = 1/2
  // exactly and the keep bit is a fair coin under H0. Its sigma is about 1/2, so a clip bound
  // c sigma (c = 2.5) exceeds 1: the probe is the same in every clipping mode, and with a given
  // scalar 1 (its own).
  const std::vector<float> g = probe_gradient(d);
  const Params params = base_params(c.opt);
  const std::vector<KeyBlock> keys = collision_keys(stream_seed);
  // The key list in the base mode, then in each other mode the implementation has and with a given
  // scalar in each mode: a codec's paths (encode, encode with a scalar, clipped) may key their streams
  // apart, and a key bug on one path shows only there. Each pass is scanned on its own (the same key
  // gives the same mask in every mode of a spec-stream codec).
  const std::vector<ProbePass> passes = probe_passes(c.opt);
  std::vector<ProbeStream> streams;  // the base pass's, for the long probe
  std::uint64_t repeats = 0, windows = 0;
  std::size_t longest_run = 0;  // the longest repeated run of any pass or of the long probe
  bool stopped = false;
  std::string first, pass_names;
  double coin_bound = 0.0, scan_bound = 0.0;
  // The large passes, in the base mode, each scanned on its own: a stream that repeats inside one large tensor
  // at any lag (a counter that wraps, per-thread chunks that restart it), where every other pass is smaller.
  // The probe on the profile's large_d elements (2^20 + 3 at quick, 2^22 + 3 at ci and full) under four keys;
  // at ci and full also on probe_large_d (2^24 + 2^20 + 3) under one key of its own: a float32 element index
  // (exact up to 2^24), or chunks of 2^23 or 2^24 elements that restart the stream. One key there, since the
  // scan's cost grows with the bits and the cross-key reuse is the first pass's.
  struct LargePass {
    std::vector<float> g;
    std::vector<KeyBlock> keys;
    std::string label;  // "2^22+3 elements, 4 keys"
    std::size_t streams = 0;
  };
  std::vector<LargePass> larges;
  larges.push_back({probe_gradient(c.opt.profile.large_d),
                    {{{stream_seed, 0, 0, 0}, 2}, {{stream_seed, 1, 0, 0}, 1}, {{stream_seed, 0, 1, 0}, 1}},
                    large_label(c.opt.profile.large_d) + " elements, 4 keys"});
  if (c.opt.profile.probe_large_d > c.opt.profile.large_d)
    larges.push_back({probe_gradient(c.opt.profile.probe_large_d), {{{stream_seed, 0, 0, 2}, 1}},
                      large_label(c.opt.profile.probe_large_d) + " elements, 1 key"});
  // Under H0 two given places agree (or are complements) on `run` fair bits with probability 2^-run each;
  // over all pairs of places of a pass the chance of any finding is at most 2 (streams * d)^2 2^-run. The
  // threshold is the smallest run >= kMinRun that keeps the sum over passes within half the row's share.
  std::size_t probe_streams = 0;
  for (const auto& kb : keys) probe_streams += kb.steps;
  const double small_places = static_cast<double>(probe_streams) * static_cast<double>(d);
  double pairs = 2.0 * static_cast<double>(passes.size()) * small_places * small_places;
  std::string large_text;
  for (auto& lp : larges) {
    for (const auto& kb : lp.keys) lp.streams += kb.steps;
    const double places = static_cast<double>(lp.streams) * static_cast<double>(lp.g.size());
    pairs += 2.0 * places * places;
    large_text += strf("%s%zu streams of %s mask bits", large_text.empty() ? "" : " and ", lp.streams,
                       large_label(lp.g.size()).c_str());
  }
  const std::size_t min_run = collision_run(pairs, c.alpha);
  LagScan worst_lag, base_lag;
  std::string worst_lag_pass;
  auto keep_worst = [&](const LagScan& ls, const std::string& pass) {
    if (ls.lag && (worst_lag.lag == 0 || std::fabs(ls.z) > std::fabs(worst_lag.z))) worst_lag = ls, worst_lag_pass = pass;
  };
  double lag_tests = 0.0, smallest_n = 0.0, small_coin_bound = 0.0, small_fraction = 0.5;
  for (std::size_t pi = 0; pi < passes.size() + larges.size(); ++pi) {
    const bool large = pi >= passes.size();
    const ProbePass& pass = large ? passes[0] : passes[pi];
    const LargePass* lp = large ? &larges[pi - passes.size()] : nullptr;
    const std::string name = large ? pass.name + ", large (" + lp->label + ")" : pass.name;
    const std::vector<float>& gp = large ? lp->g : g;
    ProbeScan P = probe_and_scan(c, gp, pass.params, pass.scalar, large ? lp->keys : keys, min_run);
    pass_names += (pi ? ", " : "") + name;
    // The probe's masks must be fair coins: under H0 the kept fraction of the N bits (element 0, always
    // kept, left out) is within 1/2 +- 0.05 except with probability 2 exp(-2 N 0.05^2) (Hoeffding).
    // A codec whose keep rule or scalar differs from the spec's fails here, and reuse is not judged.
    const double frac = P.bits > 0 ? P.kept / P.bits : 0.5;
    coin_bound += 2.0 * std::exp(-2.0 * P.bits * 0.05 * 0.05);
    if (std::fabs(frac - 0.5) > 0.05) {
      Row r = stat_row(c, "collision", "p=1/2 probe");
      r.statistic = strf("kept fraction %.4f", frac);
      r.threshold = "1/2 +- 0.05";
      r.p = coin_bound;
      r.pvalue = strf("p <= %.2g", coin_bound);
      r.power = strf("any reuse of >= %zu mask bits", min_run);
      r.pass = false;
      // Where no row about keep rates fails, it is no use pointing there: no other gradient of the battery has
      // a keep probability of exactly 1/2.
      const bool others_fail = std::any_of(c.rows.begin(), c.rows.end(), [](const Row& x) {
        return !x.pass && x.kind != "info" && x.check.find("collision") == std::string::npos &&
               x.check.find("streams") == std::string::npos;
      });
      r.detail = strf("clip %s: the probe (every |g| = s/2, so p = 1/2) was kept in a fraction %.4f of %.0f draws: the "
                      "keep probabilities are not the spec's (its keep rule, its scalar, or elements left out%s), so "
                      "stream reuse cannot be judged",
                      name.c_str(), frac, P.bits,
                      others_fail ? ": the failing structure and unbiased rows say which"
                                  : "; no other row fails, and no other gradient of the battery has a keep probability "
                                    "of exactly 1/2: a keep rule that decides p = 1/2 (or other exact binary fractions) "
                                    "apart, without the uniform?");
      mark_rejected(r);
      c.rows.push_back(r);
      Row lag = stat_row(c, "collision", "p=1/2 probe", "every lag");
      lag.statistic = "not judged";
      lag.threshold = "fair coins";
      lag.p = r.p, lag.pvalue = r.pvalue;  // the evidence is the coin row's
      lag.power = r.power;
      lag.pass = false;
      lag.detail = "the probe's masks are not fair coins (the row above), so the lag scan cannot be judged";
      c.rows.push_back(lag);
      return;
    }
    // The lag scan of this pass: its most extreme lag, against the run's worst so far. A pass whose masks
    // are the base pass's, bit for bit (a spec-stream codec gives one key the same mask in every mode),
    // has the base pass's scan: it is not computed again (its lags still count in the Bonferroni split,
    // which is fixed by the sizes alone).
    const bool same_as_base = !large && pi > 0 && std::equal(P.streams.begin(), P.streams.end(), streams.begin(), streams.end(),
                                                             [](const ProbeStream& a, const ProbeStream& b) { return a.bits == b.bits; });
    const LagScan ls = same_as_base ? base_lag : lag_scan(P.streams);
    if (pi == 0) base_lag = ls;
    lag_tests += static_cast<double>(scanned_lags(gp.size()));
    keep_worst(ls, name);
    if (ls.lag && (smallest_n == 0.0 || ls.n_min < smallest_n)) smallest_n = ls.n_min;
    const double places = static_cast<double>(P.streams.size()) * static_cast<double>(gp.size());
    scan_bound += 2.0 * places * places * std::ldexp(1.0, -static_cast<int>(min_run));
    if (P.repeats && repeats == 0) first = "clip " + name + ": " + P.first;
    longest_run = std::max(longest_run, P.longest);
    repeats += P.repeats, windows += P.windows, stopped |= P.stopped;
    if (pi == 0) streams = std::move(P.streams);
  }
  // The small pass (base mode): the probe at each of kSmallProbeSizes, the profile's draws each, under
  // keys (S, worker 0, tensor 2 + i, steps 0 ..), lag-scanned together. Its kept fraction must be 1/2 +- 0.05
  // as the other passes' (Hoeffding, added to the lag row's bound), or the scan is not judged.
  {
    std::vector<ProbeStream> small;
    double kept = 0.0, bits = 0.0;
    const std::uint32_t steps = c.opt.profile.steps;
    for (std::size_t i = 0; i < std::size(kSmallProbeSizes); ++i) {
      const std::size_t n = kSmallProbeSizes[i];
      const std::vector<float> gs = probe_gradient(n);
      const std::uint32_t chunk = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(c.sampler.max_request_elements() / n, 1, steps));
      for (std::uint32_t j0 = 0; j0 < steps; j0 += chunk) {
        const std::uint32_t cnt = std::min(chunk, steps - j0);
        const StreamKey key{stream_seed, 0, static_cast<std::uint32_t>(2 + i), j0};
        Draws dr = c.sampler.draw({gs, params, key, cnt, std::nullopt});
        for (std::uint32_t j = 0; j < cnt; ++j) {
          small.push_back(mask_stream(dr.row(j), {stream_seed, 0, key.tensor, j0 + j}));
          kept += static_cast<double>(kept_after_first(small.back())), bits += static_cast<double>(n - 1);
        }
        c.progress.add(static_cast<double>(cnt) * n, "collision");
      }
    }
    small_coin_bound = 2.0 * std::exp(-2.0 * bits * 0.05 * 0.05);
    small_fraction = bits > 0 ? kept / bits : 0.5;
    lag_tests += static_cast<double>(scanned_lags_whole(kSmallProbeSizes[std::size(kSmallProbeSizes) - 1]));
    if (std::fabs(small_fraction - 0.5) <= 0.05) {
      const LagScan ls = lag_scan(small, scanned_lags_whole);
      keep_worst(ls, small_pass_name());
    }
  }

  // The long probe: H steps of key (S, worker 0, tensor 0) on the first m elements, steps 0 .. H/2-1 and
  // kLongProbeBlocks blocks of H/(2 kLongProbeBlocks) consecutive steps spread over the rest of the 32-bit
  // step range (long_probe_blocks). A key that reuses that stream H/2 or fewer steps later (additive keys
  // with a multiplier, step + 1001 worker: worker 1 at step 0 is worker 0 at step 1001) shows as a probe row
  // above equal to one of these rows. Each row is indexed by its mask bits 64..127 (bit 0 is the scalar's
  // element); a finding needs bits 64..m-1 equal (or complemented). The rows are also compared with each
  // other: two steps of one key that share a stream (a generator seeded from a 32- or 24-bit hash of the
  // key, a step hashed to 16 bits) show as two equal rows. With H = 2^18 rows (ci, full), a 32-bit seed
  // space gives a pair with probability 1 - exp(-H^2 / 2^33) = 0.9997. The spread blocks add the steps'
  // differences that a step map of period P (a step reduced modulo a prime P) needs. Two blocks of lengths
  // a and b hold two steps congruent modulo P when their offsets' difference modulo P falls in a window of
  // a + b - 1, so over the seed's offsets such a map is found with probability about
  // 1 - exp(-sum over pairs of blocks (a + b - 1) / P), the first run counted as a block: at ci
  // (first run 2^17, 32 blocks of 4096) the sum is 8.4 x 10^6 / P, so 0.9998 for P near 10^6 and 0.57
  // near 10^7; every P up to H/2 has pairs inside the first run.
  const std::size_t m = std::min<std::size_t>(d, kLongProbeElements);
  const std::uint32_t H = long_probe_steps(c.opt.profile, d);
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> blocks =
      H ? long_probe_blocks(H, stream_seed) : std::vector<std::pair<std::uint32_t, std::uint32_t>>{};
  // The id ladders (id_ladder): tensor ids under worker 0 and worker ids under tensor 0, at step 0, one row
  // each beside the long probe's, so that an id reduced modulo any P <= B^2 shows as two equal rows.
  const std::uint32_t B = id_ladder_base(c.opt.profile, d);
  const std::vector<std::uint32_t> ladder = id_ladder(B);
  const std::size_t R = static_cast<std::size_t>(H) + 2 * ladder.size();  // rows in all
  std::uint64_t long_findings = 0;
  // Neighbouring ids of a ladder whose rows are equal (bits 64..m - 1), for the tensor and the worker ladder: no
  // period above 1 maps two neighbours to one stream, so where they share one the id is left out of the key.
  std::array<std::uint32_t, 2> equal_neighbours{0, 0}, first_neighbour{0, 0};
  if (H) {
    const std::vector<float> gl(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(m));
    const std::size_t words = (m + 63) / 64 + 1;
    std::vector<std::uint64_t> rows(R * words, 0);
    std::vector<StreamKey> key_of(R);
    std::size_t at = 0;  // rows filled
    auto take = [&](const Draws& dr, std::uint32_t j, const StreamKey& key) {
      auto row = dr.row(j);
      key_of[at] = key;
      std::uint64_t* b = rows.data() + at * words;
      for (std::size_t k = 0; k < m; ++k)
        if (row[k] != 0) b[k / 64] |= std::uint64_t{1} << (k % 64);
      ++at;
    };
    const std::uint32_t chunk = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(c.sampler.max_request_elements() / m, 1, H));
    for (const auto& [first_step, count] : blocks)
      for (std::uint32_t j0 = 0; j0 < count; j0 += chunk) {
        const std::uint32_t cnt = std::min(chunk, count - j0);
        Draws dr = c.sampler.draw({gl, params, {stream_seed, 0, 0, first_step + j0}, cnt, std::nullopt});
        for (std::uint32_t j = 0; j < cnt; ++j) take(dr, j, {stream_seed, 0, 0, first_step + j0 + j});
        c.progress.add(static_cast<double>(cnt) * m, "collision");
      }
    for (int field = 0; field < 2; ++field)
      for (std::uint32_t id : ladder) {
        const StreamKey key{stream_seed, field ? id : 0u, field ? 0u : id, 0};
        Draws dr = c.sampler.draw({gl, params, key, 1, std::nullopt});
        take(dr, 0, key);
        c.progress.add(static_cast<double>(m), "collision");
      }
    for (std::size_t field = 0; field < 2; ++field)
      for (std::size_t i = 0; i + 1 < ladder.size(); ++i) {
        if (ladder[i + 1] != ladder[i] + 1) continue;
        const std::size_t a = H + field * ladder.size() + i;
        if (agree_from_64(rows.data() + a * words, rows.data() + (a + 1) * words, m, 0) && equal_neighbours[field]++ == 0)
          first_neighbour[field] = ladder[i];
      }
    std::unordered_multimap<std::uint64_t, std::uint32_t> by_window;
    for (std::size_t j = 0; j < R; ++j) by_window.emplace(rows[j * words + 1], static_cast<std::uint32_t>(j));
    auto probed = [&](const StreamKey& k) {  // a key the long probe or a ladder drew itself
      if (k.seed != stream_seed) return false;
      if (k.worker == 0 && k.tensor == 0)
        for (const auto& [first_step, count] : blocks)
          if (k.step >= first_step && k.step - first_step < count) return true;
      if (k.step != 0 || (k.worker != 0 && k.tensor != 0)) return false;
      return std::binary_search(ladder.begin(), ladder.end(), k.worker | k.tensor);
    };
    // Under H0 two rows agree on bits 64..127 with probability 2^-64, so the comparisons stop, as the scan's do,
    // after kMaxRepeats findings or kMaxCompares rows that agree there: a stream reused at every step (all H
    // rows equal) would otherwise cost R^2 / 2 comparisons of m bits (hours at ci), for a verdict already made.
    std::uint64_t long_compares = 0;
    auto long_budget_left = [&] {
      if (long_findings < kMaxRepeats && long_compares < kMaxCompares) return true;
      stopped = true;
      return false;
    };
    for (const auto& ps : streams) {
      // The probe rows of the long probe's own key at steps it did not draw (65,535.., 2^31 - 1, 2^32 - 2,
      // the powers of ten) are compared too: a step map of period P meets them there.
      if (!long_budget_left()) break;
      if (probed(ps.key)) continue;
      for (int flip = 0; flip < 2; ++flip) {
        const std::uint64_t mask = flip ? ~std::uint64_t{0} : 0;
        auto range = by_window.equal_range(ps.bits[1] ^ mask);
        for (auto it = range.first; it != range.second && long_budget_left(); ++it) {
          ++long_compares;
          const std::uint64_t* b = rows.data() + static_cast<std::size_t>(it->second) * words;
          if (!agree_from_64(ps.bits.data(), b, m, flip)) continue;
          if (long_findings++ == 0 && repeats == 0) {
            const StreamKey& at_key = key_of[it->second];
            const bool later = at_key.step > ps.key.step;  // a step row of the long probe
            first = strf("mask bits 64..%zu of %s %s those of %s: ", m - 1, ps.name().c_str(),
                         flip ? "are the complement of" : "equal", key_text(at_key).c_str()) +
                    (later ? strf("a key %u steps later reuses its stream", at_key.step - ps.key.step)
                           : "two keys share one stream" + id_map_hint(ps.key, at_key));
          }
        }
      }
    }
    // The rows against each other: each unordered pair once (equal), or once per order (complemented).
    for (std::size_t j = 0; j < R && long_budget_left(); ++j) {
      const std::uint64_t* a = rows.data() + j * words;
      for (int flip = 0; flip < 2; ++flip) {
        const std::uint64_t mask = flip ? ~std::uint64_t{0} : 0;
        auto range = by_window.equal_range(a[1] ^ mask);
        for (auto it = range.first; it != range.second && long_budget_left(); ++it) {
          if (it->second == j || (!flip && it->second < j)) continue;
          ++long_compares;
          const std::uint64_t* b = rows.data() + static_cast<std::size_t>(it->second) * words;
          if (!agree_from_64(a, b, m, flip)) continue;
          longest_run = std::max(longest_run, m - 64);
          if (long_findings++ == 0 && repeats == 0) {
            const StreamKey &x = key_of[j], &y = key_of[it->second];
            const char* how = flip ? "are complements" : "are equal";
            if (x.worker == y.worker && x.tensor == y.tensor)
              first = strf("mask bits 64..%zu of steps %u and %u of (seed %#llx, worker %u, tensor %u) %s: two steps of one "
                           "key share a stream (a generator seeded from a short hash of the key?%s)",
                           m - 1, std::min(x.step, y.step), std::max(x.step, y.step),
                           static_cast<unsigned long long>(stream_seed), x.worker, x.tensor, how,
                           power_of_two_note(std::max(x.step, y.step) - std::min(x.step, y.step), "a step").c_str());
            else
              first = strf("mask bits 64..%zu of %s and %s %s: two keys share one stream", m - 1, key_text(x).c_str(),
                           key_text(y).c_str(), how) +
                      id_map_hint(x, y);
          }
        }
      }
    }
    repeats += long_findings;
  }
  // The scan's bound (above), the coin tallies' and the long probe's, which compares each probe row with each of its
  // R rows (H steps and the id ladders), and its rows with each other (R^2 / 2 pairs, both ways), on m - 64 fair bits.
  const double Rd = static_cast<double>(R);
  const double bound = scan_bound + coin_bound +
                       (H ? (2.0 * static_cast<double>(streams.size()) * Rd + Rd * Rd) * std::ldexp(1.0, -static_cast<int>(m - 64))
                          : 0.0);
  // The lag scan's decision: Bonferroni over every lag of every pass, Hoeffding for each. Its share: the small
  // pass's coin bound, then Hoeffding at each lag (Bonferroni over the lags).
  const double tests = std::max(1.0, lag_tests);
  const double share = std::max(c.alpha - small_coin_bound, c.alpha / 2);
  const double t = std::sqrt(2.0 * std::log(2.0 * tests / share));
  const double zabs = std::fabs(worst_lag.z);
  const bool small_fair = std::fabs(small_fraction - 0.5) <= 0.05;
  Row r = stat_row(c, "collision", "p=1/2 probe");
  if (stopped && repeats == 0) {
    repeats = 1;
    first = strf("the masks are far from fair coins: more than %llu windows of 64 bits repeat (runs shorter than %zu bits)",
                 static_cast<unsigned long long>(kMaxCompares), min_run);
  }
  r.statistic = strf("%s%llu repeated runs", stopped ? ">= " : "", static_cast<unsigned long long>(repeats));
  r.threshold = strf("0 runs of >= %zu bits", min_run);
  r.p = repeats ? bound : 1.0;
  r.pvalue = repeats ? strf("p <= %.2g", bound) : "p = 1 (no repeat)";
  r.power = strf("any reuse of >= %zu mask bits, as they are or complemented", min_run);
  r.pass = repeats == 0;
  // Mask bits correlated at a short lag (bits that come in equal pairs hold half the randomness) repeat by chance
  // over runs this long: the lag row names that, and a repeat may be no reused stream. Said only where every repeat
  // is shorter than twice the threshold and the lag is short (at most 16: neighbouring elements), which a reuse
  // is not: a stream reused whole, or runs of uniforms reused at an offset (the lag is the offset, 72 or more for a
  // run the scan finds), also fail the lag row, through their copies.
  const std::string lag_note =
      repeats && longest_run < 2 * min_run && small_fair && worst_lag.lag && worst_lag.lag <= 16 && zabs > t &&
              first.find(kUnfairLead) == std::string::npos
          ? strf("; but the masks' bits are correlated at lag %zu (z = %+.2f, the lag row below): bits that are not "
                 "independent repeat by chance over runs this long, so the repeat may come from that correlation (the "
                 "same uniform for neighbouring elements?) rather than from a reused stream",
                 worst_lag.lag, worst_lag.z)
          : "";
  // A named pair of ids read as a period ("an id reduced modulo a divisor of 999?") where the id ladders show
  // neighbouring ids sharing a stream, which no period above 1 does: the id left out of the key instead.
  for (std::size_t field = 0; field < 2; ++field) {
    const char* what = field ? "worker" : "tensor";
    const std::size_t at = first.find(strf("(%s ids ", what));
    const std::size_t guess = at == std::string::npos ? at : first.find(": an id reduced modulo a divisor of ", at);
    const std::size_t close = guess == std::string::npos ? guess : first.find(')', guess);
    if (equal_neighbours[field] == 0 || close == std::string::npos) continue;
    first.replace(guess, close - guess,
                  strf(": in the id ladder, %u pairs of neighbouring %s ids share a stream too (%u and %u the first), which no "
                       "period above 1 does: the %s id left out of the key (for these ids)?",
                       equal_neighbours[field], what, first_neighbour[field], first_neighbour[field] + 1, what));
  }
  const char* lead = first.find(kUnfairLead) == std::string::npos && lag_note.empty() ? "streams reused: " : "mask bits repeat: ";
  r.detail = repeats ? lead + first + lag_note + (repeats > 1 ? strf(" (and %llu more)", static_cast<unsigned long long>(repeats - 1)) : "")
                     : strf("%zu streams of %zu mask bits (%zu keys: steps 0..3 x workers 0..3 x tensors 0..1, steps "
                            "near 2^16, 2^31 and 2^32, workers and tensors up to 2^32-1, powers of ten from 10 to 10^9 as "
                            "steps, tensors and workers, seeds differing in the high word) in each of %zu passes, and %s (clip %s), each pass scanned on its own; %llu windows at every "
                            "offset; %s; false-fail probability <= %.2g",
                            streams.size(), d, keys.size(), passes.size(), large_text.c_str(), pass_names.c_str(),
                            static_cast<unsigned long long>(windows),
                            H ? strf("each of them against steps 0..%u of (worker 0, tensor 0) and %u blocks of %u steps "
                                     "spread up to 2^32, and tensor and worker ids 1..%u and multiples of %u up to %u at "
                                     "step 0, on %zu elements, and all those against each other (a key that reuses that "
                                     "stream up to %u steps later; two steps that share one; a step map periodic modulo up "
                                     "to about 10^6 at ci; a tensor or worker id reduced modulo any number up to %u)",
                                     blocks[0].second - 1, kLongProbeBlocks, H / 2 / kLongProbeBlocks, B - 1, B, B * B, m,
                                     blocks[0].second - 1, B * B).c_str()
                              : "no long probe (fewer than 192 elements)",
                            bound);
  c.rows.push_back(r);

  // The lag scan's decision (the row after this one).
  Row lag = stat_row(c, "collision", "p=1/2 probe", "every lag");
  const double t_beta = std::sqrt(2.0 * std::log(1.0 / c.opt.profile.beta));
  const std::size_t lags = scanned_lags(d);
  lag.statistic = !small_fair     ? strf("small pass kept fraction %.4f", small_fraction)
                  : worst_lag.lag ? strf("largest |z| %.2f (lag %zu, %s)", zabs, worst_lag.lag,
                                         worst_lag.z >= 0 ? "pairs agree" : "pairs disagree")
                                  : "no lag (fewer than 3 elements)";
  lag.threshold = small_fair ? strf("|z| <= %.2f", t) : "1/2 +- 0.05";
  lag.p = (small_fair ? tests * 2.0 * std::exp(-zabs * zabs / 2.0) : 0.0) + small_coin_bound;
  lag.pvalue = bound_text(lag.p);
  lag.pass = small_fair && zabs <= t;
  lag.effect = worst_lag.n > 0 ? worst_lag.z / std::sqrt(worst_lag.n) : 0.0;
  lag.limit = smallest_n > 0 ? t / std::sqrt(smallest_n) : 0.0;
  lag.detectable = smallest_n > 0 ? (t + t_beta) / std::sqrt(smallest_n) : 1.0;
  lag.power = strf("correlation >= %.3g at any lag 1..%zu", lag.detectable, lags);
  lag.detail = small_fair
                   ? strf("keep masks of the probe streams (element 0 left out): for each lag L = 1..%zu of each pass, and "
                          "1..n - 2 of each size n of the %s pass (%u draws of each size), the sum of (2b_k - 1)(2b_{k+L} - 1) over streams "
                          "and k, independent +-1 terms under H0 (Hoeffding; %.0f lags in all, Bonferroni); the most "
                          "extreme: lag %zu in pass %s (z = %.2f); false-fail probability <= %.2g",
                          lags, small_pass_name().c_str(), c.opt.profile.steps, tests, worst_lag.lag,
                          worst_lag_pass.c_str(), worst_lag.z, c.alpha)
                   : strf("the probe at small sizes (%s pass) was kept in a fraction %.4f: the keep rule or the scalar "
                          "differs from the spec's there (a remainder loop?), so the lag scan cannot be judged",
                          small_pass_name().c_str(), small_fraction);
  mark_rejected(lag);
  // A lag that only one size of the small pass reaches, within 64 of its length: the last elements repeat the first
  // (a remainder loop that restarts the stream), said with the size and the remainder.
  if (!lag.pass && small_fair && worst_lag_pass == small_pass_name() && worst_lag.lag) {
    std::size_t reach = 0, size = 0;
    for (std::size_t n : kSmallProbeSizes)
      if (scanned_lags_whole(n) >= worst_lag.lag) ++reach, size = n;
    const std::size_t r = size - worst_lag.lag;
    if (reach == 1 && r >= 1 && r < 64) {
      std::string block;
      for (std::size_t w = 2048; w >= 2 && block.empty(); w /= 2)
        if (size % w == r) block = strf(" (%zu mod %zu: the remainder after blocks of %zu)", size, w, w);
      lag.detail += strf("; lag %zu is reached only in the %zu-element tensors: their last %zu elements%s %s their first "
                         "%zu, a remainder loop that restarts the stream (the uniforms of elements 0..%zu)?",
                         worst_lag.lag, size, r, block.c_str(), worst_lag.z >= 0 ? "agree with" : "are complemented in",
                         r, r - 1);
    }
  }
  c.rows.push_back(lag);
}

}  // namespace tg::verify::checks

namespace tg::verify {

std::size_t collision_run(double pairs, double alpha) {
  std::size_t run = checks::kMinRun;
  while (run < 4096 && pairs * std::ldexp(1.0, -static_cast<int>(run)) > alpha / 2) ++run;
  return run;
}

std::uint32_t id_ladder_base(const Profile& p, std::size_t d) {
  if (checks::long_probe_steps(p, d) == 0) return 0;
  return std::clamp<std::uint32_t>(p.steps / 8, 32, 256);
}

std::vector<std::uint32_t> id_ladder(std::uint32_t B) {
  std::vector<std::uint32_t> ids;
  for (std::uint32_t i = 1; i < B; ++i) ids.push_back(i);
  for (std::uint32_t j = 1; j <= B; ++j) ids.push_back(j * B);
  return ids;
}

std::vector<std::pair<std::uint32_t, std::uint32_t>> long_probe_blocks(std::uint32_t H, std::uint64_t stream_seed) {
  const std::uint32_t half = H / 2, block = half / kLongProbeBlocks;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> out = {{0, H - block * kLongProbeBlocks}};
  if (block == 0) return {{0, H}};
  // Slot i of the steps from H - block kLongProbeBlocks to 2^32 holds block i at an offset drawn from the
  // stream seed (mix64), so the blocks are disjoint and never meet the first run.
  const std::uint64_t from = out[0].second, slot = ((std::uint64_t{1} << 32) - from) / kLongProbeBlocks;
  for (std::uint32_t i = 0; i < kLongProbeBlocks; ++i) {
    const std::uint64_t u = mix64(mix64(stream_seed ^ 0x6c6f6e6770726f62ull) + i);
    out.push_back({static_cast<std::uint32_t>(from + i * slot + u % (slot - block + 1)), block});
  }
  return out;
}

}  // namespace tg::verify
