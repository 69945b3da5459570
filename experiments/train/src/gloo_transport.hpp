// terngrad-bench: a Transport over c10d ProcessGroupGloo on TCP (private header, no LibTorch types).
#pragma once

#include <memory>
#include <string>

#include "tg/train/exchange.hpp"

namespace tg::train {

struct RendezvousOptions {
  std::string addr = "127.0.0.1";
  int port = 29500;
  int rank = 0, world_size = 1;
  bool external_store = false;  // false: rank 0 hosts the TCP store
  double timeout_s = 60.0;      // rendezvous and every collective
};

/// A transport with a barrier-free allgather of byte buffers, float max- and sum-allreduces and a
/// barrier (used to measure the wait for the slowest rank apart from wire time). Every
/// failure (peer closed the connection, timeout, store gone) becomes std::runtime_error naming
/// the rank, the operation and the bound.
std::unique_ptr<Transport> make_gloo_transport(const RendezvousOptions& options);

/// Broadcast-free check that every rank holds the same 64-bit value (e.g. a hash of the weights).
bool ranks_agree(Transport& transport, std::uint64_t value);

}  // namespace tg::train
