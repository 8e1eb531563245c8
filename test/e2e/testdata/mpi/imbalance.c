/* Injected load imbalance for the wait-state test: for ITERS rounds, rank k
 * works (sleeps) k x D ms, then all ranks MPI_Allreduce. Rank k therefore
 * waits about (n - 1 - k) x D ms per round for the last rank to arrive; the
 * allreduce itself is tiny. D = 0: a balanced program.
 *   imbalance D_MS ITERS
 * Prints per rank the sum (the same with and without the agent), the time
 * it waited for the last rank in all rounds, from every rank's arrival time
 * (CLOCK_MONOTONIC: one clock when the ranks share a host; Open MPI's
 * MPI_Wtime counts from each process's own start), gathered after the
 * measured rounds, and its whole time inside those MPI_Allreduce calls,
 * entry to return: what no wait the agent reports before them can exceed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	long d = argc > 1 ? atol(argv[1]) : 20, iters = argc > 2 ? atol(argv[2]) : 10;
	long sum = 0;
	double inall = 0;
	double *arrive = calloc((size_t)iters, sizeof(double)), *all = calloc((size_t)(iters * n), sizeof(double));
	for (long i = 0; i < iters; i++) {
		struct timespec ts = {.tv_sec = rank * d / 1000, .tv_nsec = (rank * d % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		long x = rank + i, y = 0;
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		arrive[i] = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
		MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
		clock_gettime(CLOCK_MONOTONIC, &now);
		inall += (double)now.tv_sec + (double)now.tv_nsec / 1e9 - arrive[i];
		sum += y;
	}
	MPI_Allgather(arrive, (int)iters, MPI_DOUBLE, all, (int)iters, MPI_DOUBLE, MPI_COMM_WORLD);
	double waited = 0;
	for (long i = 0; i < iters; i++) {
		double last = 0;
		for (int r = 0; r < n; r++)
			last = all[r * iters + i] > last ? all[r * iters + i] : last;
		waited += last - arrive[i];
	}
	printf("imbalance rank %d of %d: sum %ld\n", rank, n, sum);
	printf("imbalance rank %d waited %.6f inall %.6f\n", rank, waited, inall);
	free(arrive);
	free(all);
	MPI_Finalize();
	return 0;
}
