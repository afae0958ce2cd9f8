#!/usr/bin/env bash
# Checks that the course (docs/course/*.md) points at things that exist:
#   - every `path/to/file.ext:function` reference: the file exists in the
#     repository and defines or declares that function there (`name(`;
#     `Scope::name` also when the file has `class|struct|namespace Scope` and
#     `name(`, which is how a member defined inside its class reads);
#   - every `path/to/file.ext` under one of the repository's top folders exists;
#   - every image or link to an .svg exists, next to the chapter that names it;
#   - every diagram source diagrams/NAME.dot has its NAME.svg and the other
#     way round (render.sh makes one from the other).
# Fenced code blocks are skipped: they hold commands, not references.
#
#   check_course.sh REPO_ROOT [COURSE_DIR]     (COURSE_DIR: REPO_ROOT/docs/course)
#
# Exit status: 0 all found; 1 something named is missing (one line each on
# stderr, FILE:LINE first); 2 bad usage.
set -uo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -d "$1" ]; then
  echo "usage: check_course.sh REPO_ROOT [COURSE_DIR]" >&2
  exit 2
fi
root=$(cd "$1" && pwd)
course=${2:-$root/docs/course}
if [ ! -d "$course" ]; then
  echo "check_course.sh: no course folder $course" >&2
  exit 2
fi

top_folders='via|am|splitc|mpi|tcp|tests|examples|benchmarks|scripts|docs|cmake|course|tools'
extensions='c|h|cc|cpp|hpp|sh|py|cmake|txt|lua|dot|md|gdb'
errors=0 references=0 files=0 images=0

complain() {
  echo "$1" >&2
  errors=$((errors + 1))
}

# The chapter with the lines of its fenced code blocks blanked, so that line
# numbers stay right.
prose() {
  awk '/^[[:space:]]*```/ { fenced = !fenced; print ""; next } { print fenced ? "" : $0 }' "$1"
}

# Whether `file` defines or declares function `name` (maybe Scope::name).
has_function() {
  local file=$1 name=$2
  grep -qP "(?<![A-Za-z0-9_:])\Q${name}\E\s*\(" "$file" && return 0
  [[ $name == *::* ]] || return 1
  local member=${name##*::}
  local scope=${name%::*}
  scope=${scope##*::}
  grep -qP "\b(class|struct|namespace)\s+\Q${scope}\E\b" "$file" &&
    grep -qP "(?<![A-Za-z0-9_])\Q${member}\E\s*\(" "$file"
}

shopt -s nullglob
chapters=("$course"/*.md)
if [ ${#chapters[@]} -eq 0 ]; then
  echo "check_course.sh: no chapters (*.md) in $course" >&2
  exit 1
fi

for chapter in "${chapters[@]}"; do
  shown=${chapter#"$root"/}
  text=$(prose "$chapter")
  # `file:function` and `file` spans.
  while IFS=: read -r line span; do
    span=${span#\`}
    span=${span%\`}
    if [[ $span =~ ^(($top_folders)/[A-Za-z0-9_.+/-]*\.($extensions)):([A-Za-z_~][A-Za-z0-9_~]*(::[A-Za-z_~][A-Za-z0-9_~]*)*)$ ]]; then
      path=${BASH_REMATCH[1]} name=${BASH_REMATCH[4]}
      references=$((references + 1))
      if [ ! -f "$root/$path" ]; then
        complain "$shown:$line: \`$span\`: no file $path"
      elif ! has_function "$root/$path" "$name"; then
        complain "$shown:$line: \`$span\`: $path has no function $name"
      fi
    elif [[ $span =~ ^(($top_folders)/[A-Za-z0-9_.+/-]*\.($extensions))$ ]]; then
      files=$((files + 1))
      [ -f "$root/$span" ] || complain "$shown:$line: \`$span\`: no such file"
    fi
  done < <(grep -noP '`[^`]+`' <<<"$text")
  # Diagrams: ](something.svg) links and images.
  while IFS=: read -r line target; do
    target=${target#](}
    target=${target%)}
    images=$((images + 1))
    [ -f "$(dirname "$chapter")/$target" ] || complain "$shown:$line: $target: no such diagram"
  done < <(grep -noP '\]\([^)[:space:]]+\.svg\)' <<<"$text")
done

for source in "$course"/diagrams/*.dot; do
  [ -f "${source%.dot}.svg" ] || complain "${source#"$root"/}: no $(basename "${source%.dot}").svg beside it (run diagrams/render.sh)"
done
for svg in "$course"/diagrams/*.svg; do
  [ -f "${svg%.svg}.dot" ] || complain "${svg#"$root"/}: no Graphviz source $(basename "${svg%.svg}").dot beside it"
done

if [ "$errors" -gt 0 ]; then
  echo "check_course.sh: $errors of what the course names is missing" >&2
  exit 1
fi
echo "check_course.sh: ${#chapters[@]} chapters: $references file:function references, $files files, $images diagrams, all found"
