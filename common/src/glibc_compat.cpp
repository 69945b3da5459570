// terngrad-bench: linked into the programs of a TG_PORTABLE_BINARIES build only (scripts/gpu-bundle.sh).
// The static libstdc++ of this Debian refers to arc4random (std::random_device, which these programs
// never use), a glibc 2.36 function; defining it here lowers the programs' need to glibc 2.35 (the
// static libgcc unwinder's _dl_find_object): Debian 12, Ubuntu 22.04 and later.
#include <sys/random.h>

#include <cstdint>

extern "C" std::uint32_t arc4random(void) {
  std::uint32_t value = 0;
  while (::getrandom(&value, sizeof value, 0) != static_cast<long>(sizeof value)) {
  }
  return value;
}
