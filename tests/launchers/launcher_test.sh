#!/usr/bin/env bash
# Starts viastack jobs under a process manager a cluster already runs and
# checks what they see and how they end.
#
#   launcher_test.sh LAUNCHER MODE PROBE BINDIR [LIBDIR]
#
#   LAUNCHER  viarun  viastack's own launcher, from BINDIR (cleanup mode only)
#             singleton  no launcher: one process alone (cleanup mode only)
#             mpirun  Open MPI's mpirun.openmpi (PMIx)
#             hydra   MPICH's mpiexec.hydra (PMI-1), also on two hosts that are this
#                     machine under two names (2 nodes in the layout)
#             slurm   a one-node Slurm cluster started here: srun --mpi=pmix and --mpi=pmi2
#   MODE      probe     bootstrap_probe on 4 ranks: layout, put/fence/get
#             programs  via_pingpong, am_bench --test rtt, mp_alltoall and examples/mpi/ring.c
#                       built with viampicc (4 ranks)
#             failure   a rank that exits with status 3, and one that aborts, end the job
#                       with the launcher's failure status in bounded time
#             cleanup   no /dev/shm/viastack.<job> is left after a job ends: normally, by a
#                       rank's exit status 3, MPI_Abort, a refused MPI call, SIGTERM to the
#                       launcher, SIGKILL of one rank or of every rank (cleanup_probe);
#                       nothing of a live job or of another user is removed
#             netpipe   Debian's NPopenmpi, built for Open MPI, on viastack's libmpi.so.40
#                       (found in LIBDIR through LD_LIBRARY_PATH), 2 ranks
#   PROBE     the bootstrap_probe executable; BINDIR holds the programs
#
# Skips (77) with the reason when the launcher is not installed; installs nothing.
set -uo pipefail
launcher=$1 mode=$2 probe=$3 bindir=$4 libdir=${5:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

need() {  # TOOL PACKAGE
  command -v "$1" >/dev/null || {
    echo "SKIP: $1 is not installed (apt-get install $2)"
    exit 77
  }
}

# Ranks of a sanitizer build run with libpmix's own leaks suppressed.
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$here/lsan.supp"

# The ways this launcher starts a job (launcher_command below has their commands).
case $launcher in
  viarun)
    [ -x "$bindir/viarun" ] || { echo "viarun is not built in $bindir"; exit 2; }
    ways=(viarun)
    ;;
  singleton) ways=(singleton) ;;
  mpirun)
    need mpirun.openmpi openmpi-bin
    ways=(mpirun)
    ;;
  hydra)
    need mpiexec.hydra mpich
    ways=(hydra hydra-2hosts)
    ;;
  slurm)
    source "$here/slurm_cluster.sh"
    slurm_start
    ways=(srun-pmix srun-pmi2)
    ;;
  *)
    echo "unknown launcher $launcher"
    exit 2
    ;;
esac

launcher_command() {  # WAY N: the command that starts N ranks, in $command
  local way=$1 n=$2
  case $way in
    viarun) command=("$bindir/viarun" -n "$n" --) ;;
    singleton) command=() ;;
    # Tests run as root in CI; 4 ranks on 2 cores need oversubscription, unbound.
    mpirun) command=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none -x LSAN_OPTIONS -np "$n") ;;
    hydra) command=(mpiexec.hydra -n "$n") ;;
    # Two hosts that are this machine under two names: Hydra places half the
    # ranks on each and says so in PMI_process_mapping.
    hydra-2hosts) command=(mpiexec.hydra -launcher fork -hosts "localhost:$((n / 2)),127.0.0.1:$((n / 2))" -n "$n") ;;
    srun-pmix) command=(srun --mpi=pmix --overcommit --kill-on-bad-exit=1 -n "$n") ;;
    srun-pmi2) command=(srun --mpi=pmi2 --overcommit --kill-on-bad-exit=1 -n "$n") ;;
  esac
}

# run LIMIT WAY N PROGRAM ARGS...: the job's output in $out, status in $rc,
# milliseconds taken in $took; a launcher still running after LIMIT s is
# killed (124, or 137 when it ignores SIGTERM). The output goes through a
# file: ranks a killed launcher leaves behind cannot hold the test up.
run() {
  local limit=$1 way=$2 n=$3 start log
  shift 3
  launcher_command "$way" "$n"
  log=$(mktemp)
  start=$(date +%s%N)
  timeout -k 5 "$limit" "${command[@]}" "$@" >"$log" 2>&1 </dev/null
  rc=$?
  took=$(( ($(date +%s%N) - start) / 1000000 ))
  out=$(cat "$log")
  rm -f "$log"
  echo "== $way, $n ranks: $* -> status $rc in ${took} ms"
  echo "$out" | sed 's/^/   /' | tail -n 40
}

