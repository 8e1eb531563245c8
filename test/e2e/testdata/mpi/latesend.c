/* Injected late senders for the wait-state test: the first half of the
 * ranks send to the second half (rank r to r + n/2), ITERS rounds of
 *   sender r:   sleep (r+1) x D ms, MPI_Send(SIZE bytes), MPI_Recv(ack)
 *   receiver:   MPI_Recv(data), MPI_Send(ack)
 * so each receiver waits about (r+1) x D ms per round for its late sender,
 * and each sender's MPI_Recv of the ack waits only for the reply's latency.
 *   latesend D_MS ITERS SIZE [MODE]
 * MODE:
 *   sendrecv  each round is one MPI_Sendrecv on both sides (the sender's
 *             sends the data and receives the ack, the receiver's sends the
 *             ack and receives the data), the receiver's waiting
 *   irecv     the receiver posts MPI_Irecv and waits in MPI_Wait
 *   receiver  the receivers are late instead: receiver r + n/2 sleeps
 *             (r+1) x D ms before its MPI_Recv, and a sender's MPI_Send of
 *             a message too large to go eagerly waits for it
 * Prints per rank a checksum of what it received (the same with and without
 * the agent), the time it waited for its peer in all rounds (the later
 * rank's post time minus the waiting rank's entry into its call, on
 * CLOCK_MONOTONIC, one clock as the ranks share a host, sent to the waiting
 * rank after the measured rounds; the late ranks: 0), and its whole time
 * inside the calls that receive the data (MPI_Recv, MPI_Sendrecv, MPI_Irecv
 * and MPI_Wait) and inside MPI_Send, entry to return, every call counted:
 * what no wait the agent reports inside them can exceed. The measured rounds
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
	const char *mode = argc > 4 ? argv[4] : "";
	int sendrecv = strcmp(mode, "sendrecv") == 0, irecv = strcmp(mode, "irecv") == 0;
	int lateRecv = strcmp(mode, "receiver") == 0;
	int half = n / 2, sender = rank < half, peer = sender ? rank + half : rank - half;
	long ms = ((sender ? rank : peer) + 1) * d;
	struct timespec late_by = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	unsigned char *buf = malloc((size_t)size);
	double *t = calloc((size_t)iters, sizeof(double)), *post = calloc((size_t)iters, sizeof(double));
	unsigned long sum = 0;
	int ack = 0;
	double inrecv = 0, insend = 0, t0;
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Pcontrol(1);
	for (long i = 0; i < iters; i++) {
		if (sender) {
			if (!lateRecv)
				nanosleep(&late_by, NULL);
			for (int k = 0; k < size; k++)
				buf[k] = (unsigned char)(rank + i + k);
			t[i] = now();
			if (sendrecv) {
				MPI_Sendrecv(buf, size, MPI_BYTE, peer, 7, &ack, 1, MPI_INT, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				inrecv += now() - t[i];
			} else {
				MPI_Send(buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
				t0 = now();
				insend += t0 - t[i];
				MPI_Recv(&ack, 1, MPI_INT, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				inrecv += now() - t0;
			}
			sum += (unsigned long)ack;
		} else {
			if (lateRecv)
				nanosleep(&late_by, NULL);
			ack = (int)(i + 1);
			t[i] = now();
			if (sendrecv) {
				MPI_Sendrecv(&ack, 1, MPI_INT, peer, 8, buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else if (irecv) {
				MPI_Request rq;
				MPI_Irecv(buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &rq);
				MPI_Wait(&rq, MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			}
			t0 = now();
			inrecv += t0 - t[i];
			for (int k = 0; k < size; k++)
				sum = sum * 31 + buf[k];
			if (!sendrecv) {
				MPI_Send(&ack, 1, MPI_INT, peer, 8, MPI_COMM_WORLD);
				insend += now() - t0;
			}
		}
	}
	MPI_Pcontrol(0);
	/* the late rank's post times go to the rank that waited for them */
	double late = 0;
	if (sender != lateRecv) {
		t0 = now();
		MPI_Send(t, (int)iters, MPI_DOUBLE, peer, 9, MPI_COMM_WORLD);
		insend += now() - t0;
	} else {
		t0 = now();
		MPI_Recv(post, (int)iters, MPI_DOUBLE, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		inrecv += now() - t0;
		for (long i = 0; i < iters; i++)
			late += post[i] > t[i] ? post[i] - t[i] : 0;
	}
	printf("latesend rank %d of %d: sum %lu\n", rank, n, sum);
	printf("latesend rank %d waited %.6f inrecv %.6f insend %.6f\n", rank, late, inrecv, insend);
	free(buf);
	free(t);
	free(post);
	MPI_Finalize();
	return 0;
}
