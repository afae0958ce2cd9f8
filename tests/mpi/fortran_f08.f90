! The same checks as fortran_bindings.F90 through `use mpi_f08` (Open MPI's
! libmpi_usempif08 over libmpi_mpifh), built by Open MPI's mpifort and run
! on viastack's libmpi.so.40. Prints "ok <rank>".
program fortran_f08
  use mpi_f08
  implicit none
  integer, parameter :: n = 8
  integer :: rank, nranks, next, prev, i, count, total, values(4), sent(n), got(n)
  double precision :: grid(3, n), column(n)
  type(MPI_Status) :: status
  type(MPI_Request) :: request
  type(MPI_Datatype) :: vector
  integer(kind=MPI_ADDRESS_KIND) :: tag_ub
  logical :: flag

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  next = mod(rank + 1, nranks)
  prev = mod(rank + nranks - 1, nranks)

  sent = [(rank * 100 + i, i = 1, n)]
  call MPI_Sendrecv(sent, n, MPI_INTEGER, next, 5, got, n, MPI_INTEGER, prev, MPI_ANY_TAG, MPI_COMM_WORLD, status)
  call check(all(got == [(prev * 100 + i, i = 1, n)]), 'sendrecv data')
  call check(status%MPI_SOURCE == prev .and. status%MPI_TAG == 5, 'status source and tag')
  call MPI_Get_count(status, MPI_INTEGER, count)
  call check(count == n, 'MPI_Get_count')

  got = 0
  call MPI_Irecv(got, n, MPI_INTEGER, prev, 6, MPI_COMM_WORLD, request)
  call MPI_Send(sent, n, MPI_INTEGER, next, 6, MPI_COMM_WORLD)
  call MPI_Wait(request, status)
  call check(request == MPI_REQUEST_NULL, 'MPI_Wait sets MPI_REQUEST_NULL')
  call check(all(got == [(prev * 100 + i, i = 1, n)]), 'isend/irecv')

  call MPI_Allreduce(rank + 1, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call check(total == nranks * (nranks + 1) / 2, 'allreduce')
  values = [rank, 2 * rank, -rank, 1]
  call MPI_Allreduce(MPI_IN_PLACE, values, 4, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD)
  call check(all(values == [nranks - 1, 2 * (nranks - 1), 0, 1]), 'allreduce in place')
  values = 0
  if (rank == 0) values = [7, 8, 9, 10]
  call MPI_Bcast(values, 4, MPI_INTEGER, 0, MPI_COMM_WORLD)
  call check(all(values == [7, 8, 9, 10]), 'bcast')

  grid = -1
  grid(2, :) = [(rank * 10 + i, i = 1, n)]
  call MPI_Type_vector(n, 1, 3, MPI_DOUBLE_PRECISION, vector)
  call MPI_Type_commit(vector)
  call MPI_Sendrecv(grid(2, 1), 1, vector, next, 9, column, n, MPI_DOUBLE_PRECISION, prev, 9, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE)
  call check(all(column == [(prev * 10 + i, i = 1, n)]), 'vector type')
  call MPI_Type_free(vector)

  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, tag_ub, flag)
  call check(flag .and. tag_ub >= 32767, 'MPI_TAG_UB')

  call MPI_Barrier(MPI_COMM_WORLD)
  print '(a, i0)', 'ok ', rank
  call MPI_Finalize()
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    if (.not. ok) then
      print *, 'FAIL: ', what
      call MPI_Abort(MPI_COMM_WORLD, 3)
    end if
  end subroutine
end program
