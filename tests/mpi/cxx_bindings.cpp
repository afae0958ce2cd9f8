// A program using the MPI-2 C++ bindings (MPI::Init, MPI::COMM_WORLD.Send,
// MPI::Op), built by Open MPI's mpicxx and run on viastack's libmpi.so.40
// through Open MPI's libmpi_cxx. Every result is checked; a wrong one stops
// the job with Abort. Prints "ok <rank>".
#include <mpi.h>

#include <cmath>
#include <cstdio>

namespace {

void check(bool ok, const char* what) {
  if (ok) return;
  std::printf("FAIL: %s\n", what);
  std::fflush(stdout);
  MPI::COMM_WORLD.Abort(3);
}

// A C++ reduction (through libmpi_cxx's intercept): the larger magnitude.
void absmax(const void* in, void* inout, int len, const MPI::Datatype&) {
  const double* a = static_cast<const double*>(in);
  double* b = static_cast<double*>(inout);
  for (int i = 0; i < len; ++i) b[i] = std::fmax(std::fabs(a[i]), std::fabs(b[i]));
}

}  // namespace

int main(int argc, char** argv) {
  MPI::Init(argc, argv);
  const int rank = MPI::COMM_WORLD.Get_rank();
  const int size = MPI::COMM_WORLD.Get_size();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;

  int sent[8], got[8];
  for (int i = 0; i < 8; ++i) sent[i] = rank * 100 + i;
  MPI::Request receive = MPI::COMM_WORLD.Irecv(got, 8, MPI::INT, prev, 4);
  MPI::COMM_WORLD.Send(sent, 8, MPI::INT, next, 4);
  MPI::Status status;
  receive.Wait(status);
  check(status.Get_source() == prev && status.Get_tag() == 4 && status.Get_count(MPI::INT) == 8, "status");
  for (int i = 0; i < 8; ++i) check(got[i] == prev * 100 + i, "send/recv data");

  int total = 0;
  const int mine = rank + 1;
  MPI::COMM_WORLD.Allreduce(&mine, &total, 1, MPI::INT, MPI::SUM);
  check(total == size * (size + 1) / 2, "allreduce");

  double values[2] = {-double(rank), rank / 2.0};
  MPI::Op op;
  op.Init(absmax, true);
  MPI::COMM_WORLD.Allreduce(MPI::IN_PLACE, values, 2, MPI::DOUBLE, op);
  check(values[0] == size - 1 && values[1] == (size - 1) / 2.0, "C++ user op");
  op.Free();

  int root_value = rank == 0 ? 42 : 0;
  MPI::COMM_WORLD.Bcast(&root_value, 1, MPI::INT, 0);
  check(root_value == 42, "bcast");

  MPI::Intracomm dup = MPI::COMM_WORLD.Dup();
  check(dup.Get_size() == size && dup.Get_rank() == rank, "Dup");
  dup.Free();

  MPI::COMM_WORLD.Barrier();
  std::printf("ok %d\n", rank);
  MPI::Finalize();
  return 0;
}
