#!/usr/bin/env bash
# The tests: the same set-up, then the whole suite through ctest, in Release and
# in an AddressSanitizer+UndefinedBehaviorSanitizer build; the unit tests under
# ThreadSanitizer; then the fuzz targets for a bounded time.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_missing_packages "${REQUIRED_PACKAGES[@]}" "${FUZZ_PACKAGES[@]}" "${MPI_PACKAGES[@]}" "${TRACE_PACKAGES[@]}" \
  "${PRELOAD_TOOL_PACKAGES[@]}" \
  "${LAUNCHER_PACKAGES[@]}"

# run_suite DIR TIMEOUT [CTEST ARGS...]: the tests of build DIR. The launcher
# tests drive outside launchers that now and then fail on their own (Hydra
# 4.0.2's proxies assert on a closed socket; its mpiexec, ended by SIGTERM,
# may exit 0): when every failed test is one of those, each gets one more run.
# Any other failure fails the suite.
run_suite() {
  local dir=$1 timeout=$2 failed=$1/Testing/Temporary/LastTestsFailed.log
  shift 2
  rm -f "$failed"  # ctest writes it only when tests fail: an old one must not be read as this run's
  (cd "$dir" && ctest --output-on-failure -j "$JOBS" --timeout "$timeout" "$@") && return 0
  [ -s "$failed" ] && ! grep -qv '^[0-9]*:launcher_' "$failed" || return 1
  echo "only launcher tests failed ($(cut -d: -f2 "$failed" | tr '\n' ' ')): running them once more"
  (cd "$dir" && ctest --output-on-failure --timeout "$timeout" --rerun-failed)
}

configure_and_build "$ROOT/build"
run_suite "$ROOT/build" 300

if [ "${VIASTACK_SKIP_SANITIZERS:-0}" != 1 ]; then
  configure_and_build "$ROOT/build-asan" -DVIASTACK_SANITIZE=address,undefined
  run_suite "$ROOT/build-asan" 600
fi

if [ "${VIASTACK_SKIP_SANITIZERS:-0}" != 1 ]; then
  # ThreadSanitizer where threads meet: the tests that drive NICs from several threads.
  configure_and_build "$ROOT/build-tsan" -DVIASTACK_SANITIZE=thread
  run_suite "$ROOT/build-tsan" 600 -L unit
fi

if [ "${VIASTACK_SKIP_FUZZ:-0}" != 1 ]; then
  configure_and_build "$ROOT/build-fuzz" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DVIASTACK_FUZZ=ON -DVIASTACK_SANITIZE=address,undefined -DBUILD_TESTING=OFF -- fuzzers
  for target in "$ROOT"/build-fuzz/bin/*_fuzz; do
    corpus=$(mktemp -d)
    echo "fuzzing $(basename "$target") for ${FUZZ_SECONDS:-60} s"
    "$target" -max_total_time="${FUZZ_SECONDS:-60}" -max_len=4096 -print_final_stats=1 "$corpus" 2>&1 | tail -n 3
    rm -rf "$corpus"
  done
fi