probe_checks() {  # WAY
  run 120 "$1" 4 "$probe"
  [ "$rc" -eq 0 ] || fail "$1: bootstrap_probe exited with status $rc"
  local r place
  for r in 0 1 2 3; do
    place="rank $r of 4, node 0 of 1, local rank $r of 4"
    [ "$1" = hydra-2hosts ] && place="rank $r of 4, node $((r / 2)) of 2, local rank $((r % 2)) of 2"
    grep -q "$place" <<<"$out" || fail "$1: rank $r did not report its place as $place"
    grep -q "bootstrap_probe: rank $r: ok" <<<"$out" || fail "$1: rank $r did not see every value"
  done
}

programs_checks() {  # WAY
  local p
  for p in via_pingpong am_bench mp_alltoall viampicc mpi_ring; do
    [ -x "$bindir/$p" ] || fail "$bindir/$p is not built"
  done
  # The MPI example is built the way a user builds one, with viampicc; in a
  # sanitizer build (LAUNCHER_TEST_SANITIZED=1) the library needs the sanitizer's
  # runtime loaded first, so the build's own instrumented mpi_ring runs instead.
  local ring=$bindir/mpi_ring built
  if [ "${LAUNCHER_TEST_SANITIZED:-0}" != 1 ]; then
    built=$(mktemp)
    "$bindir/viampicc" -O2 -o "$built" "$here/../../examples/mpi/ring.c" || fail "viampicc could not build examples/mpi/ring.c"
    ring=$built
  fi
  # via_pingpong's ranks past the first two leave at once; across two Hydra
  # proxies a proxy whose ranks all left early hangs Hydra 4.0.2 (see below).
  local pingpong_ranks=4
  [ "$1" = hydra-2hosts ] && pingpong_ranks=2
  run 120 "$1" $pingpong_ranks "$bindir/via_pingpong" --sizes 8,4096 --iters 1000
  [ "$rc" -eq 0 ] || fail "$1: via_pingpong exited with status $rc"
  run 120 "$1" 4 "$bindir/am_bench" --test rtt --sizes 8,1024 --iters 1000
  [ "$rc" -eq 0 ] || fail "$1: am_bench exited with status $rc"
  # An all-to-all that checks its data and which provider carried each peer's
  # traffic: on two hosts shm within one and tcp between them.
  local provider=shm
  [ "$1" = hydra-2hosts ] && provider=mixed
  run 120 "$1" 4 "$bindir/mp_alltoall" --provider $provider
  [ "$rc" -eq 0 ] && [ "$(grep -c "over $provider: all verified" <<<"$out")" -eq 4 ] ||
    fail "$1: mp_alltoall did not verify its data over $provider on every rank (status $rc)"
  run 120 "$1" 4 "$ring" 50
  [ "$rc" -eq 0 ] && grep -q "ring: 4 ranks, 50 laps and a 1 MiB message: ok" <<<"$out" ||
    fail "$1: the ring example did not finish with its check passed (status $rc)"
  [ -z "${built:-}" ] || rm -f "$built"
}

netpipe_checks() {  # WAY
  local np
  np=$(command -v NPopenmpi) || {
    echo "SKIP: NPopenmpi is not installed (apt-get install netpipe-openmpi)"
    exit 77
  }
  [ -e "$libdir/libmpi.so.40" ] || fail "$libdir/libmpi.so.40 is not built"
  # NetPIPE checks the bytes it receives; the loader's log shows whose
  # libmpi.so.40 each rank initialised. The ranks alone get the variables.
  run 120 "$1" 2 env LD_LIBRARY_PATH="$libdir" LD_DEBUG=libs "$np" -i -u 65536 -n 3 -o /dev/null
  [ "$rc" -eq 0 ] && grep -q "Integrity check passed" <<<"$out" && ! grep -qi "integrity check failed" <<<"$out" ||
    fail "$1: NPopenmpi's integrity check did not pass on viastack (status $rc)"
  [ "$(grep -c "calling init: $libdir/libmpi.so.40" <<<"$out")" -eq 2 ] ||
    fail "$1: not both ranks ran on $libdir/libmpi.so.40"
}

# A job whose rank fails must end well within this many seconds (the job is
# killed at the bound, so a job that took that long did not end by itself).
bound=60
failure_checks() {  # WAY
  run $bound "$1" 4 "$probe" --fail-rank 1
  [ "$rc" -ne 0 ] && [ "$took" -lt $((bound * 1000)) ] ||
    fail "$1: a rank's exit status 3 did not end the job with a failure status within $bound s (status $rc)"
  grep -q "rank 1 exits with status 3" <<<"$out" || fail "$1: rank 1 did not fail as asked"
  run $bound "$1" 4 "$probe" --abort-rank 2
  [ "$rc" -ne 0 ] && [ "$took" -lt $((bound * 1000)) ] ||
    fail "$1: an abort did not end the job with a failure status within $bound s (status $rc)"
  grep -qF "viastack[via rank 2] error: bootstrap_probe aborts the job as asked" <<<"$out" ||
    fail "$1: the aborting rank's message is missing"
}

