#!/usr/bin/env bash
# Packs a CUDA build of ssd-bench for a bare GPU machine: one that has the NVIDIA driver, CUDA 13,
# cuBLAS and NCCL (the toolkit's or PyTorch's wheels) and python3 with numpy and h5py, but not
# the Debian libraries the binaries link (Open MPI, HDF5, OpenBLAS, ...). Writes
# .gpu/bundle-NAME.tar.xz (git-ignored) holding NAME/ (ssd-bench, the GPU tests and bench_decode
# in a build-tree layout, so scripts/gpu-check.sh takes it as a build folder) and, unless LIBS=0,
# root/ (those libraries, Open MPI's components and mpirun at their Debian paths).
#   scripts/gpu-bundle.sh BUILD_DIR [NAME]      NAME defaults to "build"
# Build for a CPU you do not know: -DSSD_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3
# -DCMAKE_CUDA_ARCHITECTURES=90 (Hopper). On the GPU machine: scripts/gpu-bundle-run.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "$1" && pwd)"
name="${2:-build}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/tests" "$stage/$name/bench" "$stage/root" "$root/.gpu"
cp "$build/ssd-bench" "$stage/$name/"
cp "$build/bench/bench_decode" "$stage/$name/bench/"
for t in test_cuda_ops test_cuda_gemm test_cuda_sampling test_cuda_model test_cuda_graphs test_forward; do
  if [ -e "$build/tests/$t" ]; then cp "$build/tests/$t" "$stage/$name/tests/"; fi
done
if [ "${LIBS:-1}" = 1 ]; then
  # What the binaries link, less the C library, the C++ runtime (the machine's is newer) and
  # cuBLAS/NCCL (hundreds of MB, and the machine's own match its driver); Open MPI's files.
  {
    ldd "$stage/$name/ssd-bench" "$stage/$name/tests/"* "$stage/$name/bench/bench_decode" |
      awk '/=>/ {print $3}'
    dpkg -L libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7 \
      libevent-pthreads-2.1-7 | grep -v -E "/(doc|man|lintian)/"
  } | sort -u |
    grep -v -E "/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.so|libcublas|libnccl" |
    while read -r f; do
      if [ ! -e "$f" ] || [ -d "$f" ]; then continue; fi
      mkdir -p "$stage/root$(dirname "$f")"
      if [ -L "$f" ]; then
        cp -P "$f" "$stage/root$(dirname "$f")/"
        target="$(readlink -f "$f")"
        mkdir -p "$stage/root$(dirname "$target")"
        cp "$target" "$stage/root$target"
      else
        cp "$f" "$stage/root$(dirname "$f")/"
      fi
    done
  # /lib is /usr/lib on Debian 12 and Ubuntu alike: keep everything under /usr.
  if [ -d "$stage/root/lib" ]; then
    mkdir -p "$stage/root/usr"
    cp -rn "$stage/root/lib" "$stage/root/usr/"
    rm -rf "$stage/root/lib"
  fi
fi
tar -C "$stage" -cJf "$root/.gpu/bundle-$name.tar.xz" .
ls -l "$root/.gpu/bundle-$name.tar.xz"
