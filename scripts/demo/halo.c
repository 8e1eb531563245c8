/* Demo MPI application for `make demo`: a 1-D halo exchange with a periodic
 * allreduce and a broadcast, for a given number of seconds (argv[1]) or
 * iterations (argv[2], when given: a traced run's size is its iterations',
 * whatever the machine's speed), inside a region marked with MPI_Pcontrol.
 * Rank r talks to r-1 and r+1. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	double seconds = argc > 1 ? atof(argv[1]) : 30;
	long max_iters = argc > 2 ? atol(argv[2]) : -1;
	enum { N = 1 << 16 };
	static double out[N], in[N];
	for (int i = 0; i < N; i++) out[i] = rank + i;
	int left = (rank + size - 1) % size, right = (rank + 1) % size;
	double start = MPI_Wtime(), sum = 0;
	long iters = 0;
	MPI_Pcontrol(1);
	while (1) {
		int done = MPI_Wtime() - start > seconds || iters == max_iters;
		MPI_Bcast(&done, 1, MPI_INT, 0, MPI_COMM_WORLD);
		if (done) break;
		MPI_Sendrecv(out, N, MPI_DOUBLE, right, 0, in, N, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Sendrecv(out, N / 4, MPI_DOUBLE, left, 1, in, N / 4, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		double local = in[0], global;
		MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		sum += global;
		iters++;
	}
	MPI_Pcontrol(0);
	if (rank == 0) printf("halo demo: %ld iterations on %d ranks (checksum %g)\n", iters, size, sum);
	MPI_Finalize();
	return 0;
}
