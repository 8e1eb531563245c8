/* Collectives and one-sided calls whose messages the MPI library decomposes
 * (trees, rings, pairwise exchanges): the physical traffic test's program.
 * Deterministic: the same sizes, roots and peers in every run. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, n;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	const int N = 1000;
	double *a = calloc((size_t)N * n, sizeof *a), *b = calloc((size_t)N * n, sizeof *b);
	int *sc = calloc((size_t)n, sizeof *sc), *sd = calloc((size_t)n, sizeof *sd);
	int *rc = calloc((size_t)n, sizeof *rc), *rd = calloc((size_t)n, sizeof *rd);
	for (int i = 0; i < n; i++) {
		sc[i] = rc[i] = 10 * ((rank + i) % 3); /* symmetric: i sends rank what rank sends i */
		sd[i] = rd[i] = 30 * i;
	}
	for (int it = 0; it < 3; it++) {
		MPI_Bcast(a, N, MPI_DOUBLE, 0, MPI_COMM_WORLD);
		MPI_Reduce(a, b, N, MPI_DOUBLE, MPI_SUM, 1, MPI_COMM_WORLD);
		MPI_Allreduce(a, b, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		MPI_Alltoall(a, 100, MPI_DOUBLE, b, 100, MPI_DOUBLE, MPI_COMM_WORLD);
		MPI_Alltoallv(a, sc, sd, MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, MPI_COMM_WORLD);
		MPI_Gather(a, 50, MPI_DOUBLE, b, 50, MPI_DOUBLE, 2 % n, MPI_COMM_WORLD);
		MPI_Sendrecv(a, 64 * (rank + 1), MPI_DOUBLE, (rank + 1) % n, 7, b, N * n, MPI_DOUBLE, (rank + n - 1) % n, 7,
			MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	}
	MPI_Win win;
	MPI_Win_create(b, (MPI_Aint)N * n * sizeof *b, sizeof *b, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	MPI_Win_fence(0, win);
	MPI_Put(a, 10 * (rank + 1), MPI_DOUBLE, (rank + 2) % n, 0, 10 * (rank + 1), MPI_DOUBLE, win);
	MPI_Win_fence(0, win);
	MPI_Get(a, 25, MPI_DOUBLE, (rank + 3) % n, 100, 25, MPI_DOUBLE, win);
	MPI_Win_fence(0, win);
	MPI_Win_free(&win);
	if (rank == 0)
		printf("physical done on %d ranks\n", n);
	free(a);
	free(b);
	free(sc);
	free(sd);
	free(rc);
	free(rd);
	MPI_Finalize();
	return 0;
}
