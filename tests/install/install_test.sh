#!/usr/bin/env bash
# viastack as a user installs it and builds against it.
#
#   install_test.sh CASE BUILD_DIR SOURCE_DIR
#
#   examples          `cmake --install` into a temporary prefix, which is then
#                     moved elsewhere (the tree must be relocatable: no path of
#                     the build or source tree in it, every RUNPATH $ORIGIN-
#                     relative); every program of examples.list built out of
#                     tree twice, through find_package(viastack) and through
#                     pkg-config and the compiler (MPI programs also with the
#                     installed viampicc), and each run under the installed viarun.
#   bad-input         find_package with a component that does not exist, or a
#                     version it is not compatible with; pkg-config with a
#                     dependency missing; `cmake --install` without a prefix.
#                     Each fails with a message naming the problem.
#   unwritable-prefix `cmake --install` into a prefix it cannot write fails,
#                     naming the folder, and installs nothing. Root can write
#                     anywhere, so as root the install runs as the user nobody
#                     (setpriv); skipped (77) when that cannot be done.
#   debian            `cpack -G DEB` makes viastack, viastack-dev and viastack-bin,
#                     with the files and dependencies each should have.
#   fresh-debian      those packages installed on a fresh Debian 12 (a chroot)
#                     and every example built and run there; only when
#                     VIASTACK_FRESH_DEBIAN is set (see case_fresh_debian).
#   fresh-debian-course  a teacher on a fresh Debian 12: a clean clone of the
#                     source, the README's first command, then exercise (a) of
#                     the course as its README says; only when
#                     VIASTACK_FRESH_DEBIAN is set (see case_fresh_debian_course).
#
# The compilers and generator are the build's (CC, CXX and CMAKE_GENERATOR in
# the environment, from ctest); VIASTACK_SANITIZE, when set, is passed to the
# compilers, since a sanitized library needs sanitized programs.
set -uo pipefail
case_name=$1 build_dir=$2 source_dir=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
mounts=()  # what case_fresh_debian mounted in its chroot, undone before removing $work
trap '[ ${#mounts[@]} -eq 0 ] || umount "${mounts[@]}"; chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
sanitize_flags=()
[ -n "${VIASTACK_SANITIZE:-}" ] && sanitize_flags=("-fsanitize=$VIASTACK_SANITIZE")

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect_failure WHAT PATTERN command...: the command fails and its output
# matches the (extended) regular expression PATTERN.
expect_failure() {
  local what=$1 pattern=$2
  shift 2
  local out status joined
  out=$("$@" 2>&1)
  status=$?
  # CMake wraps its messages: the pattern is looked for across lines.
  joined=$(tr -s ' \n' '  ' <<<"$out")
  if [ $status -eq 0 ]; then
    fail "$what: succeeded"
  elif ! grep -qE -- "$pattern" <<<"$joined"; then
    fail "$what: status $status but no /$pattern/ in:"
    echo "$out"
  else
    echo "ok: $what fails: ...$(grep -oE -m1 -- "$pattern" <<<"$joined")..."
  fi
}

# install_into PREFIX: the build's install into PREFIX, quietly.
install_into() {
  local out
  out=$(cmake --install "$build_dir" --prefix "$1" 2>&1) || {
    echo "$out"
    echo "FAIL: cmake --install $build_dir --prefix $1"
    exit 1
  }
}

# The programs of examples.list: "name source component libraries ranks args...".
examples() {
  grep -v -e '^#' -e '^[[:space:]]*$' "$here/examples.list"
}

# link_flags LIBRARIES: the -l flags for the list's "libraries" column (a,b or -).
link_flags() {
  [ "$1" = - ] || tr , '\n' <<<"$1" | sed 's/^/-l/'
}

