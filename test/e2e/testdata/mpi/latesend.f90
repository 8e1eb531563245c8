! latesend.c in Fortran (use mpi): rank r of the first half sleeps (r+1) x D
! ms, sends SIZE bytes to rank r + n/2 and receives its ack, for ITERS
! rounds (with "sendrecv", one MPI_Sendrecv per round on both sides, the
! receiver's with a status whose source and tag go into its checksum);
! each rank prints a checksum, the time it waited for its late sender
! (receivers: the sender's post time minus its own entry into MPI_Recv or
! MPI_Sendrecv, on the host's monotonic clock, system_clock; senders: 0)
! and its whole time inside the calls that receive, every receive
! counted. The measured rounds are region "pcontrol-1" (MPI_Pcontrol).
!   latesend D_MS ITERS SIZE [sendrecv]
program latesend
  use mpi
  use, intrinsic :: iso_c_binding, only: c_int
  implicit none
  integer :: ierr, rank, n, i, k, iters, d, nbytes, half, peer, ack
  logical :: sender, sendrecv
  integer :: st(MPI_STATUS_SIZE)
  integer(kind=8) :: now, rate, total
  integer(kind=1), allocatable :: buf(:)
  double precision, allocatable :: t(:), post(:)
  double precision :: late, inrecv, t0
  character(len=32) :: arg
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  d = 20
  iters = 10
  nbytes = 1024
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) d
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) iters
  end if
  if (command_argument_count() >= 3) then
    call get_command_argument(3, arg)
    read (arg, *) nbytes
  end if
  sendrecv = .false.
  if (command_argument_count() >= 4) then
    call get_command_argument(4, arg)
    sendrecv = trim(arg) == 'sendrecv'
  end if
  half = n / 2
  sender = rank < half
  if (sender) then
    peer = rank + half
  else
    peer = rank - half
  end if
  allocate(buf(nbytes), t(iters), post(iters))
  total = 0
  ack = 0
  inrecv = 0
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Pcontrol(1)
  do i = 1, iters
    if (sender) then
      call sleep_ms((rank + 1) * d)
      do k = 1, nbytes
        buf(k) = int(mod(rank + i + k, 128), 1)
      end do
      call system_clock(now, rate)
      t(i) = dble(now) / dble(rate)
      if (sendrecv) then
        call MPI_Sendrecv(buf, nbytes, MPI_BYTE, peer, 7, ack, 1, MPI_INTEGER, peer, 8, MPI_COMM_WORLD, &
                          MPI_STATUS_IGNORE, ierr)
        inrecv = inrecv + seconds() - t(i)
      else
        call MPI_Send(buf, nbytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD, ierr)
        t0 = seconds()
        call MPI_Recv(ack, 1, MPI_INTEGER, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
        inrecv = inrecv + seconds() - t0
      end if
      total = total + ack
    else
      ack = i
      call system_clock(now, rate)
      t(i) = dble(now) / dble(rate)
      if (sendrecv) then
        call MPI_Sendrecv(ack, 1, MPI_INTEGER, peer, 8, buf, nbytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD, st, ierr)
        total = total + st(MPI_SOURCE) + st(MPI_TAG)
      else
        call MPI_Recv(buf, nbytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
      end if
      inrecv = inrecv + seconds() - t(i)
      do k = 1, nbytes
        total = mod(total * 31 + buf(k), 1000000007_8)
      end do
      if (.not. sendrecv) call MPI_Send(ack, 1, MPI_INTEGER, peer, 8, MPI_COMM_WORLD, ierr)
    end if
  end do
  call MPI_Pcontrol(0)
  late = 0
  if (sender) then
    call MPI_Send(t, iters, MPI_DOUBLE_PRECISION, peer, 9, MPI_COMM_WORLD, ierr)
  else
    t0 = seconds()
    call MPI_Recv(post, iters, MPI_DOUBLE_PRECISION, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    inrecv = inrecv + seconds() - t0
    do i = 1, iters
      late = late + max(0d0, post(i) - t(i))
    end do
  end if
  print '(A,I0,A,I0,A,I0)', 'latesend rank ', rank, ' of ', n, ': sum ', total
  print '(A,I0,A,F0.6,A,F0.6)', 'latesend rank ', rank, ' waited ', late, ' inrecv ', inrecv
  call MPI_Finalize(ierr)
contains
  double precision function seconds()
    integer(kind=8) :: c, r
    call system_clock(c, r)
    seconds = dble(c) / dble(r)
  end function seconds
  subroutine sleep_ms(ms)
    integer, intent(in) :: ms
    integer(kind=8) :: t0, t1, r
    call system_clock(t0, r)
    do
      call system_clock(t1)
      if ((t1 - t0) * 1000 >= int(ms, 8) * r) exit
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
end program latesend
