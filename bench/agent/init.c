/* MPI_Init's time: each rank reads CLOCK_MONOTONIC around MPI_Init; rank 0
 * prints the longest (the job is started when its slowest rank is). */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double t0 = now();
	MPI_Init(&argc, &argv);
	double t = now() - t0, longest;
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Reduce(&t, &longest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("init_s %.6f\n", longest);
	MPI_Finalize();
	return 0;
}