# check_relocatable PREFIX: nothing in the tree names the build or source tree,
# and every ELF file's RUNPATH finds libraries from its own folder. A sanitizer
# build is the exception for the source tree: the compiler writes each
# instrumented file's absolute path into the object for its reports, and no
# prefix map removes it (GCC 12).
check_relocatable() {
  local prefix=$1 file runpath failures_before=$failures trees=("$build_dir")
  [ -n "${VIASTACK_SANITIZE:-}" ] || trees+=("$source_dir")
  for tree in "${trees[@]}"; do
    if grep -rlF -- "$tree" "$prefix" >"$work/leaks"; then
      fail "installed files name $tree:"
      cat "$work/leaks"
    fi
  done
  while IFS= read -r file; do
    head -c 4 "$file" | grep -q ELF || continue
    runpath=$(readelf -d "$file" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
    # shellcheck disable=SC2016 # $ORIGIN is the loader's, not the shell's
    case ":$runpath:" in
      *':$ORIGIN'*) ;;
      *) fail "${file#"$prefix"/} has RUNPATH '$runpath', not \$ORIGIN-relative" ;;
    esac
  done < <(find "$prefix/bin" "$prefix/lib" -type f)
  [ $failures -eq "$failures_before" ] && echo "ok: relocatable (no build or source path, \$ORIGIN RUNPATHs)"
}

# run_example PREFIX EXECUTABLE RANKS ARGS...: under the installed viarun.
run_example() {
  local prefix=$1 exe=$2 ranks=$3
  shift 3
  local out
  if out=$("$prefix/bin/viarun" -n "$ranks" --timeout 60 -- "$exe" "$@" 2>&1); then
    echo "ok: ran ${exe#"$work"/} on $ranks ranks"
  else
    fail "viarun -n $ranks ${exe#"$work"/} $*:"
    echo "$out"
  fi
}

case_examples() {
  # Installed in one place and used from another: relocatable or it fails.
  install_into "$work/staging"
  mv "$work/staging" "$work/prefix"
  local prefix=$work/prefix
  check_relocatable "$prefix"

  # Through the CMake package.
  if ! cmake -S "$here/consumer" -B "$work/cmake-build" -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_PREFIX_PATH="$prefix" -DEXAMPLES_LIST="$here/examples.list" -DEXAMPLES_SOURCE_DIR="$source_dir" \
         -DCMAKE_C_FLAGS="${sanitize_flags[*]}" -DCMAKE_CXX_FLAGS="${sanitize_flags[*]}" \
         >"$work/cmake.log" 2>&1 ||
     ! cmake --build "$work/cmake-build" >>"$work/cmake.log" 2>&1; then
    cat "$work/cmake.log"
    fail "the examples do not build through find_package(viastack)"
  fi

  # Through pkg-config and the compiler, as a Makefile would.
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  mkdir -p "$work/pkg-config-build"
  local name source component libraries ranks args compiler flags
  while read -r name source component libraries ranks args; do
    case $source in
      *.c) compiler=${CC:-cc} flags=() ;;
      # pkg-config has no per-language flags: C++ users ask for C++20 themselves.
      *) compiler=${CXX:-c++} flags=(-std=c++20) ;;
    esac
    # shellcheck disable=SC2046 # pkg-config's and link_flags' outputs are lists of flags
    if ! $compiler "${flags[@]}" "${sanitize_flags[@]}" -O2 -o "$work/pkg-config-build/$name" "$source_dir/$source" \
           $(pkg-config --cflags --libs "viastack-$component") $(link_flags "$libraries") >"$work/cc.log" 2>&1; then
      cat "$work/cc.log"
      fail "$name does not build through pkg-config viastack-$component"
    fi
  done < <(examples)

  # MPI programs also through the installed viampicc/viampicxx, which find the
  # library from their own folder.
  mkdir -p "$work/viampicc-build"
  while read -r name source component libraries ranks args; do
    [ "$component" = mpi ] || continue
    case $source in
      *.c) compiler=viampicc ;;
      *) compiler=viampicxx ;;
    esac
    # shellcheck disable=SC2046 # link_flags' output is a list of flags
    if ! "$prefix/bin/$compiler" "${sanitize_flags[@]}" -O2 -o "$work/viampicc-build/$name" "$source_dir/$source" \
           $(link_flags "$libraries") >"$work/cc.log" 2>&1; then
      cat "$work/cc.log"
      fail "$name does not build with the installed $compiler"
    fi
  done < <(examples)

  while read -r name source component libraries ranks args; do
    local routes=(cmake-build pkg-config-build)
    [ "$component" = mpi ] && routes+=(viampicc-build)
    for built in "${routes[@]}"; do
      # shellcheck disable=SC2086 # the arguments are words
      if [ -x "$work/$built/$name" ]; then
        run_example "$prefix" "$work/$built/$name" "$ranks" $args
      else
        fail "$built/$name was not built"
      fi
    done
  done < <(examples)
}

