# shellcheck shell=bash
# checker_lib.sh: what the exercises' checkers share (sourced by each check.sh).
#
# A checker is run as   check.sh PROGRAM [VIARUN]
# and ends with one line: "PASS: ..." (status 0) or "FAIL: reason" (status 1);
# status 2 when it cannot run at all (no such program, no viarun). VIARUN
# defaults to $VIARUN, else the viarun beside PROGRAM (a build tree's bin
# folder), else the one on the PATH.

# checker_setup NAME "$@": sets $program and $viarun from the arguments.
checker_setup() {
  local name=$1
  shift
  if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "$1" = --help ]; then
    echo "usage: check.sh PROGRAM [VIARUN]   (the checker of exercise $name)" >&2
    exit 2
  fi
  program=$1
  viarun=${2:-${VIARUN:-}}
  if [ -z "$viarun" ]; then
    if [ -x "$(dirname "$program")/viarun" ]; then
      viarun=$(dirname "$program")/viarun
    else
      viarun=$(command -v viarun)
    fi
  fi
  [ -x "$program" ] || { echo "check.sh: no program '$program' (build it first)" >&2; exit 2; }
  if [ -z "$viarun" ] || [ ! -x "$viarun" ]; then
    echo "check.sh: no viarun (give it as the second argument, or set VIARUN)" >&2
    exit 2
  fi
}

fail() {
  echo "FAIL: $*"
  exit 1
}

# run_job RANKS TIMEOUT_S [VAR=value...] -- ARGS...: runs the program on RANKS
# ranks under viarun, with the variables set, at most TIMEOUT_S seconds.
# Sets $job_output (stdout and stderr) and $job_status; the job's first lines
# are shown as it went, so that a failure can be read in the test's log.
run_job() {
  local ranks=$1 timeout=$2
  shift 2
  local variables=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    variables+=("$1")
    shift
  done
  shift
  echo "---${variables[*]:+ ${variables[*]}} viarun -n $ranks $(basename "$program") $*"
  job_output=$(env "${variables[@]}" "$viarun" -n "$ranks" --timeout "$timeout" -- "$program" "$@" 2>&1)
  job_status=$?
  printf '%s\n' "$job_output" | head -n 20
}

# job_failure: why the last job failed, in a few words.
job_failure() {
  case $job_status in
    124) echo "the job did not end within its time limit (a deadlock, or a peer waiting forever)" ;;
    *) echo "the job ended with status $job_status" ;;
  esac
}
