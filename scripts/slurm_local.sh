#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for the SLURM tests (docs/notes.md):
#   scripts/slurm_local.sh start   # installs Debian's slurm + munge if missing, starts daemons
#   scripts/slurm_local.sh stop
#   scripts/slurm_local.sh env     # prints `export SLURM_CONF=...` for clients
# Runs as root without systemd: munged as user munge, slurmctld/slurmd with a minimal conf
# (no cgroups, no accounting), one `debug` partition, NodeName = `hostname -s`.
# The node declares SLURM_LOCAL_GPUS (default 8) GPUs as GRES backed by placeholder character
# devices: the scheduler books GPUs per job exactly as on a GPU cluster (a job asking for more
# than the node has never starts), although no CUDA device exists here.
set -euo pipefail
STATE=${SLURM_LOCAL_DIR:-/tmp/slurm-local}
CONF=$STATE/slurm.conf
GPUS=${SLURM_LOCAL_GPUS:-8}

install_pkgs() {
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
  fi
}

write_conf() {
  local host cpus mem
  host=$(hostname -s)
  cpus=$(nproc)
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
  mkdir -p "$STATE"/{spool,ctld,log,dev}
  for ((i = 0; i < GPUS; i++)); do  # char devices (as /dev/null): slurmd wants devices per GPU
    [[ -c $STATE/dev/gpu$i ]] || mknod "$STATE/dev/gpu$i" c 1 3
  done
  echo "NodeName=$host Name=gpu File=$STATE/dev/gpu[0-$((GPUS - 1))]" > "$STATE/gres.conf"
  cat > "$CONF" <<CONF
ClusterName=local
GresTypes=gpu
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
ReturnToService=2
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmdSpoolDir=$STATE/spool
StateSaveLocation=$STATE/ctld
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
KillWait=5
# a job that stops cleanly on SIGTERM exits 75 (EX_TEMPFAIL, pipeline/runtime/stopping.py): requeued
RequeueExit=75
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:$GPUS State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
}

start_munge() {
  if pgrep -x munged >/dev/null; then return; fi
  mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
  if [[ ! -s /etc/munge/munge.key ]]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
  chmod 700 /etc/munge; chmod 400 /etc/munge/munge.key
  su -s /bin/sh munge -c "munged"
}

wait_idle() {
  for _ in $(seq 1 60); do
    if SLURM_CONF=$CONF sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then return 0; fi
    sleep 0.5
  done
  echo "slurm did not come up; logs in $STATE/log" >&2
  return 1
}

case "${1:-start}" in
  start)
    install_pkgs
    if [[ -f $STATE/slurmctld.pid ]] && kill -0 "$(cat "$STATE/slurmctld.pid")" 2>/dev/null; then
      echo "export SLURM_CONF=$CONF"; exit 0
    fi
    write_conf
    start_munge
    # -c: a controller that is not running left no live job; jobs in its saved state (a killed
    # run's array, say) would hold CPUs of this one node forever, so start from a clean state.
    slurmctld -c -f "$CONF"
    slurmd -f "$CONF"
    wait_idle
    echo "export SLURM_CONF=$CONF"
    ;;
  stop)
    for d in slurmd slurmctld; do
      [[ -f $STATE/$d.pid ]] && kill "$(cat "$STATE/$d.pid")" 2>/dev/null || true
    done
    ;;
  env)
    echo "export SLURM_CONF=$CONF"
    ;;
  *)
    echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