# The clean-up cases: a job of cleanup_probe ends in each way a job can end,
# and its folder of segments must be gone: removed by the job itself, or,
# where no code of the job's can run (every rank SIGKILLed; Hydra SIGKILLs
# the ranks left once one fails or mpiexec gets SIGTERM), by the start of the
# next job on the node. viarun removes the folder itself after reaping its ranks.
cleanup_probe=$bindir/cleanup_probe

running() {  # PID: a process that has not ended (a zombie has)
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
  [ -n "$state" ] && [ "$state" != Z ]
}

# start_job WAY N ARGS...: cleanup_probe ARGS in the background, once every
# rank has said where its segments are: the launcher's pid in $job, the
# folder in $folder, rank R's pid in ${rank_pids[R]}; 1 if that did not come.
start_job() {
  local way=$1 n=$2 waited=0 r
  shift 2
  launcher_command "$way" "$n"
  job_log=$(mktemp)
  "${command[@]}" "$cleanup_probe" "$@" >"$job_log" 2>&1 </dev/null &
  job=$!
  started() { [ "$(grep -c '^cleanup_probe: rank [0-9]* pid [0-9]* folder /dev/shm/viastack\.' "$job_log")" -ge "$n" ]; }
  until started; do
    # A job may end as soon as its ranks have spoken.
    if ! running $job && ! started || [ $waited -ge 600 ]; then
      fail "$way: cleanup_probe $* did not start on $n ranks"
      sed 's/^/   /' "$job_log" | tail -n 20
      kill -KILL $job 2>/dev/null
      wait $job
      return 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  folder=$(sed -n 's/^cleanup_probe: rank [0-9]* pid [0-9]* folder //p' "$job_log" | sort -u)
  rank_pids=()
  for r in $(seq 0 $((n - 1))); do
    rank_pids[r]=$(sed -n "s/^cleanup_probe: rank $r pid \([0-9]*\) .*/\1/p" "$job_log")
  done
  [ "$(wc -l <<<"$folder")" -eq 1 ] || fail "$way: the ranks name different folders: $folder"
}

