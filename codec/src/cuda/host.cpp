// terngrad-bench: host side of the CUDA codec: device detection, the tg::Codec wrapper (host spans in,
// copies to the device, kernels, copies back, errors as the reference throws them) and the host
// conveniences of tg/cuda.hpp. Compiled by the C++ compiler against the CUDA runtime.
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "dispatch.hpp"

namespace tg::cuda {

using detail::check;

bool device_available(std::string* why) {
  auto say = [&](const std::string& text) {
    if (why) *why = text;
    return false;
  };
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it so later calls do not see it
    return say(std::string("no usable CUDA driver or device: ") + cudaGetErrorName(err) + ": " +
               cudaGetErrorString(err));
  }
  if (count == 0) return say("no CUDA device present");
  int device = 0, major = 0, minor = 0;
  err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return say(std::string("cannot query the CUDA device: ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
  }
  // Whether this build has code for the device, asked of the runtime rather than assumed from a list.
  std::string missing = detail::missing_kernel_image();
  if (!missing.empty())
    return say("CUDA device " + std::to_string(device) + " has compute capability " + std::to_string(major) + "." +
               std::to_string(minor) + ", for which this build holds no kernel code (" + missing +
               "); rebuild with CMAKE_CUDA_ARCHITECTURES including it");
  if (why) why->clear();
  return true;
}

namespace {

// Device memory released on the codec's stream (stream-ordered allocator: no device-wide sync).
class DeviceBuffer {
 public:
  DeviceBuffer(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
    check(cudaMallocAsync(&ptr_, bytes < 256 ? 256 : bytes, stream), "cudaMallocAsync");
  }
  ~DeviceBuffer() { cudaFreeAsync(ptr_, stream_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

void upload(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync to device");
}
void download(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync to host");
}

[[noreturn]] void throw_invalid_code(Packing packing, std::span<const std::uint8_t> body, std::uint64_t j) {
  throw Error(ErrorCode::invalid_code, std::string("invalid ") + to_string(packing) + " body: byte " +
                                           std::to_string(j) + " holds " + std::to_string(body[j]));
}

void check_body_size(Packing packing, std::size_t body, std::size_t n) {
  if (body != body_bytes(packing, n))
    throw Error(ErrorCode::invalid_argument, "CUDA codec: body of " + std::to_string(body) + " bytes for " +
                                                 std::to_string(n) + " elements (expected " +
                                                 std::to_string(body_bytes(packing, n)) + ")");
}

class Stream {
 public:
  Stream() { check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void sync() const { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t stream_ = nullptr;
};

void require_device() {
  std::string why;
  if (!device_available(&why)) throw CudaError("CUDA codec unavailable: " + why, 0);
}

// The version index, after checking that a device is usable (before the stream is created, so the
// error names the reason rather than a failed stream creation).
int usable_version(const std::string& version) {
  int index = detail::version_index(version);
  require_device();
  return index;
}

class CudaCodec final : public Codec {
 public:
  explicit CudaCodec(const std::string& version) : version_(usable_version(version)) {}

  std::string name() const override { return "cuda-" + kernel_versions()[version_]; }

  float max_abs(std::span<const float> g, std::uint32_t tensor) const override {
    TensorResult r = scalar_pass(g, Params{});
    if (r.first_bad != kNone) throw NonFiniteError(tensor, r.first_bad, g[r.first_bad]);
    float m;
    std::memcpy(&m, &r.scalar, 4);
    return m;
  }

  Moments moments(std::span<const float> g) const override {
    Params p;
    p.clip = ClipMode::clip;
    TensorResult r = scalar_pass(g, p);
    return Moments{r.mean, r.sigma};
  }

  void ternarize(std::span<const float> g, const ScalarRule& rule, const StreamKey& key,
                 std::span<std::int8_t> trits) const override {
    if (trits.size() != g.size())
      throw Error(ErrorCode::invalid_argument, "CUDA ternarize: trit buffer size differs from the gradient's");
    cudaStream_t s = stream_.get();
    DeviceBuffer dg(4 * g.size(), s), dt(trits.size(), s);
    upload(dg.as<void>(), g.data(), 4 * g.size(), s);
    cuda::ternarize(dg.as<float>(), g.size(), rule, key, dt.as<std::int8_t>(), s);
    download(trits.data(), dt.as<void>(), trits.size(), s);
    stream_.sync();
  }

  void encode_body(std::span<const float> g, const ScalarRule& rule, const StreamKey& key, Packing packing,
                   std::span<std::uint8_t> body) const override {
    check_body_size(packing, body.size(), g.size());
    cudaStream_t s = stream_.get();
    DeviceBuffer dg(4 * g.size(), s), db(body.size(), s);
    upload(dg.as<void>(), g.data(), 4 * g.size(), s);
    detail::EncodeRun run;
    run.single = DeviceTensor{dg.as<float>(), g.size(), db.as<std::uint8_t>(), key.tensor, 0};
    run.total_elements = g.size();
    run.params.packing = packing;
    run.key = key;
    run.has_rule = true;
    run.rule = rule;
    run.version = version_;
    std::size_t wsb = encode_workspace_bytes(1, g.size());
    DeviceBuffer ws(wsb, s);
    detail::run_encode(ws.as<void>(), wsb, run, nullptr, s);
    download(body.data(), db.as<void>(), body.size(), s);
    stream_.sync();
  }

  // The fused pipeline (as encode_payload): g goes to the device once, instead of once for max_abs,
  // once for moments and once for encode_body through the default.
  ScalarRule encode_tensor(std::span<const float> g, const Params& params, const StreamKey& key,
                           const float* shared_scalar, std::span<std::uint8_t> body) const override {
    check_body_size(params.packing, body.size(), g.size());
    cudaStream_t s = stream_.get();
    std::size_t wsb = encode_workspace_bytes(1, g.size());
    DeviceBuffer dg(4 * g.size(), s), db(body.size(), s), dr(sizeof(TensorResult), s), dscalar(4, s), ws(wsb, s);
    upload(dg.as<void>(), g.data(), 4 * g.size(), s);
    if (shared_scalar) upload(dscalar.as<void>(), shared_scalar, 4, s);
    cuda::encode(ws.as<void>(), wsb, dg.as<float>(), g.size(), params, key, db.as<std::uint8_t>(),
                 dr.as<TensorResult>(), s, shared_scalar ? dscalar.as<float>() : nullptr, kernel_versions()[version_]);
    TensorResult r;
    download(&r, dr.as<void>(), sizeof r, s);
    download(body.data(), db.as<void>(), body.size(), s);
    stream_.sync();
    if (r.first_bad != kNone) throw NonFiniteError(key.tensor, r.first_bad, g[r.first_bad]);
    return shared_scalar ? make_rule(*shared_scalar, r.bound) : make_rule(r.scalar, r.scalar);
  }

  void unpack(Packing packing, std::span<const std::uint8_t> body, std::span<std::int8_t> trits) const override {
    check_body_size(packing, body.size(), trits.size());
    cudaStream_t s = stream_.get();
    DeviceBuffer db(body.size(), s), dt(trits.size(), s), bad(8, s);
    upload(db.as<void>(), body.data(), body.size(), s);
    cuda::unpack(packing, db.as<std::uint8_t>(), trits.size(), dt.as<std::int8_t>(), bad.as<std::uint64_t>(), s);
    std::uint64_t first_bad = kNone;
    download(&first_bad, bad.as<void>(), 8, s);
    download(trits.data(), dt.as<void>(), trits.size(), s);
    stream_.sync();
    if (first_bad != kNone) throw_invalid_code(packing, body, first_bad);
  }

  void decode_body(Packing packing, std::span<const std::uint8_t> body, float scalar,
                   std::span<float> out) const override {
    check_body_size(packing, body.size(), out.size());
    cudaStream_t s = stream_.get();
    DeviceBuffer db(body.size(), s), dout(4 * out.size(), s), bad(8, s);
    upload(db.as<void>(), body.data(), body.size(), s);
    decode(packing, db.as<std::uint8_t>(), out.size(), scalar, dout.as<float>(), bad.as<std::uint64_t>(), s,
           kernel_versions()[version_]);
    std::uint64_t first_bad = kNone;
    download(&first_bad, bad.as<void>(), 8, s);
    stream_.sync();
    if (first_bad != kNone) throw_invalid_code(packing, body, first_bad);
    download(out.data(), dout.as<void>(), 4 * out.size(), s);
    stream_.sync();
  }

 private:
  // max|g| (+ mean, sigma when params clip) of one host tensor.
  TensorResult scalar_pass(std::span<const float> g, const Params& params) const {
    cudaStream_t s = stream_.get();
    DeviceBuffer dg(4 * g.size(), s), dr(sizeof(TensorResult), s);
    upload(dg.as<void>(), g.data(), 4 * g.size(), s);
    detail::EncodeRun run;
    run.single = DeviceTensor{dg.as<float>(), g.size(), nullptr, 0, 0};
    run.total_elements = g.size();
    run.params = params;
    run.last = detail::Step::rule;
    run.version = version_;
    std::size_t wsb = encode_workspace_bytes(1, g.size());
    DeviceBuffer ws(wsb, s);
    detail::run_encode(ws.as<void>(), wsb, run, dr.as<TensorResult>(), s);
    TensorResult r;
    download(&r, dr.as<void>(), sizeof r, s);
    stream_.sync();
    return r;
  }

  int version_;
  Stream stream_;
};

}  // namespace

std::unique_ptr<Codec> make_codec() { return std::make_unique<CudaCodec>(""); }
std::unique_ptr<Codec> make_codec(const std::string& version) { return std::make_unique<CudaCodec>(version); }

std::vector<CodecEntry> cuda_codecs() {
  std::vector<CodecEntry> table;
  for (const auto& v : kernel_versions()) {
    std::shared_ptr<const Codec> c = make_codec(v);
    table.push_back({c->name(), c});
  }
  return table;
}

// ---- host conveniences ---------------------------------------------------------------------------

namespace {
std::vector<std::uint8_t> payload_of(const Params& params, std::uint64_t n, const TensorResult& r, std::uint32_t tensor,
                                     std::vector<std::uint8_t> out) {
  std::span<const std::uint8_t> body(out.data() + kHeaderBytes, out.size() - kHeaderBytes);
  Header h{params.packing, n, r.scalar, tensor, crc32c(body)};
  write_header(h, out);
  return out;
}
}  // namespace

std::vector<std::uint8_t> encode_payload(std::span<const float> g, const Params& params, const StreamKey& key,
                                         const std::string& version) {
  validate(params);
  if (g.size() < params.float_below) return tg::encode(*make_codec(version), g, params, key);
  std::uint64_t nbody = body_bytes(params.packing, g.size());  // length_overflow past 2^34
  require_device();
  Stream stream;
  cudaStream_t s = stream.get();
  std::size_t wsb = encode_workspace_bytes(1, g.size());
  DeviceBuffer dg(4 * g.size(), s), db(nbody, s), dr(sizeof(TensorResult), s), ws(wsb, s);
  upload(dg.as<void>(), g.data(), 4 * g.size(), s);
  encode(ws.as<void>(), wsb, dg.as<float>(), g.size(), params, key, db.as<std::uint8_t>(), dr.as<TensorResult>(), s,
         nullptr, version);
  TensorResult r;
  std::vector<std::uint8_t> out(kHeaderBytes + nbody);
  download(&r, dr.as<void>(), sizeof r, s);
  download(out.data() + kHeaderBytes, db.as<void>(), nbody, s);
  stream.sync();
  if (r.first_bad != kNone) throw NonFiniteError(key.tensor, r.first_bad, g[r.first_bad]);
  return payload_of(params, g.size(), r, key.tensor, std::move(out));
}

std::vector<std::vector<std::uint8_t>> encode_layers_payloads(const std::vector<std::span<const float>>& layers,
                                                              const Params& params, const StreamKey& key,
                                                              const std::string& version) {
  validate(params);
  std::vector<std::vector<std::uint8_t>> out(layers.size());
  require_device();
  Stream stream;
  cudaStream_t s = stream.get();
  // Tensors below the float threshold travel as float32 and are encoded one by one afterwards.
  std::vector<std::size_t> on_device;
  std::uint64_t total = 0, body_total = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].size() < params.float_below) continue;
    if (layers[i].size() > kMaxElements) body_bytes(params.packing, layers[i].size());  // throws length_overflow
    on_device.push_back(i);
    total += layers[i].size();
    body_total += body_bytes(params.packing, layers[i].size());
  }
  std::uint32_t count = static_cast<std::uint32_t>(on_device.size());
  std::size_t wsb = encode_workspace_bytes(count, total);
  DeviceBuffer dg(4 * total, s), db(body_total, s), dr(sizeof(TensorResult) * count, s),
      dt(sizeof(DeviceTensor) * count, s), ws(wsb, s);
  std::vector<DeviceTensor> table(count);
  std::vector<std::uint64_t> body_offset(count);
  std::uint64_t ge = 0, be = 0;
  for (std::uint32_t j = 0; j < count; ++j) {
    auto g = layers[on_device[j]];
    upload(dg.as<float>() + ge, g.data(), 4 * g.size(), s);
    table[j] = DeviceTensor{dg.as<float>() + ge, g.size(), db.as<std::uint8_t>() + be,
                            key.tensor + static_cast<std::uint32_t>(on_device[j]), 0};
    body_offset[j] = be;
    ge += g.size();
    be += body_bytes(params.packing, g.size());
  }
  upload(dt.as<void>(), table.data(), sizeof(DeviceTensor) * count, s);
  encode_layers(ws.as<void>(), wsb, dt.as<DeviceTensor>(), count, total, params, key, dr.as<TensorResult>(), s, version);
  std::vector<TensorResult> results(count);
  std::vector<std::uint8_t> bodies(body_total);
  download(results.data(), dr.as<void>(), sizeof(TensorResult) * count, s);
  download(bodies.data(), db.as<void>(), body_total, s);
  stream.sync();
  std::unique_ptr<Codec> codec;
  std::size_t j = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {  // errors in layer order, as tg::encode_layers
    StreamKey k = key;
    k.tensor = key.tensor + static_cast<std::uint32_t>(i);
    if (j < count && on_device[j] == i) {
      const TensorResult& r = results[j];
      if (r.first_bad != kNone) throw NonFiniteError(k.tensor, r.first_bad, layers[i][r.first_bad]);
      std::uint64_t nb = body_bytes(params.packing, layers[i].size());
      std::vector<std::uint8_t> p(kHeaderBytes + nb);
      if (nb) std::memcpy(p.data() + kHeaderBytes, bodies.data() + body_offset[j], nb);  // no null pointers
      out[i] = payload_of(params, layers[i].size(), r, k.tensor, std::move(p));
      ++j;
    } else {
      if (!codec) codec = make_codec(version);
      out[i] = tg::encode(*codec, layers[i], params, k);
    }
  }
  return out;
}

Aggregate aggregate_payloads(const std::vector<std::span<const std::uint8_t>>& payloads) {
  if (payloads.empty()) throw Error(ErrorCode::invalid_argument, "aggregate of zero payloads");
  Header first;
  bool mixed_packings = false;
  for (std::size_t w = 0; w < payloads.size(); ++w) {
    Header h = parse_header(payloads[w]);
    if (h.packing == Packing::float32) throw Error(ErrorCode::bad_packing, "payload carries float32 values, not trits");
    if (w == 0) {
      first = h;
    } else {
      require_aggregable(first, h, w);
    }
    if (h.packing != first.packing) mixed_packings = true;
  }
  // The kernel reads one packing; mixed 2bit/base3 payloads (legal) go through the codec's unpack.
  if (mixed_packings) return tg::aggregate(*make_codec(), payloads);
  require_device();
  Stream stream;
  cudaStream_t s = stream.get();
  std::uint64_t n = first.count, nb = body_bytes(first.packing, n);
  std::uint32_t workers = static_cast<std::uint32_t>(payloads.size());
  DeviceBuffer dbodies(nb * workers, s), dptrs(sizeof(void*) * workers, s), dsums(4 * n, s), dmean(4 * n, s), bad(8, s);
  std::vector<const std::uint8_t*> ptrs(workers);
  for (std::uint32_t w = 0; w < workers; ++w) {
    ptrs[w] = dbodies.as<std::uint8_t>() + w * nb;
    upload(dbodies.as<std::uint8_t>() + w * nb, payloads[w].data() + kHeaderBytes, nb, s);
  }
  upload(dptrs.as<void>(), ptrs.data(), sizeof(void*) * workers, s);
  aggregate(dptrs.as<const std::uint8_t*>(), workers, first.packing, n, first.scalar, dsums.as<std::int32_t>(),
            dmean.as<float>(), bad.as<std::uint64_t>(), s);
  Aggregate agg;
  agg.scalar = first.scalar;
  agg.workers = workers;
  agg.sums.resize(n);
  agg.mean.resize(n);
  std::uint64_t first_bad = kNone;
  download(&first_bad, bad.as<void>(), 8, s);
  download(agg.sums.data(), dsums.as<void>(), 4 * n, s);
  download(agg.mean.data(), dmean.as<void>(), 4 * n, s);
  stream.sync();
  if (first_bad != kNone) {
    std::uint64_t w = first_bad / nb, j = first_bad % nb;
    throw_invalid_code(first.packing, payloads[w].subspan(kHeaderBytes), j);
  }
  return agg;
}

}  // namespace tg::cuda
