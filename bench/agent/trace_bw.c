/* The osu_bw pattern at 8 bytes, window 64: rank 0 posts 64 MPI_Isend, rank
 * 1 64 MPI_Irecv, both MPI_Waitall, then rank 1 acknowledges with a 4-byte
 * MPI_Send; ITERS windows after ITERS / 10 of warm-up. Rank 0 prints
 * "bw_8B_window64 MB/s". bench/agent/trace.sh runs it with the agent, with
 * and without the replay trace: issue 29 measured 79 MB/s untraced and 0.9
 * MB/s traced once 4,096 requests had been posted. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define WINDOW 64
#define SIZE 8

int main(int argc, char **argv)
{
	int rank;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	int iters = argc > 1 ? atoi(argv[1]) : 2000;
	static char buf[WINDOW][SIZE], ack[4];
	MPI_Request rq[WINDOW];
	int peer = rank ^ 1;
	double t0 = 0;
	for (int i = -(iters / 10); i < iters; i++) {
		if (i == 0) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		if (rank > 1)
			continue;
		for (int k = 0; k < WINDOW; k++) {
			if (rank == 0)
				MPI_Isend(buf[k], SIZE, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &rq[k]);
			else
				MPI_Irecv(buf[k], SIZE, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &rq[k]);
		}
		MPI_Waitall(WINDOW, rq, MPI_STATUSES_IGNORE);
		if (rank == 0)
			MPI_Recv(ack, 4, MPI_CHAR, peer, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		else
			MPI_Send(ack, 4, MPI_CHAR, peer, 101, MPI_COMM_WORLD);
	}
	double t = MPI_Wtime() - t0;
	if (rank == 0)
		printf("bw_8B_window64 %.2f\n", (double)SIZE * WINDOW * iters / t / 1e6);
	MPI_Finalize();
	return 0;
}
