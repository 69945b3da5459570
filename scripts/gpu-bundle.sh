#!/usr/bin/env bash
# terngrad-bench: builds the CUDA test and benchmark programs HERE (nvcc compiles and links without a GPU)
# into .gpu-bundle/, for scripts/gpu-check.sh --prebuilt on the GPU machine. That machine's image has
# nvcc, CMake and ninja but none of this project's Debian packages (GoogleTest, Random123, ...), and
# nothing can be installed there, so the programs travel ready-made: libstdc++, libgcc and the CUDA
# runtime are linked statically (TG_PORTABLE_BINARIES), leaving glibc >= 2.35
# (Debian 12, Ubuntu 22.04 and later) and the NVIDIA driver.
#   bash scripts/gpu-bundle.sh        then, on the device:  bash scripts/gpu-check.sh --prebuilt .gpu-bundle
#   (copy .gpu-bundle/ into the clone on the GPU machine; it is ignored by git)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/gpu-bundle
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTG_ENABLE_CUDA=ON -DTG_CORE_ONLY=ON \
  -DTG_PORTABLE_BINARIES=ON >"$build.configure.log" 2>&1 || { tail -30 "$build.configure.log"; exit 2; }
cmake --build "$build" --target tg_cuda_tests tg_cuda_tiles_tests tg_cuda_bench
rm -rf .gpu-bundle
mkdir -p .gpu-bundle
cp "$build/tests/cuda/tg_cuda_tests" "$build/tests/cuda/tg_cuda_tiles_tests" "$build/bench/cuda/tg_cuda_bench" .gpu-bundle/
{
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- codec tests bench || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m) with $(nvcc --version | tail -1)"
  for f in .gpu-bundle/tg_*; do
    need=$(objdump -T "$f" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
    echo "$(basename "$f"): $(stat -c %s "$f") bytes, needs $need; shared libraries: $(ldd "$f" | awk '{print $1}' | grep -v -E 'vdso|ld-linux' | tr '\n' ' ')"
  done
} > .gpu-bundle/MANIFEST.txt
cat .gpu-bundle/MANIFEST.txt
if objdump -T .gpu-bundle/tg_* | grep -o 'GLIBC_2\.3[6-9]' | grep -q .; then
  echo "gpu-bundle: a program needs a glibc newer than 2.35" >&2
  exit 1
fi
if ldd .gpu-bundle/tg_* | grep -q -E 'libcudart|libstdc\+\+|libgcc_s'; then
  echo "gpu-bundle: a program still links libcudart, libstdc++ or libgcc_s dynamically" >&2
  exit 1
fi
echo "gpu-bundle: ready in .gpu-bundle/ ($(du -sh .gpu-bundle | cut -f1))"
