# Chapter 4's trace: every message and RDMA read one rank starts, between the
# MPI calls that start them. A message is via::Mesh::send (its first argument,
# in %esi, is the destination rank), a rendezvous's data is via::Mesh::read
# (from that rank). The breakpoints go in at main, once the libraries are
# loaded, on the functions' own addresses (a pending breakpoint would also
# stop in libmpi's PLT stub and show every message twice).
#
#   build/bin/viarun -n 4 --tag-output -- docs/course/traces/on-rank.sh 0 \
#       gdb -q -batch -x docs/course/traces/mpi-messages.gdb --args /tmp/collectives 1
set pagination off
set print thread-events off
break main
run
delete
break MPI_Barrier
commands
  silent
  echo ---- MPI_Barrier\n
  continue
end
break MPI_Bcast
commands
  silent
  echo ---- MPI_Bcast\n
  continue
end
break MPI_Allreduce
commands
  silent
  echo ---- MPI_Allreduce\n
  continue
end
break MPI_Finalize
commands
  silent
  echo ---- MPI_Finalize\n
  continue
end
dprintf *'via::Mesh::send(int, std::span<std::byte const, 18446744073709551615ul>, std::span<std::byte const, 18446744073709551615ul>)', "message to rank %d\n", $esi
dprintf *'via::Mesh::read(int, void*, unsigned long, unsigned long, unsigned int, unsigned long)', "RDMA read from rank %d\n", $esi
continue