# configure_consumer PREFIX DIR FIND_PACKAGE_ARGS: a one-line project that asks
# for the viastack installed in PREFIX.
configure_consumer() {
  local prefix=$1 dir=$2 find_args=$3
  mkdir -p "$dir"
  printf 'cmake_minimum_required(VERSION 3.25)\nproject(consumer LANGUAGES C CXX)\nfind_package(viastack %s)\n' \
    "$find_args" >"$dir/CMakeLists.txt"
  cmake -S "$dir" -B "$dir/build" -DCMAKE_PREFIX_PATH="$prefix"
}

case_bad_input() {
  local prefix=$work/prefix
  install_into "$prefix"
  expect_failure "find_package with a component that does not exist" \
    'viastack 0\.2\.[0-9]+ has no component nosuch; its components are: via, am, utcp, preload, (mpi, )?splitc' \
    configure_consumer "$prefix" "$work/unknown-component" "0.2 REQUIRED COMPONENTS via nosuch"
  expect_failure "find_package of an incompatible version" \
    'compatible with requested version "0\.1"' \
    configure_consumer "$prefix" "$work/old-version" "0.1 REQUIRED COMPONENTS via"
  # The components that exist are found; a control for the two above.
  if ! configure_consumer "$prefix" "$work/good" "0.2 REQUIRED COMPONENTS via am splitc utcp" >"$work/good.log" 2>&1; then
    cat "$work/good.log"
    fail "find_package(viastack 0.2 REQUIRED COMPONENTS via am splitc utcp)"
  fi

  mv "$prefix/lib/pkgconfig/viastack-via.pc" "$work/"
  expect_failure "pkg-config of viastack-am without viastack-via" \
    "'viastack-via', required by 'viastack-am', not found" \
    env PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs viastack-am
  expect_failure "cmake --install without a prefix" \
    "Invalid value used with --prefix" \
    cmake --install "$build_dir" --prefix
}

case_unwritable_prefix() {
  local prefix=$work/read-only-prefix
  mkdir -p "$prefix"
  chmod 555 "$prefix"
  local as_user=()
  if [ "$(id -u)" -eq 0 ]; then
    # Root writes anywhere, so the install runs as nobody, who needs to read the build tree.
    if ! command -v setpriv >/dev/null; then
      echo "SKIP: running as root and setpriv (util-linux) is missing, so nothing is unwritable"
      exit 77
    fi
    as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    if ! "${as_user[@]}" test -r "$build_dir/cmake_install.cmake"; then
      echo "SKIP: running as root, and nobody cannot read $build_dir to install as another user"
      exit 77
    fi
    chmod 755 "$work"
  fi
  expect_failure "cmake --install into an unwritable prefix" \
    "cannot create directory: $prefix/" \
    "${as_user[@]}" cmake --install "$build_dir" --prefix "$prefix"
  [ -z "$(ls -A "$prefix")" ] || fail "files were installed into the unwritable prefix: $(ls -A "$prefix")"
}

# deb_has PACKAGE FILE...: the package lists each FILE (a path under /usr).
deb_has() {
  local deb=$1
  shift
  dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$work/contents"
  for file in "$@"; do
    grep -qxF -- "$file" "$work/contents" || fail "$(basename "$deb") lacks $file"
  done
}

