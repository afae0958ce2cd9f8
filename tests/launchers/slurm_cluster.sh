# Sourced by launcher_test.sh: a one-node Slurm cluster (Debian's slurm-wlm
# and munge) that lives in a temporary folder for one test. Daemons run as
# root with proctrack/linuxproc and task/none, so no cgroups are needed;
# ports are picked free; everything is stopped and removed on exit, also on
# failure. slurm_start skips the test (77) when the cluster cannot start.

slurm_stop() {
  local pidfile pids=() pid
  for pidfile in "$SLURM_DIR"/slurmd.pid "$SLURM_DIR"/slurmctld.pid "$SLURM_DIR"/munged.pid; do
    [ -s "$pidfile" ] && pids+=("$(cat "$pidfile")")
  done
  [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null
  # slurmd waits for the steps it runs to end; give the daemons 10 s.
  for _ in $(seq 50); do
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && break; pid=; done
    [ -z "${pid:-}" ] && break
    sleep 0.2
  done
  [ ${#pids[@]} -eq 0 ] || kill -KILL "${pids[@]}" 2>/dev/null
  rm -rf "$SLURM_DIR"
}

slurm_skip() {  # REASON: shows the daemons' logs, then skips
  echo "SKIP: the one-node Slurm cluster did not start: $1"
  tail -n 5 "$SLURM_DIR"/*.log 2>/dev/null
  exit 77
}

free_port() {  # a TCP port nobody listens on, from a range picked by pid
  local port=$((20000 + ($$ * 7 + $1) % 20000))
  while command -v ss >/dev/null && [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]; do
    port=$((port + 1))
  done
  echo "$port"
}

slurm_start() {
  local tool
  for tool in slurmctld slurmd srun sinfo munged mungekey; do
    command -v "$tool" >/dev/null || {
      echo "SKIP: $tool is not installed (apt-get install slurm-wlm munge)"
      exit 77
    }
  done
  [ "$(id -u)" -eq 0 ] || {
    echo "SKIP: the one-node Slurm cluster runs its daemons as root"
    exit 77
  }
  SLURM_DIR=$(mktemp -d /tmp/viastack-slurm.XXXXXX)
  trap slurm_stop EXIT
  chmod 711 "$SLURM_DIR"  # munged wants its socket's folder searchable by all
  mkdir "$SLURM_DIR/state" "$SLURM_DIR/spool"
  mungekey -c -k "$SLURM_DIR/munge.key" || slurm_skip "mungekey failed"
  munged -f --key-file="$SLURM_DIR/munge.key" --socket="$SLURM_DIR/munge.socket" --pid-file="$SLURM_DIR/munged.pid" \
    --log-file="$SLURM_DIR/munged.log" --seed-file="$SLURM_DIR/munged.seed" || slurm_skip "munged failed"

  local host ctld_port slurmd_port
  host=$(hostname -s)
  ctld_port=$(free_port 0)
  slurmd_port=$(free_port 1)
  # Job ids start at a number of this run's own, so that two clusters on one
  # machine do not hand out the same ids (they name shared-memory segments).
  cat >"$SLURM_DIR/slurm.conf" <<EOF
ClusterName=viastack
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SLURM_DIR/munge.socket
CredType=cred/munge
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdParameters=config_overrides
KillOnBadExit=1
FirstJobId=$((1000 + ($$ % 100000) * 100))
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=16 State=UNKNOWN
PartitionName=viastack Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  # Only this cluster: no job or step of an outer Slurm leaks in.
  unset $(compgen -e | grep '^SLURM_' || true)
  export SLURM_CONF=$SLURM_DIR/slurm.conf
  slurmctld -f "$SLURM_CONF" -i || slurm_skip "slurmctld failed"
  slurmd -f "$SLURM_CONF" || slurm_skip "slurmd failed"
  local waited=0
  until [ "$(sinfo -h -o %t 2>/dev/null)" = idle ]; do
    [ $waited -lt 150 ] || slurm_skip "its node is not idle after 30 s ($(sinfo -h -o %t 2>&1))"
    sleep 0.2
    waited=$((waited + 1))
  done
  echo "slurm: a one-node cluster is up in $SLURM_DIR (ports $ctld_port, $slurmd_port)"
}
