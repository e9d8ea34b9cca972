#!/usr/bin/env bash
# Runs a command on a bare GPU machine (as root) over bundles from scripts/gpu-bundle.sh:
#   scripts/gpu-bundle-run.sh "NAME..." 'COMMAND'
# Unpacks .gpu/bundle-NAME.tar.xz for each NAME into /tmp/b (binaries in /tmp/b/NAME), adds the
# Debian libraries at their own paths without overwriting any file the machine has (cp -n),
# finds cuBLAS and NCCL for LD_LIBRARY_PATH, then evals COMMAND with B=/tmp/b and LOGS=/tmp/logs;
# /tmp/logs goes to $OUT/logs.tar.gz when OUT is set. Example (base and new builds side by side):
#   scripts/gpu-bundle-run.sh "base new" 'scripts/gpu-check.sh $B/new $LOGS/check tests'
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
mkdir -p /tmp/b /tmp/logs
for n in $1; do tar -C /tmp/b -xJf ".gpu/bundle-$n.tar.xz" || exit 3; done
if [ -d /tmp/b/root ]; then cp -rn /tmp/b/root/. / 2>/dev/null; fi
if [ ! -e /usr/bin/mpirun ]; then ln -s /usr/bin/mpirun.openmpi /usr/bin/mpirun; fi
ldconfig 2>/dev/null
dirs="$(find /usr/local /opt /usr/lib \( -name 'libcublas.so.13' -o -name 'libcublasLt.so.13' \
  -o -name 'libnccl.so.2' \) 2>/dev/null | xargs -r -n1 dirname | sort -u | tr '\n' ':')"
export LD_LIBRARY_PATH="${dirs}${LD_LIBRARY_PATH:-}"
# Shared memory and loopback only: the bundle has no network transports' libraries.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
  OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_osc=^ucx \
  OMPI_MCA_btl_base_warn_component_unused=0
export B=/tmp/b LOGS=/tmp/logs
for n in $1; do ldd "/tmp/b/$n/ssd-bench" | grep "not found"; done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
eval "$2"
rc=$?
if [ -n "${OUT:-}" ]; then tar -C /tmp -czf "$OUT/logs.tar.gz" logs; fi
echo "gpu-bundle-run: ${SECONDS}s, rc=$rc"
exit $rc
