/* Skewed call times: many short MPI_Wait/MPI_Recv/MPI_Allreduce calls and a
 * few long ones (a peer that sleeps before it sends, a rank that sleeps
 * before the collective). Each rank times its own calls with MPI_Wtime and
 * prints the totals: "skewed rank R wait W recv V allreduce A" (seconds), the
 * oracle for the agent's per-function times. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void nap(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 2000;
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int right = (rank + 1) % size, left = (rank + size - 1) % size;
	double buf[64] = {0}, in[64], sum, t, wait = 0, recv = 0, allreduce = 0;
	for (int i = 0; i < iters; i++) {
		MPI_Request rq;
		MPI_Irecv(in, 64, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &rq);
		if (i % 97 == 13 && rank == 0)
			nap(0.01); /* rank 1 waits for this one */
		MPI_Send(buf, 64, MPI_DOUBLE, right, 0, MPI_COMM_WORLD);
		t = MPI_Wtime();
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
		wait += MPI_Wtime() - t;
		if (i % 10 == 0) {
			if (i % 200 == 0 && rank == size - 1)
				nap(0.005); /* the others wait in the allreduce */
			double x = rank;
			t = MPI_Wtime();
			MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			allreduce += MPI_Wtime() - t;
		}
		if (i % 50 == 0) {
			if (rank == 0) {
				nap(0.002);
				MPI_Send(buf, 1, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD);
			} else if (rank == 1) {
				t = MPI_Wtime();
				MPI_Recv(in, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				recv += MPI_Wtime() - t;
			}
		}
	}
	printf("skewed rank %d wait %.9f recv %.9f allreduce %.9f\n", rank, wait, recv, allreduce);
	MPI_Finalize();
	return 0;
}
