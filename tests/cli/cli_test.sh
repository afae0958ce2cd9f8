#!/usr/bin/env bash
# The command lines users meet: every program answers --help (usage on stdout,
# status 0) and --version (status 0, the version), and a bad command line gets
# its reason and the usage on stderr with status 2, never a crash or a hang.
#
#   cli_test.sh BIN_DIR VERSION
set -uo pipefail
bin=${1:?usage: cli_test.sh BIN_DIR VERSION}
version=${2:?usage: cli_test.sh BIN_DIR VERSION}
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run PROGRAM ARGS...: sets out, err, rc (bounded: a hang is a failure).
run() {
  local o e
  o=$(mktemp) e=$(mktemp)
  timeout 20 "$@" > "$o" 2> "$e"
  rc=$?
  out=$(cat "$o") err=$(cat "$e")
  rm -f "$o" "$e"
}

# A program's standard options, and one unknown option.
check_program() {  # NAME [VERSION_TEXT]
  local name=$1 expected_version=${2:-$version} p=$bin/$1
  [ -x "$p" ] || {
    fail "$name is not built"
    return
  }
  for help in --help -h; do
    run "$p" $help
    [ $rc -eq 0 ] && [[ $out == usage:* ]] || fail "$name $help: status $rc, stdout '${out:0:60}'"
  done
  run "$p" --version
  [ $rc -eq 0 ] && grep -qF -- "$expected_version" <<< "$out" ||
    fail "$name --version: status $rc, '$out' does not name $expected_version"
  run "$p" --no-such-option
  [ $rc -eq 2 ] && grep -q "no-such-option" <<< "$err" && grep -q "usage:" <<< "$err" ||
    fail "$name --no-such-option: status $rc (expected 2 with the reason and the usage on stderr): '${err:0:120}'"
}

# bad_line NAME ARGS...: status 2, the usage on stderr.
bad_line() {
  local name=$1
  shift
  run "$bin/$name" "$@"
  [ $rc -eq 2 ] && grep -q "usage:" <<< "$err" || fail "$name $*: status $rc, expected 2 and the usage: '${err:0:160}'"
}

for program in viarun via_pingpong am_bench utcp_bench splitc_suite; do check_program $program; done
check_program mpi_pingpong "viastack MPI"
run "$bin/viarun" --version
grep -q "providers: shm tcp mixed" <<< "$out" || fail "viarun --version does not list the providers: '$out'"

bad_line viarun -n 0 true
bad_line viarun -n 100000 true
bad_line viarun -n -3 true
bad_line viarun -n 2 --timeout -1 true
bad_line viarun -n 2 --timeout abc true
bad_line viarun -n
bad_line viarun -n 2
bad_line viarun -n 2 --provider carrier-pigeon true
for bench in via_pingpong am_bench mpi_pingpong; do
  bad_line $bench --sizes
  bad_line $bench --sizes 8,x
  bad_line $bench --iters 0
  bad_line $bench --iters -5
done
for bench in via_pingpong am_bench mpi_pingpong; do
  bad_line $bench --window 0
  bad_line $bench --window many
  bad_line $bench --window
done
bad_line via_pingpong --mode sideways
bad_line via_pingpong --nhalf --mode lat
bad_line via_pingpong --nhalf --summary
bad_line am_bench --test sideways
bad_line am_bench --window 2000
bad_line am_bench --nhalf --test rtt
bad_line mpi_pingpong --mode sideways
bad_line mpi_pingpong --window 5000
bad_line mpi_pingpong --nhalf --mode lat
bad_line utcp_bench --port 70000
bad_line utcp_bench --proto sctp
bad_line splitc_suite --bench nosuch
bad_line splitc_suite --size huge

[ $failures -eq 0 ] && echo "ok: every program's command line" || exit 1
