! imbalance.c in Fortran (use mpi): rank k sleeps k x D ms before each of
! ITERS MPI_Allreduce calls, and prints its sum and the time it waited for
! the last rank (from every rank's arrival on the host's monotonic clock,
! system_clock; Open MPI's MPI_Wtime counts from each process's start) and
! its whole time inside those MPI_Allreduce calls.
!   imbalance D_MS ITERS
program imbalance
  use mpi
  use, intrinsic :: iso_c_binding, only: c_int
  implicit none
  integer :: ierr, rank, n, i, iters, d
  integer(kind=8) :: x, y, total
  integer :: r
  integer(kind=8) :: now, rate
  double precision, allocatable :: arrive(:), all(:, :)
  double precision :: waited, inall
  character(len=32) :: arg
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  d = 20
  iters = 10
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) d
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) iters
  end if
  total = 0
  inall = 0
  allocate(arrive(iters), all(iters, n))
  do i = 0, iters - 1
    call sleep_ms(rank * d)
    x = rank + i
    call system_clock(now, rate)
    arrive(i + 1) = dble(now) / dble(rate)
    call MPI_Allreduce(x, y, 1, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD, ierr)
    call system_clock(now, rate)
    inall = inall + dble(now) / dble(rate) - arrive(i + 1)
    total = total + y
  end do
  call MPI_Allgather(arrive, iters, MPI_DOUBLE_PRECISION, all, iters, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  waited = 0
  do i = 1, iters
    waited = waited + maxval(all(i, :)) - arrive(i)
  end do
  r = rank
  print '(A,I0,A,I0,A,I0)', 'imbalance rank ', rank, ' of ', n, ': sum ', total
  print '(A,I0,A,F0.6,A,F0.6)', 'imbalance rank ', r, ' waited ', waited, ' inall ', inall
  call MPI_Finalize(ierr)
contains
  subroutine sleep_ms(ms)
    integer, intent(in) :: ms
    integer(kind=8) :: t0, t1, rate
    call system_clock(t0, rate)
    do
      call system_clock(t1)
      if ((t1 - t0) * 1000 >= int(ms, 8) * rate) exit
      call sleep_tick()
    end do
  end subroutine sleep_ms
  subroutine sleep_tick()
    interface
      integer(c_int) function usleep(us) bind(c, name='usleep')
        import :: c_int
        integer(c_int), value :: us
      end function usleep
    end interface
    integer :: rc
    rc = usleep(1000)
  end subroutine sleep_tick
end program imbalance
