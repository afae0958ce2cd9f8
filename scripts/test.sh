#!/usr/bin/env bash
# The tests: the same set-up, then the whole suite through ctest, in Release and
# in an AddressSanitizer+UndefinedBehaviorSanitizer build.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_missing_packages "${REQUIRED_PACKAGES[@]}"

configure_and_build "$ROOT/build"
(cd "$ROOT/build" && ctest --output-on-failure -j "$JOBS" --timeout 300)

if [ "${VIASTACK_SKIP_SANITIZERS:-0}" != 1 ]; then
  configure_and_build "$ROOT/build-asan" -DVIASTACK_SANITIZE=address,undefined
  (cd "$ROOT/build-asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -j "$JOBS" --timeout 600 -LE no-sanitizer)
fi
