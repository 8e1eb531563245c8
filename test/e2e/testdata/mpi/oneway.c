/* oneway: the first half of the ranks send, the second half receive: rank
 * r < n/2 sends SIZE bytes to rank r + n/2 (MPI_Send, MPI_Recv) ROUNDS times,
 * or, with ROUNDS 0, until the file STOP exists or MAX_SECONDS (default 300)
 * have passed as rank 0 sees it (checked after every round and broadcast, so
 * that every rank stops after the same round). With the two halves on the two
 * sides of a link, the data crosses it one way only.
 *   oneway SIZE ROUNDS [STOP [MAX_SECONDS]]
 * Every rank prints "rank R of N on HOST sent S received V in T s"
 * (" BAD" when a received byte is not its sender's). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, n, len;
	char host[MPI_MAX_PROCESSOR_NAME];
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	MPI_Get_processor_name(host, &len);
	long size = argc > 1 ? atol(argv[1]) : 1 << 20;
	long rounds = argc > 2 ? atol(argv[2]) : 10;
	const char *stop = argc > 3 ? argv[3] : NULL;
	double max = argc > 4 ? atof(argv[4]) : 300;
	if (size < 1 || rounds < 0 || (rounds == 0 && !stop)) {
		if (rank == 0)
			fprintf(stderr, "usage: oneway SIZE ROUNDS [STOP [MAX_SECONDS]] (ROUNDS 0 needs STOP)\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int half = n / 2;
	char *buf = malloc(size);
	memset(buf, rank % (half ? half : 1) + 1, size);
	long sent = 0, received = 0;
	int bad = 0;
	double t0 = MPI_Wtime();
	for (long i = 0; rounds == 0 || i < rounds; i++) {
		if (rank < half) {
			MPI_Send(buf, (int)size, MPI_BYTE, rank + half, 5, MPI_COMM_WORLD);
			sent += size;
		} else if (rank < 2 * half) {
			MPI_Recv(buf, (int)size, MPI_BYTE, rank - half, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			received += size;
			if (buf[0] != (char)(rank - half + 1) || buf[size - 1] != (char)(rank - half + 1))
				bad = 1;
		}
		if (rounds == 0) {
			int done = 0;
			if (rank == 0)
				done = access(stop, F_OK) == 0 || MPI_Wtime() - t0 > max;
			MPI_Bcast(&done, 1, MPI_INT, 0, MPI_COMM_WORLD);
			if (done)
				break;
		}
	}
	double t = MPI_Wtime() - t0;
	MPI_Barrier(MPI_COMM_WORLD);
	printf("rank %d of %d on %s sent %ld received %ld in %.2f s%s\n", rank, n, host, sent, received, t, bad ? " BAD" : "");
	free(buf);
	MPI_Finalize();
	return bad;
}
