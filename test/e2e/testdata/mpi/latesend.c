/* Injected late senders for the wait-state test: the first half of the
 * ranks send to the second half (rank r to r + n/2), ITERS rounds of
 *   sender r:   sleep (r+1) x D ms, MPI_Send(SIZE bytes), MPI_Recv(ack)
 *   receiver:   MPI_Recv(data), MPI_Send(ack)
 * so each receiver waits about (r+1) x D ms per round for its late sender,
 * and each sender's MPI_Recv of the ack waits only for the reply's latency.
 * With "sendrecv" each round is one MPI_Sendrecv on both sides (the sender's
 * sends the data and receives the ack, the receiver's sends the ack and
 * receives the data), the receiver's waiting for its late sender.
 *   latesend D_MS ITERS SIZE [sendrecv]
 * Prints per rank a checksum of what it received (the same with and without
 * the agent), the time it waited for its sender in all rounds (receivers:
 * the sender's post time minus the receiver's entry into MPI_Recv, on
 * CLOCK_MONOTONIC, one clock as the ranks share a host, sent to the
 * receiver after the measured rounds; senders: 0, not measured) and its
 * whole time inside MPI_Recv (MPI_Sendrecv), entry to return, every call
 * counted: what no wait the agent reports inside it can exceed. The measured rounds
 * are region "pcontrol-1" (MPI_Pcontrol). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	long d = argc > 1 ? atol(argv[1]) : 20, iters = argc > 2 ? atol(argv[2]) : 10;
	int size = argc > 3 ? atoi(argv[3]) : 1024;
	int sendrecv = argc > 4 && strcmp(argv[4], "sendrecv") == 0;
	int half = n / 2, sender = rank < half, peer = sender ? rank + half : rank - half;
	unsigned char *buf = malloc((size_t)size);
	double *t = calloc((size_t)iters, sizeof(double)), *post = calloc((size_t)iters, sizeof(double));
	unsigned long sum = 0;
	int ack = 0;
	double inrecv = 0, t0;
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Pcontrol(1);
	for (long i = 0; i < iters; i++) {
		if (sender) {
			long ms = (rank + 1) * d;
			struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
			for (int k = 0; k < size; k++)
				buf[k] = (unsigned char)(rank + i + k);
			t[i] = now();
			if (sendrecv) {
				MPI_Sendrecv(buf, size, MPI_BYTE, peer, 7, &ack, 1, MPI_INT, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				inrecv += now() - t[i];
			} else {
				MPI_Send(buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
				t0 = now();
				MPI_Recv(&ack, 1, MPI_INT, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				inrecv += now() - t0;
			}
			sum += (unsigned long)ack;
		} else {
			ack = (int)(i + 1);
			t[i] = now();
			if (sendrecv)
				MPI_Sendrecv(&ack, 1, MPI_INT, peer, 8, buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			else
				MPI_Recv(buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			inrecv += now() - t[i];
			for (int k = 0; k < size; k++)
				sum = sum * 31 + buf[k];
			if (!sendrecv)
				MPI_Send(&ack, 1, MPI_INT, peer, 8, MPI_COMM_WORLD);
		}
	}
	MPI_Pcontrol(0);
	double late = 0;
	if (sender) {
		MPI_Send(t, (int)iters, MPI_DOUBLE, peer, 9, MPI_COMM_WORLD);
	} else {
		t0 = now();
		MPI_Recv(post, (int)iters, MPI_DOUBLE, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		inrecv += now() - t0;
		for (long i = 0; i < iters; i++)
			late += post[i] > t[i] ? post[i] - t[i] : 0;
	}
	printf("latesend rank %d of %d: sum %lu\n", rank, n, sum);
	printf("latesend rank %d waited %.6f inrecv %.6f\n", rank, late, inrecv);
	free(buf);
	free(t);
	free(post);
	MPI_Finalize();
	return 0;
}