# finish_job WAY WHAT: waits (bound s) for the launcher, then for every rank,
# to end; the launcher's status in $rc. What outlives the bound is killed.
finish_job() {
  local way=$1 what=$2 waited=0 pid
  while running $job && [ $waited -lt $((bound * 10)) ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  running $job && fail "$way, $what: the job did not end within $bound s" && kill -KILL $job
  wait $job
  rc=$?
  for pid in "${rank_pids[@]}"; do
    waited=0
    while running "$pid" && [ $waited -lt 100 ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    running "$pid" && fail "$way, $what: rank pid $pid outlived its launcher by 10 s" && kill -KILL "$pid"
  done
  echo "== $way, $what: status $rc"
  sed 's/^/   /' "$job_log" | grep -v '^   cleanup_probe: rank' | tail -n 8
  rm -f "$job_log"
}

gone_within() {  # FOLDER TENTHS: the folder is gone within TENTHS tenths of a second
  local waited=0
  while [ -e "$1" ] && [ $waited -lt "$2" ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  [ ! -e "$1" ]
}

# expect_removed WAY N WHAT BY: the job's folder is gone once the job has
# ended (BY=job) or once the next job on the node has started (BY=next).
expect_removed() {
  local way=$1 n=$2 what=$3 by=$4 left=$folder
  if gone_within "$left" 30; then
    echo "   $left: removed by the job itself"
    return
  fi
  if [ "$by" = job ]; then
    fail "$way, $what: the job left $left behind: $(ls "$left" | tr '\n' ' ')"
    rm -rf "$left"
    return
  fi
  echo "   $left: left by the job ($(ls "$left" | tr '\n' ' ')); starting the next job"
  start_job "$way" "$n" end || return
  finish_job "$way" "the next job"
  [ "$rc" -eq 0 ] || fail "$way: the next job exited with status $rc"
  gone_within "$folder" 30 || fail "$way: the next job left its own $folder behind"
  if [ -e "$left" ]; then
    fail "$way, $what: the next job did not remove $left, left by dead processes" \
      "(modified $(stat -c %y "$left"), holding: $(ls -A "$left" | tr '\n' ' '))"
    rm -rf "$left"
  else
    echo "   $left: removed by the next job's start"
  fi
}

# What the clean-up must never touch: a live job's segment, another user's
# folder, and files of this user's that are no job's segments (old enough to
# look abandoned).
decoys=()
plant_decoys() {
  local mine=/dev/shm/viastack.cleanup-decoy-$$ theirs=/dev/shm/viastack.cleanup-other-user-$$
  mkdir -m 700 "$mine" && echo notes >"$mine/notes" && echo stray >"$mine.file" &&
    touch -d '1 hour ago' "$mine/notes" "$mine" "$mine.file" || fail "cannot plant $mine"
  decoys=("$mine/notes" "$mine.file")
  if [ "$(id -u)" -eq 0 ]; then
    mkdir -m 700 "$theirs" && head -c 4096 /dev/zero >"$theirs/nic.0" && chown -R nobody "$theirs" &&
      touch -d '1 hour ago' "$theirs/nic.0" "$theirs" || fail "cannot plant $theirs"
    decoys+=("$theirs/nic.0")
  fi
  start_job singleton 1 wait || return
  live_job=$job live_log=$job_log live_rank=${rank_pids[0]} live_folder=$folder
  decoys+=("$folder")
}
check_decoys() {
  local decoy
  for decoy in "${decoys[@]}"; do
    [ -e "$decoy" ] || fail "the clean-up removed $decoy, which is no dead job's"
  done
  if [ -n "${live_job:-}" ]; then
    compgen -G "$live_folder/nic.*" >/dev/null || fail "the clean-up removed the live job's segment in $live_folder"
    kill -TERM "$live_job" 2>/dev/null
    job=$live_job job_log=$live_log rank_pids=("$live_rank") folder=$live_folder
    finish_job singleton "the live job, ended by SIGTERM"
    gone_within "$folder" 30 || fail "the live job left $folder behind"
  fi
  rm -rf /dev/shm/viastack.cleanup-decoy-$$ /dev/shm/viastack.cleanup-decoy-$$.file /dev/shm/viastack.cleanup-other-user-$$
}

# Who removes the folder after each way a job ends: the job itself (its
# ranks' exit and signal handlers, a rank ending the job through MPI, the
# last rank of the node to close, viarun after reaping) or, where every rank
# may be SIGKILLed before any of them can clean up, the next job. SIGKILL
# comes from the launcher when mpirun (right after SIGTERM) or srun ends a job
# on SIGTERM, and when Hydra ends a job whose rank has failed.
removed_by() {  # WAY CASE
  case $1:$2 in
    viarun:*) echo job ;;
    *:kill-all) echo next ;;
    mpirun:sigterm | srun-*:sigterm | hydra*:sigterm | hydra*:exit | hydra*:kill-one) echo next ;;
    *) echo job ;;
  esac
}

cleanup_checks() {  # WAY
  local way=$1 n=4 target=1 what args
  [ -x "$cleanup_probe" ] || {
    echo "SKIP: cleanup_probe is not built (viastack's MPI is not part of this build)"
    exit 77
  }
  [ "$way" = singleton ] && n=1 target=0
  plant_decoys
  start_job "$way" $n end && finish_job "$way" "every rank finalizes"
  [ "$rc" -eq 0 ] || fail "$way: the job ended with status $rc"
  expect_removed "$way" $n "a normal end" job
  for what in exit abort refuse sigterm kill-one kill-all; do
    [ $n -eq 1 ] && [ $what = kill-one ] && continue
    case $what in
      exit | abort | refuse) args=($what $target) ;;
      *) args=(wait) ;;
    esac
    start_job "$way" $n "${args[@]}" || continue
    case $what in
      sigterm) kill -TERM $job ;;
      kill-one) kill -KILL "${rank_pids[1]}" ;;
      kill-all) kill -KILL "${rank_pids[@]}" ;;
    esac
    finish_job "$way" "$what (cleanup_probe ${args[*]})"
    # Hydra 4.0.2's mpiexec, ended by SIGTERM, now and then exits with status 0.
    [ "$rc" -ne 0 ] || [[ $way:$what == hydra*:sigterm ]] || fail "$way, $what: the job ended with status 0"
    expect_removed "$way" $n "$what" "$(removed_by "$way" $what)"
  done
  check_decoys
}

for way in "${ways[@]}"; do
  case $mode in
    probe) probe_checks "$way" ;;
    programs) programs_checks "$way" ;;
    # Not across two proxies: Hydra 4.0.2's mpiexec then loses its link to the
    # failed rank's proxy (a write error, EBADF) and stops before it signals the
    # other one, so the job waits forever, whether or not the rank finalized.
    failure) [ "$way" = hydra-2hosts ] || failure_checks "$way" ;;
    netpipe) netpipe_checks "$way" ;;
    cleanup) cleanup_checks "$way" ;;
    *)
      echo "unknown mode $mode"
      exit 2
      ;;
  esac
done
[ $failures -eq 0 ] && echo "ok: $launcher $mode" || exit 1
