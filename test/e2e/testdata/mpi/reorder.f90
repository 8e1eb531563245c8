! The scrambled ring of reorder.c in Fortran (use mpi, INTEGER handles),
! through the agent's Fortran bindings (linked: -lnetloom-ompi or
! -lnetloom-mpich). Arguments: MODE ROUNDS SIZE, modes 1 and 2 as reorder.c
! (ROW, PHYS, INFO, NEWRANK lines).
program reorder
  use mpi
  implicit none
  integer :: ierr, wr, wn, ppn, nodes, key, scr, nc, mode, rounds, msize, nr, rc
  integer(8) :: before, after
  character(len=32) :: arg
  character(len=16) :: env
  integer :: envlen, envst

  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, wr, ierr)
  call mpi_comm_size(MPI_COMM_WORLD, wn, ierr)
  mode = 2
  rounds = 20
  msize = 4096
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) mode
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) rounds
  end if
  if (command_argument_count() >= 3) then
    call get_command_argument(3, arg)
    read (arg, *) msize
  end if
  ppn = 2
  call get_environment_variable('NL_TEST_PPN', env, envlen, envst)
  if (envst == 0) read (env, *) ppn
  nodes = wn / ppn
  key = mod(wr, ppn) * nodes + wr / ppn
  call mpi_comm_split(MPI_COMM_WORLD, 0, key, scr, ierr)
  if (mode == 3) then
    call misuse()
    call mpi_comm_free(scr, ierr)
    call mpi_finalize(ierr)
    stop
  end if
  call phase(scr)
  if (mode == 1) then
    call rows(' ')
  else
    call netloom_mark('p2', rc)
    call netloom_reorder(scr, nc, ' ', before, after, rc)
    if (rc /= 0) then
      call netloom_strerror(rc, arg)
      if (wr == 0) print '(A,I0)', 'NOREORDER ', rc
      nc = scr
    else
      call mpi_comm_rank(nc, nr, ierr)
      if (wr == 0) print '(A,I0,A,I0)', 'INFO ', before, ' ', after
      print '(A,I0,A,I0)', 'NEWRANK ', wr, ' ', nr
    end if
    call phase(nc)
    call rows('p2')
    if (nc /= scr) call mpi_comm_free(nc, ierr)
  end if
  call mpi_comm_free(scr, ierr)
  call mpi_finalize(ierr)

contains

  ! MODE 3: the documented codes through the Fortran bindings ("MISUSE case
  ! code message" on rank 0, "MISUSE-ALL reorder rank code isnull" on all).
  subroutine misuse()
    integer(8) :: b(64), m(64)
    integer :: rc1, nc1, ierr2
    character(len=200) :: msg
    call netloom_matrix(MPI_COMM_NULL, 7, ' ', ' ', b, m, rc1)
    call netloom_strerror(rc1, msg)
    if (wr == 0) print '(A,I0,A,A)', 'MISUSE null ', rc1, ' ', trim(msg)
    call netloom_matrix(MPI_COMM_WORLD, 7, 'never', ' ', b, m, rc1)
    call netloom_strerror(rc1, msg)
    if (wr == 0) print '(A,I0,A,A)', 'MISUSE mark ', rc1, ' ', trim(msg)
    call netloom_mark(' ', rc1)
    if (wr == 0) print '(A,I0)', 'MISUSE blank-mark ', rc1
    call mpi_sendrecv(b, 8, MPI_INTEGER8, mod(wr + 1, wn), 3, m, 8, MPI_INTEGER8, mod(wr + wn - 1, wn), 3, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr2)
    call netloom_reorder(MPI_COMM_WORLD, nc1, ' ', before, after, rc1)
    call netloom_strerror(rc1, msg)
    print '(A,I0,A,I0,A,L1,A,A)', 'MISUSE-ALL reorder ', wr, ' ', rc1, ' ', nc1 == MPI_COMM_NULL, ' ', trim(msg)
    flush (6)
  end subroutine misuse

  subroutine phase(c)
    integer, intent(in) :: c
    integer :: r, n, right, left, k, ierr2
    character, allocatable :: sbuf(:), rbuf(:)
    call mpi_comm_rank(c, r, ierr2)
    call mpi_comm_size(c, n, ierr2)
    allocate (sbuf(msize), rbuf(msize))
    right = mod(r + 1, n)
    left = mod(r + n - 1, n)
    do k = 1, rounds
      sbuf = achar(mod(r + k, 128))
      call mpi_sendrecv(sbuf, msize, MPI_BYTE, right, 1, rbuf, msize, MPI_BYTE, left, 1, c, MPI_STATUS_IGNORE, ierr2)
      if (rbuf(msize) /= achar(mod(left + k, 128))) call mpi_abort(MPI_COMM_WORLD, 2, ierr2)
      call mpi_sendrecv(sbuf, msize, MPI_BYTE, left, 2, rbuf, msize, MPI_BYTE, right, 2, c, MPI_STATUS_IGNORE, ierr2)
      if (rbuf(1) /= achar(mod(right + k, 128))) call mpi_abort(MPI_COMM_WORLD, 2, ierr2)
    end do
    deallocate (sbuf, rbuf)
  end subroutine phase

  subroutine rows(from)
    character(len=*), intent(in) :: from
    integer(8), allocatable :: b(:), m(:), pb(:), pm(:)
    integer :: t, q, rc1, rc2, ierr2
    allocate (b(wn), m(wn), pb(wn), pm(wn))
    call netloom_matrix(MPI_COMM_WORLD, 1, from, ' ', b, m, rc1)
    call netloom_matrix(MPI_COMM_WORLD, 9, from, ' ', pb, pm, rc2)
    do t = 0, wn - 1
      call mpi_barrier(MPI_COMM_WORLD, ierr2)
      if (t /= wr) cycle
      if (rc1 /= 0) print '(A,I0,A,I0)', 'ERR ', wr, ' netloom_matrix ', rc1
      do q = 1, wn
        if (rc1 == 0) print '(A,I0,A,I0,A,I0,A,I0)', 'ROW ', wr, ' ', q - 1, ' ', b(q), ' ', m(q)
      end do
      do q = 1, wn
        if (rc2 == 0) print '(A,I0,A,I0,A,I0,A,I0)', 'PHYS ', wr, ' ', q - 1, ' ', pb(q), ' ', pm(q)
      end do
      flush (6)
    end do
    deallocate (b, m, pb, pm)
  end subroutine rows
end program reorder
