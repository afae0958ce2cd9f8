#!/usr/bin/env bash
# Regenerates every diagram of the course: docs/course/diagrams/NAME.dot ->
# NAME.svg, with Graphviz's dot (Debian: apt-get install graphviz). Commit
# the SVGs with their sources; tests/docs/check_course.sh checks that each
# .dot has its .svg.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v dot >/dev/null || { echo "render.sh: Graphviz's dot is missing (apt-get install graphviz)" >&2; exit 1; }
for source in "$here"/*.dot; do
  dot -Tsvg "$source" -o "${source%.dot}.svg"
  echo "rendered ${source%.dot}.svg"
done
