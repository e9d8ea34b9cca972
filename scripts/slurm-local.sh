#!/usr/bin/env bash
# scripts/slurm-local.sh [start|stop|status]: a one-node Slurm cluster on this machine, to run
# and test slurm/ and `sweeps/run --slurm` without a cluster. Run as root.
#
# start (the default) installs Debian's slurm-wlm and munge, writes /etc/slurm/slurm.conf for
# this machine (cores and memory from `slurmd -C`), starts munged, slurmctld and slurmd and
# waits until the node is idle. Idempotent: when the daemons already run with the same
# configuration it changes nothing. The configuration is what a real cluster is likely to have
# where it matters to us:
#   - MpiDefault=none (Slurm's default), so a template that forgets `srun --mpi=pmix` fails here
#     as it would there;
#   - TaskPlugin=task/affinity, so `--cpu-bind` really pins tasks;
#   - GPUs as generic resources: the node's NVIDIA GPUs where it has some, otherwise
#     SLURM_LOCAL_FAKE_GPUS (default 5) dummy device files, so that the GPU templates' rank
#     layout (TP 4 + 1 draft) can be tested on a CPU-only machine.
# It refuses to touch a slurm.conf it did not write: on a real cluster's node it does nothing.
set -euo pipefail

action=${1:-start}
marker="# written by ssd-bench scripts/slurm-local.sh"
conf=/etc/slurm/slurm.conf
gres_conf=/etc/slurm/gres.conf
state=/var/spool/slurm-local
logs=/var/log/slurm-local
run=/run/slurm-local
node=$(hostname -s)

fail() {
  echo "slurm-local: error: $*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || fail "run as root (it installs packages and starts daemons)"

foreign_conf() { [ -f "$conf" ] && ! grep -qF "$marker" "$conf"; }

daemon_running() { pgrep -x "$1" >/dev/null 2>&1; }

stop_all() {
  if foreign_conf; then
    fail "$conf was not written by this script; not stopping a cluster it did not start"
  fi
  scontrol shutdown >/dev/null 2>&1 || true
  for d in slurmd slurmctld; do
    pkill -x "$d" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    daemon_running slurmctld || daemon_running slurmd || break
    sleep 0.2
  done
  pkill -x munged 2>/dev/null || true
}

node_state() { sinfo -h -n "$node" -o %T 2>/dev/null | head -n1; }

case "$action" in
  stop)
    stop_all
    echo "slurm-local: stopped"
    exit 0
    ;;
  status)
    state_now=$(node_state || true)
    if [ -n "$state_now" ]; then
      echo "slurm-local: node $node is ${state_now}"
      exit 0
    fi
    echo "slurm-local: not running"
    exit 1
    ;;
  start) ;;
  *) fail "unknown action '$action' (expected start, stop or status)" ;;
esac

foreign_conf && fail "$conf exists and was not written by this script; this machine already \
belongs to a Slurm cluster (use that one, or move the file away)"

# Packages, from Debian only.
missing=()
for p in slurm-wlm munge; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "slurm-local: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# GPUs as generic resources. Dummy devices are character devices like /dev/null's, one per
# fake GPU, so Slurm can hand them out and set CUDA_VISIBLE_DEVICES like real ones.
gpu_files=()
if ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  mapfile -t gpu_files < <(ls /dev/nvidia[0-9]* | sort -V)
else
  for i in $(seq 0 $((${SLURM_LOCAL_FAKE_GPUS:-5} - 1))); do
    f=/dev/ssd-bench-fake-gpu$i
    [ -e "$f" ] || mknod -m 666 "$f" c 1 3
    gpu_files+=("$f")
  done
fi

# The node as slurmd detects it; memory leaves 1 GiB to the system. Every CPU a job does not
# ask memory for gets an equal share, so that several small jobs fit at once.
hw=$(slurmd -C | head -n1)
cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
memory=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
memory=$((memory > 2048 ? memory - 1024 : memory))
node_line=$(sed -e "s/^NodeName=[^ ]*/NodeName=$node/" -e "s/RealMemory=[0-9]*/RealMemory=$memory/" <<<"$hw")

new_conf=$(
  cat <<EOF
$marker
ClusterName=ssd-local
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d
SlurmctldPidFile=$run/slurmctld.pid
SlurmdPidFile=$run/slurmd.pid
SlurmctldLogFile=$logs/slurmctld.log
SlurmdLogFile=$logs/slurmd.log
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$((memory / cpus))
GresTypes=gpu
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
# Finished jobs stay visible to scontrol for 5 minutes (there is no accounting database).
MinJobAge=300
KillWait=10
InactiveLimit=0
$node_line Gres=gpu:${#gpu_files[@]} State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
)
new_gres="$marker
NodeName=$node Name=gpu File=$(
  IFS=,
  echo "${gpu_files[*]}"
)"

if [ "$(cat "$conf" 2>/dev/null)" = "$new_conf" ] && [ "$(cat "$gres_conf" 2>/dev/null)" = "$new_gres" ] &&
  daemon_running munged && daemon_running slurmctld && daemon_running slurmd; then
  echo "slurm-local: already running (node $node: $(node_state))"
  exit 0
fi

stop_all
mkdir -p "$state/ctld" "$state/d" "$logs" "$run" /etc/slurm
printf '%s\n' "$new_conf" >"$conf"
printf '%s\n' "$new_gres" >"$gres_conf"

# munged runs as its own user, with its socket and key where the package put them.
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
[ -s /etc/munge/munge.key ] || runuser -u munge -- mungekey --create >/dev/null
runuser -u munge -- /usr/sbin/munged
munge -n | unmunge >/dev/null || fail "munge does not work (see /var/log/munge/munged.log)"

slurmctld -i || fail "slurmctld did not start (see $logs/slurmctld.log)"
slurmd || fail "slurmd did not start (see $logs/slurmd.log)"

for _ in $(seq 60); do
  s=$(node_state || true)
  case "$s" in
    idle*)
      echo "slurm-local: node $node idle: $cpus CPUs, ${memory} MB, ${#gpu_files[@]} GPUs (partition local)"
      exit 0
      ;;
    drain* | down* | fail* | inval*)
      reason=$(sinfo -h -n "$node" -o %E 2>/dev/null)
      fail "node $node is $s: ${reason:-no reason given} (see $logs/slurmd.log)"
      ;;
  esac
  sleep 1
done
fail "node $node did not become idle within 60 s (state: ${s:-unknown}; see $logs/)"