# deb_depends_on PACKAGE REGEX: its Depends field matches.
deb_depends_on() {
  local depends
  depends=$(dpkg-deb -f "$1" Depends)
  grep -qE -- "$2" <<<"$depends" || fail "$(basename "$1") Depends '$depends' lacks /$2/"
}

# make_packages: `cpack -G DEB` into $work/packages; sets runtime, dev and bin
# to the three packages' files, or fails and returns 1.
make_packages() {
  if ! (cd "$work" && cpack -G DEB --config "$build_dir/CPackConfig.cmake" -B "$work/packages" >"$work/cpack.log" 2>&1); then
    cat "$work/cpack.log"
    fail "cpack -G DEB"
    return 1
  fi
  runtime=$(ls "$work"/packages/viastack_*.deb 2>/dev/null)
  dev=$(ls "$work"/packages/viastack-dev_*.deb 2>/dev/null)
  bin=$(ls "$work"/packages/viastack-bin_*.deb 2>/dev/null)
  if [ -z "$runtime" ] || [ -z "$dev" ] || [ -z "$bin" ]; then
    fail "expected viastack, viastack-dev and viastack-bin; made: $(ls "$work/packages")"
    return 1
  fi
}

case_debian() {
  local runtime dev bin
  make_packages || return
  local version
  version=$(dpkg-deb -f "$runtime" Version)
  deb_has "$runtime" /usr/lib/libviastack-via.so.0 /usr/lib/libviastack-am.so.0 /usr/lib/libviastack-splitc.so.0 \
    /usr/lib/libviastack-utcp.so.0 /usr/lib/libviastack-preload.so.0 /usr/lib/libviastack-via.so."$version" \
    /usr/share/doc/viastack/README.md
  deb_has "$dev" /usr/include/vipl.h /usr/include/am.h /usr/include/via/via.hpp /usr/include/am/am.hpp \
    /usr/include/splitc/splitc.hpp /usr/include/utcp/stack.hpp /usr/lib/libviastack-via.so \
    /usr/lib/cmake/viastack/viastack-config.cmake /usr/lib/cmake/viastack/viastack-config-version.cmake \
    /usr/lib/cmake/viastack/viastack-targets.cmake \
    /usr/lib/pkgconfig/viastack-via.pc /usr/lib/pkgconfig/viastack-am.pc /usr/lib/pkgconfig/viastack-splitc.pc \
    /usr/lib/pkgconfig/viastack-utcp.pc
  deb_has "$bin" /usr/bin/viarun /usr/bin/via_pingpong /usr/bin/am_bench /usr/bin/utcp_bench /usr/bin/splitc_suite
  # The libraries' own dependencies, found by dpkg-shlibdeps, and the packages' on each other.
  deb_depends_on "$runtime" 'libc6'
  deb_depends_on "$runtime" 'libssl3'
  deb_depends_on "$runtime" 'libpmix2'
  deb_depends_on "$dev" "(^|, )viastack \\(= $version\\)"
  deb_depends_on "$bin" "(^|, )viastack \\(= $version\\)"
  # Our libmpi.so.40 replaces Open MPI's: only the headers come from Open MPI.
  for deb in "$runtime" "$bin"; do
    dpkg-deb -f "$deb" Depends | grep -q libopenmpi && fail "$(basename "$deb") depends on Open MPI: $(dpkg-deb -f "$deb" Depends)"
  done
  if [ -e "$build_dir/lib/libmpi.so.40" ]; then
    deb_has "$runtime" /usr/lib/viastack-mpi/libmpi.so.40
    deb_has "$dev" /usr/lib/viastack-mpi/libmpi.so /usr/lib/pkgconfig/viastack-mpi.pc /usr/bin/viampicc /usr/bin/viampicxx
    deb_has "$bin" /usr/bin/mpi_pingpong
    deb_depends_on "$dev" 'libopenmpi-dev'
  fi
  # Nothing in a package belongs to another.
  for deb in "$runtime" "$dev" "$bin"; do
    dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}'
  done | sort | uniq -d >"$work/duplicates"
  [ -s "$work/duplicates" ] && fail "files in more than one package: $(cat "$work/duplicates")"
  for deb in "$runtime" "$dev" "$bin"; do
    echo "ok: $(dpkg-deb -f "$deb" Package) $version, $(dpkg-deb -c "$deb" | grep -vc '^d') files, Depends: $(dpkg-deb -f "$deb" Depends)"
  done
}

