#!/bin/sh
# local-cluster.sh — a single-node Slurm cluster in a directory, for trying
# the Slurm pipeline on one machine and for its test.
#
#   local-cluster.sh start DIR     start munged, slurmctld and slurmd
#   local-cluster.sh stop DIR      stop them (by the ids in DIR/*.pid)
#
# start writes DIR/slurm.conf for a cluster of one node, this host (its
# short host name, all its CPUs, one partition "local"): no accounting,
# proctrack/linuxproc, task/none, MPI plugin pmix, a munge daemon with a
# key generated into DIR and its own socket, every state, spool, log and
# pid file under DIR, free TCP ports picked at random.  It waits until the
# node takes jobs and prints the line
#
#   SLURM_CONF=DIR/slurm.conf
#
# for the caller to export: every Slurm command then talks to this cluster.
# The daemons run as the calling user, which must be root (slurmd starts
# job steps as the submitting user).  Exit 0 when the node is up, 1 when a
# daemon did not start (its log is printed), 2 on bad usage.
set -eu

usage() { echo "usage: local-cluster.sh start | stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
mkdir -p "$2"
d=$(cd "$2" && pwd)

stop() {
  # slurmd first, so that the controller sees no node go down
  for p in slurmd slurmctld munged; do
    [ -s "$d/$p.pid" ] || continue
    pid=$(cat "$d/$p.pid")
    kill "$pid" 2> /dev/null || true
    i=0
    while kill -0 "$pid" 2> /dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -9 "$pid" 2> /dev/null || true
    rm -f "$d/$p.pid"
  done
}

fail() {
  echo "local-cluster.sh: $1" >&2
  [ -f "$d/$2.log" ] && tail -n 20 "$d/$2.log" >&2
  stop
  exit 1
}

# a TCP port nobody listens on (random, checked with ss)
free_port() {
  while :; do
    p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000 ))
    ss -Htln "sport = :$p" 2> /dev/null | grep -q . || { echo "$p"; return; }
  done
}

# wait_for FILE: up to 10 s for FILE to exist
wait_for() {
  i=0
  while [ ! -e "$1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  [ -e "$1" ]
}

case $cmd in
stop) stop; exit 0 ;;
start) ;;
*) usage ;;
esac

[ "$(id -u)" = 0 ] || { echo "local-cluster.sh: needs root (slurmd runs jobs as their users)" >&2; exit 1; }
for b in munged slurmctld slurmd sinfo sbatch srun; do
  command -v "$b" > /dev/null 2>&1 || [ -x "/usr/sbin/$b" ] ||
    { echo "local-cluster.sh: $b is not installed (Debian: slurm-wlm, munge)" >&2; exit 1; }
done
PATH=$PATH:/usr/sbin
chmod 711 "$d"
mkdir -p "$d/munge" "$d/state" "$d/spool" "$d/pmix"
chmod 711 "$d/munge"

# munge: a fresh key, its own socket
dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 2> /dev/null
chmod 400 "$d/munge/munge.key"
sock=$d/munge/munge.socket.2
munged --force --key-file="$d/munge/munge.key" --socket="$sock" \
  --pid-file="$d/munged.pid" --log-file="$d/munged.log" --seed-file="$d/munge/seed" \
  2> "$d/munged.err" || fail "munged did not start: $(cat "$d/munged.err")" munged
wait_for "$sock" || fail "munged made no socket" munged

host=$(hostname -s)
# at least 2 CPUs, so that a 2-process MPI step fits on a 1-CPU machine
# (config_overrides keeps slurmd from draining a node with fewer)
cpus=$(nproc)
[ "$cpus" -ge 2 ] || cpus=2
cat > "$d/slurm.conf" <<EOF
# A single-node cluster made by local-cluster.sh
ClusterName=flywheel
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1,sched_min_interval=0,batch_sched_delay=0
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=600
KillWait=5
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
cat > "$d/mpi.conf" <<EOF
PMIxCliTmpDirBase=$d/pmix
EOF
SLURM_CONF=$d/slurm.conf
export SLURM_CONF

slurmctld -i -f "$SLURM_CONF" 2> "$d/slurmctld.err" ||
  fail "slurmctld did not start: $(cat "$d/slurmctld.err")" slurmctld
wait_for "$d/slurmctld.pid" || fail "slurmctld wrote no pid file" slurmctld
slurmd -f "$SLURM_CONF" -N "$host" 2> "$d/slurmd.err" ||
  fail "slurmd did not start: $(cat "$d/slurmd.err")" slurmd
wait_for "$d/slurmd.pid" || fail "slurmd wrote no pid file" slurmd

# up when the node is idle (up to 20 s)
i=0
until sinfo -h -n "$host" -o %t 2> /dev/null | grep -qx idle; do
  i=$((i + 1))
  [ $i -lt 200 ] || fail "the node did not come up: $(sinfo -h -N -o '%N %t %E' 2>&1)" slurmctld
  sleep 0.1
done
echo "SLURM_CONF=$SLURM_CONF"
