/* Independent pairs: rank 2k and rank 2k+1 exchange BYTES bytes ITERS times
 * (MPI_Sendrecv) after WORK_US microseconds of work (a sleep) each time, and
 * nothing else, so each pair's communication time is its own route's: the
 * model test's program.
 *   pairs BYTES ITERS [WORK_US] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	int rank, n;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	int bytes = argc > 1 ? atoi(argv[1]) : 1 << 20, iters = argc > 2 ? atoi(argv[2]) : 10;
	long work = argc > 3 ? atol(argv[3]) : 0;
	struct timespec ts = {.tv_sec = work / 1000000, .tv_nsec = (work % 1000000) * 1000};
	char *s = calloc((size_t)bytes, 1), *r = calloc((size_t)bytes, 1);
	int peer = rank ^ 1;
	for (int i = 0; i < iters && peer < n; i++) {
		if (work > 0)
			nanosleep(&ts, NULL);
		MPI_Sendrecv(s, bytes, MPI_BYTE, peer, 0, r, bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	}
	if (rank == 0)
		printf("pairs done on %d ranks\n", n);
	free(s);
	free(r);
	MPI_Finalize();
	return 0;
}
