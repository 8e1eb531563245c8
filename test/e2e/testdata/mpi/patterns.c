#define _POSIX_C_SOURCE 200809L
/* Known communication patterns for the agent's end-to-end test
 * (test/e2e/agent_test.go computes what each rank must report). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <netloom.h>

static const int ring_sizes[] = {0, 1, 8, 100, 1000, 4096, 65536};
#define NRING (int)(sizeof ring_sizes / sizeof ring_sizes[0])

int main(int argc, char **argv)
{
	int rank, n;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	int right = (rank + 1) % n, left = (rank + n - 1) % n;
	char *buf = calloc(1, 1 << 20), *rbuf = calloc(1, 1 << 20);

	/* ring: one message of each size to the right, blocking */
	MPI_Pcontrol(1);
	for (int i = 0; i < NRING; i++) {
		if (rank % 2 == 0) {
			MPI_Send(buf, ring_sizes[i], MPI_BYTE, right, i, MPI_COMM_WORLD);
			MPI_Recv(rbuf, ring_sizes[i], MPI_BYTE, left, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(rbuf, ring_sizes[i], MPI_BYTE, left, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(buf, ring_sizes[i], MPI_BYTE, right, i, MPI_COMM_WORLD);
		}
	}
	MPI_Pcontrol(0);

	/* halo: 5 iterations, 128 doubles both ways, Isend/Irecv/Waitall */
	for (int it = 0; it < 5; it++) {
		MPI_Request rq[4];
		NETLOOM_REGION_BEGIN("halo"); /* five entries, the halo's traffic only */
		MPI_Irecv(rbuf, 128, MPI_DOUBLE, left, 100, MPI_COMM_WORLD, &rq[0]);
		MPI_Irecv(rbuf + 2048, 128, MPI_DOUBLE, right, 101, MPI_COMM_WORLD, &rq[1]);
		MPI_Isend(buf, 128, MPI_DOUBLE, right, 100, MPI_COMM_WORLD, &rq[2]);
		MPI_Isend(buf + 2048, 128, MPI_DOUBLE, left, 101, MPI_COMM_WORLD, &rq[3]);
		MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
		NETLOOM_REGION_END("halo");
	}
	/* sendrecv: 3 x 10 ints to the right */
	for (int it = 0; it < 3; it++)
		MPI_Sendrecv(buf, 10, MPI_INT, right, 7, rbuf, 10, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

	/* persistent: 4 starts of 300 bytes to the right */
	{
		MPI_Request rq[2];
		MPI_Send_init(buf, 300, MPI_BYTE, right, 9, MPI_COMM_WORLD, &rq[0]);
		MPI_Recv_init(rbuf, 300, MPI_BYTE, left, 9, MPI_COMM_WORLD, &rq[1]);
		for (int it = 0; it < 4; it++) {
			MPI_Startall(2, rq);
			MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
		}
		MPI_Request_free(&rq[0]);
		MPI_Request_free(&rq[1]);
	}

	/* sub-communicator with reversed ranks: world rank r is sub rank n-1-r;
	 * each rank sends 50 bytes to sub rank 0 (world rank n-1), except itself */
	{
		MPI_Comm rev;
		MPI_Comm_split(MPI_COMM_WORLD, 0, n - 1 - rank, &rev);
		int sr;
		MPI_Comm_rank(rev, &sr);
		if (sr != 0) {
			MPI_Send(buf, 50, MPI_BYTE, 0, 11, rev);
		} else {
			for (int i = 1; i < n; i++)
				MPI_Recv(rbuf, 50, MPI_BYTE, MPI_ANY_SOURCE, 11, rev, MPI_STATUS_IGNORE);
		}
		MPI_Comm_free(&rev);
	}

	/* collectives */
	MPI_Bcast(buf, 1000, MPI_INT, 1 % n, MPI_COMM_WORLD);
	MPI_Alltoall(buf, 16, MPI_INT, rbuf, 16, MPI_INT, MPI_COMM_WORLD);
	MPI_Reduce(buf, rbuf, 32, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Allreduce(buf, rbuf, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);

	/* one-sided: put 10 ints right, get 5 ints from left, accumulate 3 ints on 0 */
	{
		MPI_Win win;
		int *base;
		MPI_Win_allocate(1000 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
		MPI_Win_fence(0, win);
		MPI_Put(buf, 10, MPI_INT, right, 0, 10, MPI_INT, win);
		MPI_Get(rbuf, 5, MPI_INT, left, 100, 5, MPI_INT, win);
		MPI_Accumulate(buf, 3, MPI_INT, 0, 200, 3, MPI_INT, MPI_SUM, win);
		MPI_Win_fence(0, win);
		MPI_Win_free(&win);
	}

	/* MPI-IO: 4096 bytes per rank */
	if (argc > 1) {
		MPI_File fh;
		if (MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS) {
			MPI_File_write_at_all(fh, (MPI_Offset)rank * 4096, buf, 4096, MPI_BYTE, MPI_STATUS_IGNORE);
			MPI_File_close(&fh);
		}
	}

	/* live reports: stay a while, calling MPI so that monitoring pvars are polled */
	const char *linger = getenv("PATTERNS_LINGER_MS");
	if (linger) {
		double end = MPI_Wtime() + atof(linger) / 1000.0;
		int go = 1;
		while (go) {
			struct timespec ts = {0, 20000000};
			nanosleep(&ts, NULL);
			go = MPI_Wtime() < end;
			MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
		}
	}

	if (rank == 0)
		printf("patterns done on %d ranks\n", n);
	free(buf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
