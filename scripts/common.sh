# Shared by demo.sh and test.sh: install what is missing, then configure and build.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${JOBS:-$(nproc)}

# Debian packages the build and the tests need; installed only when missing.
# libasio-dev and libssl-dev (libcrypto): the tcp provider; libpmix-dev: the
# PMIx bootstrap (jobs started by mpirun or srun); iproute2: the
# network-namespace test; dpkg-dev and file: cpack -G DEB's dependency list
# (dpkg-shlibdeps), checked by the install test.
REQUIRED_PACKAGES=(cmake ninja-build g++ libgtest-dev libgmock-dev pkg-config libasio-dev libssl-dev libpmix-dev iproute2
                   dpkg-dev file)
# tshark: the user-level TCP/IP's pcap files are checked by Wireshark's decoder.
TRACE_PACKAGES=(tshark)
# Unmodified socket programs run over utcp by libviastack-preload.so in the
# preload tests (skipped without them).
PRELOAD_TOOL_PACKAGES=(iperf3 sockperf)
# libFuzzer comes with clang's runtime.
FUZZ_PACKAGES=(clang libclang-rt-14-dev)
# Open MPI's mpi.h (the MPI layer is compiled against it), its libmpi.so.40
# (the ABI check compares against it) and mpicc (the binary-compatibility test);
# NetPIPE's NPtcp: the kernel's loopback TCP, the tcp provider's anchor.
# gfortran: Open MPI's mpifort, for the Fortran programs run on viastack
# through Open MPI's Fortran bindings. hpcc: the HPC Challenge suite (HPL
# among it), an outside MPI program run on our library.
MPI_PACKAGES=(libopenmpi-dev openmpi-bin netpipe-openmpi netpipe-tcp python3-mpi4py gfortran hpcc)
# The process managers the launcher tests start jobs under: MPICH's
# mpiexec.hydra (PMI-1), and Slurm's slurmctld/slurmd/srun (PMIx, PMI-2)
# with munge for a one-node cluster. mpich's alternatives have a lower
# priority than Open MPI's, so mpicc and mpirun stay Open MPI's.
LAUNCHER_PACKAGES=(mpich slurm-wlm munge)

install_missing_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "viastack: missing Debian packages: ${missing[*]} (run as root to install them)" >&2
    return 1
  fi
  echo "viastack: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# configure_and_build BUILD_DIR [extra cmake args...] [-- targets...]
configure_and_build() {
  local dir=$1; shift
  local args=() targets=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift && targets=(--target "$@")
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${args[@]}" >/dev/null
  cmake --build "$dir" -j "$JOBS" "${targets[@]}"
}
