// terngrad-bench: the integrity envelope of a training checkpoint (no LibTorch here). A checkpoint
// file is the LibTorch archive (a zip), then a text manifest, then a 32-byte footer:
//   archive | manifest | "TGCKPT01" | u64 manifest bytes | u64 archive bytes | u32 CRC32C | u32 0
// (little-endian). The manifest holds the format version, the run fingerprint (model, data, codec and
// every setting that must match), the step, and every tensor's name and shape, one "key value" line
// each. The CRC32C (tg::crc32c) covers archive and manifest. open_checkpoint checks all of it before
// one weight is read: a flipped byte anywhere, a truncated or foreign file, another run's or another
// model's checkpoint is refused with one line naming what differs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tg::train {

inline constexpr int kCheckpointFormat = 1;
/// The largest checkpoint read (a file claiming more is refused before it is read).
inline constexpr std::uint64_t kCheckpointMaxBytes = std::uint64_t{8} << 30;

struct CheckpointManifest {
  std::string fingerprint;
  long step = 0;
  std::vector<std::pair<std::string, std::string>> tensors;  // name, shape as "[a, b]"
};

/// The bytes to write: archive + manifest + footer.
std::string seal_checkpoint(const std::string& archive, const CheckpointManifest& m);

/// Reads `path` (a regular file only, at most kCheckpointMaxBytes), verifies footer and CRC32C, and
/// compares the manifest with `expect` (fingerprint and tensors; the step is returned in `*step`).
/// Returns the archive bytes. Throws std::invalid_argument naming the path and what differs.
std::string open_checkpoint(const std::string& path, const CheckpointManifest& expect, long* step);

}  // namespace tg::train
