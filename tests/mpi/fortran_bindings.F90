! A Fortran MPI program built by Open MPI's mpifort, run on viastack's
! libmpi.so.40 through Open MPI's own Fortran bindings (libmpi_mpifh):
! with -DUSE_MPI_MODULE through `use mpi`, else through mpif.h. Every result
! is checked; a wrong one stops the job with MPI_ABORT. Prints "ok <rank>".
module checks
  implicit none
contains
  subroutine check(ok, what)
#ifdef USE_MPI_MODULE
    use mpi
#else
    include 'mpif.h'
#endif
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    integer :: ierr
    if (.not. ok) then
      print *, 'FAIL: ', what
      call MPI_ABORT(MPI_COMM_WORLD, 3, ierr)
    end if
  end subroutine

  ! A user reduction in Fortran's convention: the datatype comes as a Fortran handle.
  subroutine absmax(invec, inoutvec, len, datatype)
    integer :: len, datatype, i
    double precision :: invec(len), inoutvec(len)
    do i = 1, len
      inoutvec(i) = max(abs(invec(i)), abs(inoutvec(i)))
    end do
  end subroutine
end module

program fortran_bindings
#ifdef USE_MPI_MODULE
  use mpi
#endif
  use checks
  implicit none
#ifndef USE_MPI_MODULE
  include 'mpif.h'
#endif
  integer, parameter :: n = 8
  integer :: ierr, rank, nranks, next, prev, i, count, total, vector, absmax_op, request
  integer :: status(MPI_STATUS_SIZE)
  integer :: sent(n), got(n), values(4)
  double precision :: grid(3, n), column(n), dmax(2)
  integer(kind=MPI_ADDRESS_KIND) :: tag_ub
  logical :: flag

  call MPI_INIT(ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_INIT')
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  next = mod(rank + 1, nranks)
  prev = mod(rank + nranks - 1, nranks)

  ! An array around the ring; the status's fields and count.
  sent = [(rank * 100 + i, i = 1, n)]
  call MPI_SENDRECV(sent, n, MPI_INTEGER, next, 5, got, n, MPI_INTEGER, prev, MPI_ANY_TAG, &
                    MPI_COMM_WORLD, status, ierr)
  call check(all(got == [(prev * 100 + i, i = 1, n)]), 'sendrecv data')
  call check(status(MPI_SOURCE) == prev .and. status(MPI_TAG) == 5, 'status source and tag')
  call MPI_GET_COUNT(status, MPI_INTEGER, count, ierr)
  call check(count == n, 'MPI_GET_COUNT')

  ! Non-blocking: the request goes through its Fortran handle and back.
  got = 0
  call MPI_IRECV(got, n, MPI_INTEGER, prev, 6, MPI_COMM_WORLD, request, ierr)
  call MPI_SEND(sent, n, MPI_INTEGER, next, 6, MPI_COMM_WORLD, ierr)
  call MPI_WAIT(request, status, ierr)
  call check(request == MPI_REQUEST_NULL, 'MPI_WAIT sets MPI_REQUEST_NULL')
  call check(all(got == [(prev * 100 + i, i = 1, n)]) .and. status(MPI_SOURCE) == prev, 'isend/irecv')
  call MPI_SEND(sent, 1, MPI_INTEGER, next, 8, MPI_COMM_WORLD, ierr)
  call MPI_RECV(got, 1, MPI_INTEGER, prev, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call check(got(1) == prev * 100 + 1, 'MPI_STATUS_IGNORE')

  ! Collectives, MPI_IN_PLACE among them.
  call MPI_ALLREDUCE(rank + 1, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(total == nranks * (nranks + 1) / 2, 'allreduce')
  values = [rank, 2 * rank, -rank, 1]
  call MPI_ALLREDUCE(MPI_IN_PLACE, values, 4, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check(all(values == [nranks - 1, 2 * (nranks - 1), 0, 1]), 'allreduce in place')
  values = 0
  if (rank == 0) values = [7, 8, 9, 10]
  call MPI_BCAST(values, 4, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call check(all(values == [7, 8, 9, 10]), 'bcast')

  ! A derived type: row 2 of a 3 x n column-major array, sent as one vector.
  grid = -1
  grid(2, :) = [(rank * 10 + i, i = 1, n)]
  call MPI_TYPE_VECTOR(n, 1, 3, MPI_DOUBLE_PRECISION, vector, ierr)
  call MPI_TYPE_COMMIT(vector, ierr)
  call MPI_SENDRECV(grid(2, 1), 1, vector, next, 9, column, n, MPI_DOUBLE_PRECISION, prev, 9, &
                    MPI_COMM_WORLD, status, ierr)
  call check(all(column == [(prev * 10 + i, i = 1, n)]), 'vector type')
  call MPI_TYPE_FREE(vector, ierr)
  call check(vector == MPI_DATATYPE_NULL, 'MPI_TYPE_FREE')

  ! A reduction written in Fortran.
  call MPI_OP_CREATE(absmax, .true., absmax_op, ierr)
  dmax = [dble(-rank), dble(rank) / 2]
  call MPI_ALLREDUCE(MPI_IN_PLACE, dmax, 2, MPI_DOUBLE_PRECISION, absmax_op, MPI_COMM_WORLD, ierr)
  call check(dmax(1) == nranks - 1 .and. dmax(2) == dble(nranks - 1) / 2, 'Fortran user op')
  call MPI_OP_FREE(absmax_op, ierr)

  ! A predefined attribute, as an integer.
  call MPI_COMM_GET_ATTR(MPI_COMM_WORLD, MPI_TAG_UB, tag_ub, flag, ierr)
  call check(flag .and. tag_ub >= 32767, 'MPI_TAG_UB')

  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  print '(a, i0)', 'ok ', rank
  call MPI_FINALIZE(ierr)
end program
