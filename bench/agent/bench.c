/* Netloom agent overhead benchmark (bench/agent/run.sh runs it with and
 * without the agent and with Open MPI's monitoring, in one run).
 * Rank 0 prints one line per measurement: "name value-ns". */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64

static double now(void) { return MPI_Wtime(); }

int main(int argc, char **argv)
{
	int rank, n;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	int iters = argc > 1 ? atoi(argv[1]) : 100000;
	char buf[8 * WINDOW] = {0};
	int peer = rank ^ 1;

	/* ping-pong latency, 0..8 bytes: one-way time */
	for (int size = 0; size <= 8; size += 8) {
		for (int pass = 0; pass < 2; pass++) { /* warm-up, then measured */
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = now();
			for (int i = 0; i < iters; i++) {
				if (rank == 0) {
					MPI_Send(buf, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
					MPI_Recv(buf, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				} else if (rank == 1) {
					MPI_Recv(buf, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
					MPI_Send(buf, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
				}
			}
			double t = now() - t0;
			if (pass && rank == 0)
				printf("pingpong_%dB_oneway %.1f\n", size, t / iters / 2 * 1e9);
		}
	}

	/* message rate: windows of 64 one-byte Isend/Irecv */
	{
		MPI_Request rq[WINDOW];
		int w = iters / WINDOW * 4;
		for (int pass = 0; pass < 2; pass++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = now();
			for (int i = 0; i < w; i++) {
				for (int k = 0; k < WINDOW; k++) {
					if (rank == 0)
						MPI_Isend(buf + k, 1, MPI_BYTE, peer, k, MPI_COMM_WORLD, &rq[k]);
					else
						MPI_Irecv(buf + k, 1, MPI_BYTE, peer, k, MPI_COMM_WORLD, &rq[k]);
				}
				MPI_Waitall(WINDOW, rq, MPI_STATUSES_IGNORE);
				if (rank == 1)
					MPI_Send(buf, 0, MPI_BYTE, peer, 999, MPI_COMM_WORLD);
				else
					MPI_Recv(buf, 0, MPI_BYTE, peer, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			}
			double t = now() - t0;
			if (pass && rank == 0)
				printf("msgrate_ns_per_msg %.1f\n", t / ((double)w * WINDOW) * 1e9);
		}
	}

	/* the wrapper alone: MPI_Send to MPI_PROC_NULL does no communication */
	{
		for (int pass = 0; pass < 2; pass++) {
			double t0 = now();
			for (int i = 0; i < iters * 10; i++)
				MPI_Send(buf, 8, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
			double t = now() - t0;
			if (pass && rank == 0)
				printf("send_procnull %.2f\n", t / (iters * 10.0) * 1e9);
		}
	}

	/* a communication-heavy kernel: halo exchange of 8 KiB both ways, a bit
	 * of computation and an allreduce, per iteration */
	{
		static double a[1024], halo[2][1024];
		int left = (rank + n - 1) % n, right = (rank + 1) % n;
		int kit = iters / 20;
		for (int pass = 0; pass < 2; pass++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = now();
			for (int it = 0; it < kit; it++) {
				MPI_Sendrecv(a, 1024, MPI_DOUBLE, right, 1, halo[0], 1024, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Sendrecv(a, 1024, MPI_DOUBLE, left, 2, halo[1], 1024, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				double s = 0;
				for (int k = 0; k < 1024; k++) {
					a[k] = 0.5 * (halo[0][k] + halo[1][k]) + 1e-3 * a[k];
					s += a[k];
				}
				MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			}
			double t = now() - t0;
			if (pass && rank == 0)
				printf("kernel_us_per_iter %.3f\n", t / kit * 1e6);
		}
	}
	MPI_Finalize();
	return 0;
}
