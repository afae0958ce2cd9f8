# Sourced by launcher_test.sh: a one-node Slurm cluster (Debian's slurm-wlm
# and munge) that lives in a temporary folder for one test. Daemons run as
# root with proctrack/linuxproc and task/none, so no cgroups are needed;
# ports are picked free; everything is stopped and removed on exit, also on
# failure. slurm_start skips the test (77) when the cluster cannot start.

stop_daemons() {  # PIDFILE...: TERM, up to 10 s to end, then KILL
  local pidfile pids=() pid
  for pidfile in "$@"; do
    [ -s "$pidfile" ] && pids+=("$(cat "$pidfile")")
    rm -f "$pidfile"
  done
  [ ${#pids[@]} -eq 0 ] && return
  kill "${pids[@]}" 2>/dev/null
  # slurmd waits for the steps it runs to end.
  for _ in $(seq 50); do
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && break; pid=; done
    [ -z "${pid:-}" ] && break
    sleep 0.2
  done
  kill -KILL "${pids[@]}" 2>/dev/null
}

slurm_stop() {
  stop_daemons "$SLURM_DIR"/slurmd.pid "$SLURM_DIR"/slurmctld.pid "$SLURM_DIR"/munged.pid
  rm -rf "$SLURM_DIR"
}

slurm_skip() {  # REASON: shows the daemons' logs, then skips
  echo "SKIP: the one-node Slurm cluster did not start: $1"
  tail -n 5 "$SLURM_DIR"/*.log 2>/dev/null
  exit 77
}

# A TCP port nobody listens on. The range lies below the kernel's ephemeral
# ports, which the other tests' connections draw from while this one starts.
free_port() {  # OFFSET
  local low
  low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  local base=$((low > 12000 ? low - 10000 : 2000))
  local port=$((base + ($$ * 7 + $1) % 10000))
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
  # The daemons' own output goes to a file: a daemon holding the test's
  # output open would keep ctest waiting after the test has ended.
  munged -f --key-file="$SLURM_DIR/munge.key" --socket="$SLURM_DIR/munge.socket" --pid-file="$SLURM_DIR/munged.pid" \
    --log-file="$SLURM_DIR/munged.log" --seed-file="$SLURM_DIR/munged.seed" \
    </dev/null >>"$SLURM_DIR/daemons.out" 2>&1 || slurm_skip "munged failed"
  # Only this cluster: no job or step of an outer Slurm leaks in.
  unset $(compgen -e | grep '^SLURM_' || true)
  export SLURM_CONF=$SLURM_DIR/slurm.conf
  # A port found free may be taken before slurmctld binds it, and slurmctld
  # then exits at once: such a start is tried again on other ports.
  local attempt
  for attempt in 0 1 2; do
    start_controller_and_node "$attempt" && return
    echo "slurm: attempt $((attempt + 1)) failed: $(grep -h -m1 fatal "$SLURM_DIR"/slurm*.log 2>/dev/null)"
    stop_daemons "$SLURM_DIR"/slurmd.pid "$SLURM_DIR"/slurmctld.pid
    rm -f "$SLURM_DIR"/slurm*.log
  done
  slurm_skip "three attempts failed"
}

# Writes the configuration with ATTEMPT's ports, starts slurmctld and slurmd
# and waits up to 30 s for the node to be idle; fails at once when slurmctld
# has stopped on a fatal error.
start_controller_and_node() {  # ATTEMPT
  local host ctld_port slurmd_port
  host=$(hostname -s)
  ctld_port=$(free_port $((2 * $1)))
  slurmd_port=$(free_port $((2 * $1 + 1)))
  [ "$slurmd_port" != "$ctld_port" ] || slurmd_port=$(free_port $((2 * $1 + 2)))
  # Job ids start at a number of this run's own, so that two clusters on one
  # machine do not hand out the same ids (they name shared-memory segments).
  cat >"$SLURM_CONF" <<EOF
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
  slurmctld -f "$SLURM_CONF" -i </dev/null >>"$SLURM_DIR/daemons.out" 2>&1 || return 1
  slurmd -f "$SLURM_CONF" </dev/null >>"$SLURM_DIR/daemons.out" 2>&1 || return 1
  # The bound is in time, not in tries: a query to a controller that does
  # not answer may itself take seconds.
  local deadline=$((SECONDS + 30)) state
  while :; do
    state=$(timeout 5 sinfo -h -o %t 2>/dev/null)
    [ "$state" = idle ] && break
    grep -q fatal "$SLURM_DIR/slurmctld.log" 2>/dev/null && return 1
    [ $SECONDS -lt $deadline ] || slurm_skip "its node is not idle after 30 s (${state:-no answer})"
    sleep 0.2
  done
  echo "slurm: a one-node cluster is up in $SLURM_DIR (ports $ctld_port, $slurmd_port)"
}
