! Known communication patterns through `use mpi_f08` for the agent's
! end-to-end test: the traffic of patterns.f90 (ring, halo, sendrecv,
! persistent, reversed sub-communicator, bcast, alltoall, reduce, allreduce),
! then an in-place allgather, a neighbourhood all-to-all on a periodic 2 x 2
! cartesian communicator, and calls that move nothing (MPI_Test on a null
! request, MPI_Ibarrier). Most calls leave ierror out (it is OPTIONAL in f08).
program patterns_f08
  use mpi_f08
  implicit none
  integer, parameter :: nring = 7
  integer :: ring_sizes(nring) = (/ 0, 1, 8, 100, 1000, 4096, 65536 /)
  integer :: ierr, rank, n, right, left, i, it, sr
  type(MPI_Request) :: rq(4), prq(2), nullreq, breq
  type(MPI_Comm) :: rev, cart
  logical :: flag
  character, allocatable :: buf(:), rbuf(:)
  double precision :: d(128), rd(128), d2(128), rd2(128)
  integer :: ia(16*64), ra(16*64), ib(1000), ag(6*64)
  double precision :: s(32), rs(32), nb(3*4), rnb(3*4)

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, n)
  right = mod(rank + 1, n)
  left = mod(rank + n - 1, n)
  allocate(buf(65536), rbuf(65536))
  buf = 'x'
  d = 1.0d0
  d2 = 2.0d0
  ia = rank
  ib = 7
  s = 1.0d0
  ag = rank
  nb = rank

  call MPI_Pcontrol(1)
  do i = 1, nring
    if (mod(rank, 2) == 0) then
      call MPI_Send(buf, ring_sizes(i), MPI_BYTE, right, i, MPI_COMM_WORLD)
      call MPI_Recv(rbuf, ring_sizes(i), MPI_BYTE, left, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    else
      call MPI_Recv(rbuf, ring_sizes(i), MPI_BYTE, left, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
      call MPI_Send(buf, ring_sizes(i), MPI_BYTE, right, i, MPI_COMM_WORLD, ierr)
    end if
  end do
  call MPI_Pcontrol(0)

  do it = 1, 5
    call MPI_Irecv(rd, 128, MPI_DOUBLE_PRECISION, left, 100, MPI_COMM_WORLD, rq(1))
    call MPI_Irecv(rd2, 128, MPI_DOUBLE_PRECISION, right, 101, MPI_COMM_WORLD, rq(2))
    call MPI_Isend(d, 128, MPI_DOUBLE_PRECISION, right, 100, MPI_COMM_WORLD, rq(3))
    call MPI_Isend(d2, 128, MPI_DOUBLE_PRECISION, left, 101, MPI_COMM_WORLD, rq(4))
    call MPI_Waitall(4, rq, MPI_STATUSES_IGNORE)
  end do
  do it = 1, 3
    call MPI_Sendrecv(ia, 10, MPI_INTEGER, right, 7, ra, 10, MPI_INTEGER, left, 7, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  end do

  call MPI_Send_init(buf, 300, MPI_BYTE, right, 9, MPI_COMM_WORLD, prq(1))
  call MPI_Recv_init(rbuf, 300, MPI_BYTE, left, 9, MPI_COMM_WORLD, prq(2))
  do it = 1, 4
    call MPI_Startall(2, prq)
    call MPI_Waitall(2, prq, MPI_STATUSES_IGNORE)
  end do
  call MPI_Request_free(prq(1))
  call MPI_Request_free(prq(2))

  call MPI_Comm_split(MPI_COMM_WORLD, 0, n - 1 - rank, rev)
  call MPI_Comm_rank(rev, sr)
  if (sr /= 0) then
    call MPI_Send(buf, 50, MPI_BYTE, 0, 11, rev)
  else
    do i = 1, n - 1
      call MPI_Recv(rbuf, 50, MPI_BYTE, MPI_ANY_SOURCE, 11, rev, MPI_STATUS_IGNORE)
    end do
  end if
  call MPI_Comm_free(rev)

  call MPI_Bcast(ib, 1000, MPI_INTEGER, mod(1, n), MPI_COMM_WORLD)
  call MPI_Alltoall(ia, 16, MPI_INTEGER, ra, 16, MPI_INTEGER, MPI_COMM_WORLD)
  call MPI_Reduce(s, rs, 32, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD)
  call MPI_Allreduce(MPI_IN_PLACE, s, 8, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)

  ! in place: each rank's block of 6 integers (24 bytes) to each other rank
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ag, 6, MPI_INTEGER, MPI_COMM_WORLD)

  ! 2 x 2 periodic torus (4 ranks): in each dimension both neighbours are
  ! the same rank (rank xor 2, then rank xor 1): 2 blocks of 3 doubles to each
  call MPI_Cart_create(MPI_COMM_WORLD, 2, (/ 2, n / 2 /), (/ .true., .true. /), .false., cart)
  call MPI_Neighbor_alltoall(nb, 3, MPI_DOUBLE_PRECISION, rnb, 3, MPI_DOUBLE_PRECISION, cart)
  call MPI_Comm_free(cart)

  nullreq = MPI_REQUEST_NULL
  do i = 1, 3
    call MPI_Test(nullreq, flag, MPI_STATUS_IGNORE)
  end do
  call MPI_Ibarrier(MPI_COMM_WORLD, breq)
  call MPI_Wait(breq, MPI_STATUS_IGNORE)
  call MPI_Barrier(MPI_COMM_WORLD)

  if (rank == 0) print '(a,i0,a)', 'patterns_f08 done on ', n, ' ranks'
  call MPI_Finalize()
end program patterns_f08
