// terngrad-bench: the integrity envelope of a training checkpoint (no LibTorch here). A checkpoint
// file is the LibTorch archive (a zip), then the residual section (EF-SignSGD runs only; empty
// otherwise), then a text manifest, then a 32-byte footer:
//   archive | residuals | manifest | "TGCKPT01" | u64 manifest bytes | u64 archive bytes | u32 CRC32C | u32 0
// (little-endian). The manifest holds the format version, the run fingerprint (model, data, codec and
// every setting that must match), the step, every tensor's name and shape, and with residuals one line
// "residuals WORKERS TENSORS BYTES"; one "key value" line each. The residual section is, for every
// worker in order and every tensor in order: u64 element count, then that many float32 values (the
// error-feedback residual e of that worker and tensor, bit for bit). The CRC32C (tg::crc32c) covers
// archive, residuals and manifest. open_checkpoint checks all of it before one weight is read: a
// flipped byte anywhere, a truncated or foreign file, another run's or another model's checkpoint, a
// residual section of the wrong shape or one missing where the run needs it is refused with one line
// naming what differs. Format 1 files (written before the residual section existed) still read.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tg::train {

inline constexpr int kCheckpointFormat = 2;  // 2: the residual section; format 1 files still read
/// The largest checkpoint read (a file claiming more is refused before it is read).
inline constexpr std::uint64_t kCheckpointMaxBytes = std::uint64_t{8} << 30;

/// Error-feedback residuals of every worker: residuals[worker][tensor], each of the tensor's size.
using Residuals = std::vector<std::vector<std::vector<float>>>;

struct CheckpointManifest {
  std::string fingerprint;
  long step = 0;
  std::vector<std::pair<std::string, std::string>> tensors;  // name, shape as "[a, b]"
  /// The residual section's shape: residual_workers workers, each with one residual per entry of
  /// residual_numel (that many elements). 0 workers: the run keeps no residuals (every codec but
  /// EF-SignSGD), and the file must hold none.
  std::size_t residual_workers = 0;
  std::vector<std::size_t> residual_numel;
};

/// The bytes to write: archive + residual section + manifest + footer. `residuals` must have the
/// manifest's residual shape (std::logic_error otherwise); nullptr when residual_workers is 0.
// Which settings differ between a checkpoint's run fingerprint (got) and this run's (want), named as the
// options that set them: "--model is lenet in the checkpoint, cifarnet in this run; --lr is ...".
std::string fingerprint_difference(const std::string& got, const std::string& want);

std::string seal_checkpoint(const std::string& archive, const CheckpointManifest& m, const Residuals* residuals = nullptr);

/// Reads `path` (a regular file only, at most kCheckpointMaxBytes), verifies footer and CRC32C, and
/// compares the manifest with `expect` (fingerprint, tensors and residual shape; the step is returned
/// in `*step`, the residuals, when expect.residual_workers > 0, in `*residuals`). Returns the archive
/// bytes. Throws std::invalid_argument naming the path and what differs.
std::string open_checkpoint(const std::string& path, const CheckpointManifest& expect, long* step,
                            Residuals* residuals = nullptr);

}  // namespace tg::train
