/* Small-message bandwidth and message rate, as osu_bw measures them: rank 0
 * posts windows of 64 MPI_Isend of SIZE bytes, rank 1 the matching
 * MPI_Irecv, both wait, rank 1 acknowledges each window. bench/agent/small.sh
 * runs it in each agent mode in one run. Rank 0 prints "bw_<SIZE>B MB/s" and
 * "rate_<SIZE>B Mmsg/s" for SIZE = 0, 1, 8, 64. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define WINDOW 64

int main(int argc, char **argv)
{
	int rank;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	int loops = argc > 1 ? atoi(argv[1]) : 2000;
	static char buf[WINDOW * 64];
	MPI_Request rq[WINDOW];
	int sizes[] = {0, 1, 8, 64};
	for (int s = 0; s < 4; s++) {
		int size = sizes[s];
		for (int pass = 0; pass < 2; pass++) { /* warm-up, then measured */
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			for (int i = 0; i < loops; i++) {
				for (int k = 0; k < WINDOW; k++) {
					if (rank == 0)
						MPI_Isend(buf + k * size, size, MPI_BYTE, 1, 100, MPI_COMM_WORLD, &rq[k]);
					else if (rank == 1)
						MPI_Irecv(buf + k * size, size, MPI_BYTE, 0, 100, MPI_COMM_WORLD, &rq[k]);
				}
				if (rank < 2)
					MPI_Waitall(WINDOW, rq, MPI_STATUSES_IGNORE);
				if (rank == 1)
					MPI_Send(buf, 0, MPI_BYTE, 0, 101, MPI_COMM_WORLD);
				else if (rank == 0)
					MPI_Recv(buf, 0, MPI_BYTE, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			}
			double t = MPI_Wtime() - t0;
			if (pass && rank == 0) {
				double msgs = (double)loops * WINDOW;
				if (size > 0)
					printf("bw_%dB %.3f\n", size, msgs * size / t / 1e6);
				printf("rate_%dB %.4f\n", size, msgs / t / 1e6);
			}
		}
	}
	MPI_Finalize();
	return 0;
}