# The packages on a fresh Debian 12: debootstrap's minimal system in a
# chroot, the three packages installed with apt-get (which fetches their
# dependencies, so the network must reach a Debian mirror), then every program
# of examples.list built from the installed example sources with pkg-config
# (MPI ones with viampicc) and run under the installed viarun, and a CMake
# project through find_package. Needs root and debootstrap, and minutes: it
# runs only when VIASTACK_FRESH_DEBIAN is set (to 1, or to a chroot made by an
# earlier run, to reuse it); skipped (77) otherwise.
debian_mirror=http://deb.debian.org/debian

# require_fresh_debian WHAT: skips (77), saying why, unless VIASTACK_FRESH_DEBIAN
# is set, we are root with debootstrap, and the Debian mirror answers.
require_fresh_debian() {
  if [ -z "${VIASTACK_FRESH_DEBIAN:-}" ]; then
    echo "SKIP: set VIASTACK_FRESH_DEBIAN=1 (needs root, debootstrap and a Debian mirror; $1)"
    exit 77
  fi
  if [ "$(id -u)" -ne 0 ] || ! command -v debootstrap >/dev/null; then
    echo "SKIP: a fresh Debian chroot needs root and debootstrap"
    exit 77
  fi
  local host=${debian_mirror#http://}
  host=${host%%/*}
  if ! timeout 10 bash -c "exec 3<>/dev/tcp/$host/80" 2>/dev/null; then
    echo "SKIP: the Debian mirror $debian_mirror does not answer (no network?)"
    exit 77
  fi
}

# debootstrap_into ROOT: a minimal Debian 12 there, or fails and returns 1.
debootstrap_into() {
  debootstrap --variant=minbase bookworm "$1" "$debian_mirror" >"$work/debootstrap.log" 2>&1 && return 0
  tail -n 20 "$work/debootstrap.log"
  fail "debootstrap bookworm"
  return 1
}

# enter_chroot ROOT: its name server, /proc and a /dev/shm of its own mounted
# (undone on exit), or fails and returns 1.
enter_chroot() {
  local root=$1 before=${#mounts[@]}
  mkdir -p "$root/dev/shm"
  cp /etc/resolv.conf "$root/etc/"
  if mount -t proc proc "$root/proc"; then mounts+=("$root/proc"); fi
  if mount -t tmpfs shm "$root/dev/shm"; then mounts=("$root/dev/shm" "${mounts[@]}"); fi
  if [ ${#mounts[@]} -ne $((before + 2)) ]; then
    fail "mounting /proc and /dev/shm in $root"
    return 1
  fi
}

case_fresh_debian() {
  require_fresh_debian "a few minutes"
  local runtime dev bin root=$VIASTACK_FRESH_DEBIAN
  make_packages || return
  if [ "$root" = 1 ]; then
    root=$work/bookworm
    debootstrap_into "$root" || return
  fi
  mkdir -p "$root/debs" && cp "$runtime" "$dev" "$bin" "$root/debs/"
  enter_chroot "$root" || return
  # The chroot script: examples.list's lines on its standard input.
  cat >"$root/tmp/fresh_debian.sh" <<'SCRIPT'
set -u
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq && apt-get install -y -qq /debs/*.deb g++ cmake pkg-config >/tmp/apt.log 2>&1 ||
  { tail -n 20 /tmp/apt.log; echo "FAIL: apt-get install of the packages"; exit 1; }
examples=/usr/share/doc/viastack/examples failures=0
mkdir -p /tmp/built && cd /tmp/built
while read -r name source component libraries ranks args; do
  source=$examples/${source#examples/}
  libs=(); [ "$libraries" = - ] || read -ra libs <<<"$(tr , '\n' <<<"$libraries" | sed 's/^/-l/' | tr '\n' ' ')"
  case $component:$source in
    mpi:*) build=(viampicc -O2 -o "$name" "$source" "${libs[@]}") ;;
    *.c) build=(cc -O2 -o "$name" "$source" $(pkg-config --cflags --libs "viastack-$component") "${libs[@]}") ;;
    *) build=(c++ -std=c++20 -O2 -o "$name" "$source" $(pkg-config --cflags --libs "viastack-$component")) ;;
  esac
  if ! "${build[@]}" >/tmp/cc.log 2>&1; then
    cat /tmp/cc.log; echo "FAIL: $name does not build: ${build[*]}"; failures=$((failures + 1)); continue
  fi
  # shellcheck disable=SC2086 # the arguments are words
  if viarun -n "$ranks" --timeout 60 -- "./$name" $args >/tmp/run.log 2>&1; then
    echo "ok: $name built and ran on $ranks ranks"
  else
    tail -n 20 /tmp/run.log; echo "FAIL: viarun -n $ranks $name $args"; failures=$((failures + 1))
  fi
done
mkdir -p /tmp/consumer && cd /tmp/consumer && cp "$examples/splitc_basics.cpp" "$examples/example_options.h" "$examples/mpi/ring.c" .
printf '%s\n' 'cmake_minimum_required(VERSION 3.25)' 'project(consumer C CXX)' \
  'find_package(viastack 0.2 REQUIRED COMPONENTS via am splitc utcp mpi)' \
  'add_executable(splitc_basics splitc_basics.cpp)' 'target_compile_features(splitc_basics PRIVATE cxx_std_20)' \
  'target_link_libraries(splitc_basics PRIVATE viastack::splitc)' \
  'add_executable(ring ring.c)' 'target_link_libraries(ring PRIVATE viastack::mpi)' >CMakeLists.txt
if cmake -S . -B build >/tmp/cmake.log 2>&1 && cmake --build build >>/tmp/cmake.log 2>&1 &&
   viarun -n 3 build/splitc_basics >/dev/null 2>&1 && viarun -n 3 build/ring >/dev/null 2>&1; then
  echo "ok: a CMake project through find_package(viastack) built and ran"
else
  tail -n 20 /tmp/cmake.log; echo "FAIL: the CMake project through find_package(viastack)"; failures=$((failures + 1))
fi
exit $((failures != 0))
SCRIPT
  examples | chroot "$root" bash /tmp/fresh_debian.sh || fail "on a fresh Debian 12 (above)"
}

# The course's quality bar (issue 20): a teacher with a fresh Debian 12
# machine runs exercise (a) from the text alone. In a debootstrap chroot, a
# clean clone of SOURCE_DIR (its HEAD: what a teacher gets, no build tree, no
# uncommitted change) runs the README's first command as the README writes
# it, then each step of course/exercises/reliable_stream/README.md: the
# student's build and checker on the skeleton, which must fail as the text
# shows, then the reference solution, which must pass. Each command is taken
# only if the text still says it, so the test follows the text. Needs root,
# debootstrap, git and a Debian mirror, and a full build (17 min on 2 busy
# cores): only when VIASTACK_FRESH_DEBIAN is set (to 1, or to a fresh
# debootstrap root, which is copied, not changed); skipped (77) otherwise.
case_fresh_debian_course() {
  require_fresh_debian "a full build: about 20 minutes on 2 cores"
  if ! git -C "$source_dir" rev-parse --verify -q HEAD >/dev/null; then
    echo "SKIP: $source_dir is not a git clone, and the teacher's copy is a clone"
    exit 77
  fi
  local root=$work/bookworm
  if [ "$VIASTACK_FRESH_DEBIAN" = 1 ]; then
    debootstrap_into "$root" || return
  else
    cp -a "$VIASTACK_FRESH_DEBIAN" "$root" || { fail "copying $VIASTACK_FRESH_DEBIAN"; return; }
  fi
  git clone -q "$source_dir" "$root/root/viastack" || { fail "git clone $source_dir"; return; }
  echo "the teacher's clone: $(git -C "$root/root/viastack" log --oneline -1)"
  enter_chroot "$root" || return
  cat >"$root/tmp/course_teacher.sh" <<'SCRIPT'
set -u
cd /root/viastack
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# said_in FILE COMMAND: FILE has COMMAND as a line of its own (a trailing
# comment aside): the teacher reads it there.
said_in() {
  sed 's/[[:space:]]*#.*//' "$1" | grep -qxF -- "$2" && return 0
  fail "$1 does not say '$2' any more: this test follows the text, change it with the text"
  return 1
}
# step EXPECTED FILE COMMAND: runs COMMAND, as FILE says, in bash; EXPECTED is
# pass (status 0) or fail (status 1, the checker's FAIL, or a job's failure).
# Its output is in /tmp/step.log.
step() {
  local expected=$1 file=$2 command=$3 status start=$SECONDS
  said_in "$file" "$command" || return 1
  bash -c "$command" >/tmp/step.log 2>&1
  status=$?
  if { [ "$expected" = pass ] && [ $status -ne 0 ]; } || { [ "$expected" = fail ] && [ $status -eq 0 ]; }; then
    tail -n 30 /tmp/step.log
    fail "$command (from $file) ended with status $status; the text expects it to $expected"
    return 1
  fi
  echo "ok ($((SECONDS - start)) s, status $status as $file expects): $command"
}

# The README's first command: the first line of its first sh block.
first=$(awk '/^```sh/ { getline; print; exit }' README.md | sed 's/[[:space:]]*#.*//')
step pass README.md "$first" || { echo "FAIL: the README's first command, so no exercise"; exit 1; }
echo "what the teacher saw last:"
tail -n 12 /tmp/step.log

exercise=course/exercises/reliable_stream/README.md
step pass $exercise "cmake --build build --target reliable_stream"
step fail $exercise "VIASTACK_FAULTS=drop=0.1,dup=0.05,reorder=0.1,seed=1 build/bin/viarun -n 2 build/bin/reliable_stream --messages 1000" &&
  { grep -q 'reliable_stream rank 1: ' /tmp/step.log || fail "the skeleton's run does not say what rank 1 got wrong"; }
# The skeleton fails the checker as the text shows (the first line of its FAIL).
shown=$(grep -m1 '^FAIL: ' $exercise)
step fail $exercise "course/exercises/reliable_stream/check.sh build/bin/reliable_stream" &&
  { grep -qF -- "$shown" /tmp/step.log || { tail -n 5 /tmp/step.log; fail "the skeleton's checker does not say, as the text: $shown"; }; }
step pass $exercise "cmake --build build --target reliable_stream_solution"
step pass $exercise "course/exercises/reliable_stream/check.sh build/bin/reliable_stream_solution" &&
  grep '^PASS: ' /tmp/step.log
exit $((failures != 0))
SCRIPT
  # As a login on that machine: nothing of this environment (ctest's CC, CXX,
  # VIASTACK_*) goes in.
  chroot "$root" env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    bash /tmp/course_teacher.sh || fail "exercise (a) on a fresh Debian 12 (above)"
}

case $case_name in
  examples) case_examples ;;
  fresh-debian) case_fresh_debian ;;
  fresh-debian-course) case_fresh_debian_course ;;
  bad-input) case_bad_input ;;
  unwritable-prefix) case_unwritable_prefix ;;
  debian) case_debian ;;
  *)
    echo "usage: install_test.sh examples|bad-input|unwritable-prefix|debian|fresh-debian|fresh-debian-course BUILD_DIR SOURCE_DIR" >&2
    exit 2
    ;;
esac
if [ $failures -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
