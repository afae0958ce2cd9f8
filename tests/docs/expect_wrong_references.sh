#!/usr/bin/env bash
# The checker's own test: run on a chapter with one wrong reference of each
# kind (fixtures/wrong-reference), check_course.sh must fail with status 1
# and name each of them, and nothing in the fenced block.
#   expect_wrong_references.sh REPO_ROOT
set -uo pipefail
root=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
output=$("$here/check_course.sh" "$root" "$here/fixtures/wrong-reference" 2>&1)
status=$?
failed=0
expect() {
  if ! grep -qF -- "$1" <<<"$output"; then
    echo "expected in check_course.sh's output: $1" >&2
    failed=1
  fi
}
[ "$status" -eq 1 ] || { echo "check_course.sh exited $status, expected 1" >&2; failed=1; }
expect 'chapter.md:4: `via/src/engine/vi.cpp:ViImpl::post_sned`: via/src/engine/vi.cpp has no function ViImpl::post_sned'
expect 'chapter.md:5: `via/src/engine/no_such_file.cpp:ViImpl::post_send`: no file via/src/engine/no_such_file.cpp'
expect 'chapter.md:6: `via/src/engine/no_such_file.hpp`: no such file'
expect 'chapter.md:7: diagrams/missing.svg: no such diagram'
expect 'orphan.dot: no'
expect 'check_course.sh: 5 of what the course names is missing'
if grep -q 'chapter.md:3:\|nothing' <<<"$output"; then
  echo "check_course.sh complained about a right reference or a fenced block" >&2
  failed=1
fi
[ "$failed" -eq 0 ] || { echo "--- its output:" >&2; echo "$output" >&2; exit 1; }
echo "expect_wrong_references.sh: check_course.sh found the 5 wrong references and nothing else"
