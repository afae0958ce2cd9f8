#!/usr/bin/env bash
# The main job: build in Release, then run the demo on 4 local ranks over shm.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_missing_packages "${REQUIRED_PACKAGES[@]}"
configure_and_build "$ROOT/build"
BIN=$ROOT/build/bin

echo
echo "== VIA ping-pong, 4 ranks on the shm provider (ranks 0 and 1 measure) =="
"$BIN/viarun" -n 4 --provider shm --timeout 120 -- "$BIN/via_pingpong" --summary

echo
echo "== Split-C suite, 4 ranks on the shm provider (speed-up over the 1-rank run just before) =="
baseline=$(mktemp)
"$BIN/viarun" -n 1 --provider shm --timeout 600 -- "$BIN/splitc_suite" --size test --json >"$baseline"
"$BIN/viarun" -n 4 --provider shm --timeout 600 -- "$BIN/splitc_suite" --size test --baseline "$baseline"
rm -f "$baseline"
