/* window: osu_bw's pattern between ranks 0 and 1: rank 0 posts WINDOW
 * sends of SIZE bytes at once, rank 1 as many receives, both wait for all,
 * and rank 1 acknowledges with 4 bytes; ITERS times, after one warm-up.
 *   window SIZE WINDOW ITERS
 * Rank 0 prints "window SIZE WINDOW: B bytes/s". Both fill their buffers
 * first, as osu_bw does: a sender's untouched calloc'd pages are the
 * kernel's one zero page, always in cache, and copy faster than data. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	long size = argc > 1 ? atol(argv[1]) : 1 << 20;
	int window = argc > 2 ? atoi(argv[2]) : 64;
	int iters = argc > 3 ? atoi(argv[3]) : 10;
	char *buf = malloc((size_t)size * window);
	memset(buf, 'a' + rank, (size_t)size * window);
	MPI_Request *req = calloc(window, sizeof *req);
	int ack = 0;
	double t = 0;
	for (int i = 0; i <= iters; i++) {
		if (i == 1)
			t = MPI_Wtime();
		if (rank == 0) {
			for (int w = 0; w < window; w++)
				MPI_Isend(buf + w * size, (int)size, MPI_BYTE, 1, w, MPI_COMM_WORLD, &req[w]);
			MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
			MPI_Recv(&ack, 1, MPI_INT, 1, window, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (rank == 1) {
			for (int w = 0; w < window; w++)
				MPI_Irecv(buf + w * size, (int)size, MPI_BYTE, 0, w, MPI_COMM_WORLD, &req[w]);
			MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
			MPI_Send(&ack, 1, MPI_INT, 0, window, MPI_COMM_WORLD);
		}
	}
	t = MPI_Wtime() - t;
	if (rank == 0)
		printf("window %ld %d: %.0f bytes/s\n", size, window, (double)size * window * iters / t);
	free(req);
	free(buf);
	MPI_Finalize();
	return 0;
}
