#!/usr/bin/env bash
# Single-machine Slurm for CI: munge + slurmctld + N slurmd (emulated nodes n1..nN on 127.0.0.1).
# The tested recipe of the launch reference sheet (launch-facts.md, "CI snippet"); used by tests/e2e and .ci/run.
#   SLURM_CI_NODES=4 (default) | 1 (node named `hostname -s`) | 256 ...
#   SLURM_CI_CPUS=2  CPUs each node advertises (may exceed the real core count)
#   SLURM_CI_GPUS=0  fake GPU gres per node (e.g. 8) so `--gpus-per-node=8` scripts are accepted
#   SLURM_CI_EXTRA_CONF  extra slurm.conf lines (newline-separated), e.g. HealthCheckProgram=... or TopologyPlugin=...
#   SLURM_CI_DIR     state, spool, logs, pid files (default /tmp/dsctl-slurm)
set -euo pipefail
NODES=${SLURM_CI_NODES:-4}
DIR=${SLURM_CI_DIR:-/tmp/dsctl-slurm}
CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}          # default path: every client finds it without env vars
CPUS=${SLURM_CI_CPUS:-2}
GPUS=${SLURM_CI_GPUS:-0}
EXTRA_CONF=${SLURM_CI_EXTRA_CONF:-}
t0=$(date +%s)

# 1. packages (slurm-wlm pulls slurmctld, slurmd, slurm-client, slurm-wlm-basic-plugins, munge)
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi
# on a systemd host the packages may auto-start daemons with the stock config: stop them
if [ -d /run/systemd/system ]; then systemctl stop slurmd slurmctld 2>/dev/null || true; fi

# 2. munge (the postinst already writes /etc/munge/munge.key; create one if it is missing)
if [ ! -s /etc/munge/munge.key ]; then
  (command -v mungekey >/dev/null && mungekey --create --force) || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
fi
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  mkdir -p /run/munge && chown munge:munge /run/munge && chmod 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged          # daemonises; pid in /run/munge/munged.pid
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
fi

# 3. slurm.conf (+ gres.conf)
H=$(hostname -s)
GRES_NODE=""; GRES_TYPES=""
if [ "$GPUS" -gt 0 ]; then GRES_NODE="Gres=gpu:$GPUS "; GRES_TYPES="GresTypes=gpu"; fi
mkdir -p "$DIR/state" "$DIR/spool" "$(dirname "$CONF")"
if [ "$NODES" -gt 1 ]; then
  NODELINE="NodeName=n[1-$NODES] NodeHostname=$H NodeAddr=127.0.0.1 Port=[17001-$((17000+NODES))] CPUs=$CPUS RealMemory=2000 ${GRES_NODE}State=UNKNOWN"
else
  NODELINE="NodeName=$H NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=2000 ${GRES_NODE}State=UNKNOWN"
fi
cat > "$CONF" <<EOF
ClusterName=ci
SlurmctldHost=$H(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
${GRES_TYPES}
${EXTRA_CONF}
SlurmctldTimeout=30
SlurmdTimeout=30
$NODELINE
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF="$CONF"
if [ "$GPUS" -gt 0 ]; then
  # slurmd drops file-less GPUs and rejects regular files: fake char devices with /dev/null's numbers
  mkdir -p "$DIR/fakegpu"
  for i in $(seq 0 $((GPUS-1))); do [ -e "$DIR/fakegpu/nvidia$i" ] || mknod "$DIR/fakegpu/nvidia$i" c 1 3; done
  printf "AutoDetect=off\nName=gpu File=%s/fakegpu/nvidia[0-%s]\n" "$DIR" "$((GPUS-1))" > "$(dirname "$CONF")/gres.conf"
else
  rm -f "$(dirname "$CONF")/gres.conf"
fi

# 4. daemons (both daemonise). -c clears saved state: without it, a node drained in an earlier run stays drained
slurmctld -c -i -f "$CONF"
if [ "$NODES" -gt 1 ]; then
  for i in $(seq 1 "$NODES"); do mkdir -p "$DIR/spool/n$i"; slurmd -f "$CONF" -N "n$i"; done
else
  mkdir -p "$DIR/spool/$H"; slurmd -f "$CONF"
fi

# 5. wait until every node is idle
for _ in $(seq 120); do
  idle=$(sinfo -h -o '%T %D' 2>/dev/null | awk '$1=="idle"{s+=$2} END{print s+0}')   # "drained" must not count
  [ "$idle" -ge "$NODES" ] && break; sleep 0.5
done
sinfo
[ "$idle" -ge "$NODES" ] || { echo "slurm: only $idle/$NODES nodes idle" >&2; tail -n 20 "$DIR"/slurmctld.log >&2; exit 1; }
echo "slurm up: $NODES node(s) idle in $(( $(date +%s) - t0 )) s (conf $CONF, logs $DIR)"
