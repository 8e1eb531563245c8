/* The cost of netloom_reorder through MPI (bench/agent/reorder.sh): a ring
 * scrambled over the nodes (node = world rank / NL_BENCH_PPN, from
 * NETLOOM_NODE), ROUNDS rounds, then CALLS times netloom_reorder on it and,
 * for comparison, CALLS times MPI_Comm_split (what it ends with) on it.
 * Prints, on rank 0, the medians over the calls of the slowest rank's time
 * and of rank 0's mapping time.
 *   reorder_mpi [CALLS] [ROUNDS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include <netloom.h>

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int calls = argc > 1 ? atoi(argv[1]) : 5, rounds = argc > 2 ? atoi(argv[2]) : 10, wr, wn;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &wr);
	MPI_Comm_size(MPI_COMM_WORLD, &wn);
	const char *e = getenv("NL_BENCH_PPN");
	int ppn = e ? atoi(e) : 8, nodes = wn / ppn;
	MPI_Comm scr;
	MPI_Comm_split(MPI_COMM_WORLD, 0, (wr % ppn) * nodes + wr / ppn, &scr);
	int r, n;
	MPI_Comm_rank(scr, &r);
	MPI_Comm_size(scr, &n);
	static char out[65536], in[65536];
	for (int k = 0; k < rounds; k++) {
		MPI_Sendrecv(out, sizeof out, MPI_BYTE, (r + 1) % n, 0, in, sizeof in, MPI_BYTE, (r + n - 1) % n, 0, scr, MPI_STATUS_IGNORE);
		MPI_Sendrecv(out, sizeof out, MPI_BYTE, (r + n - 1) % n, 1, in, sizeof in, MPI_BYTE, (r + 1) % n, 1, scr, MPI_STATUS_IGNORE);
	}
	double *tr = calloc((size_t)calls, sizeof(double)), *tm = calloc((size_t)calls, sizeof(double)), *ts = calloc((size_t)calls, sizeof(double));
	struct netloom_reorder_info info = {0};
	for (int c = 0; c < calls; c++) {
		MPI_Comm nc;
		MPI_Barrier(scr);
		double t0 = MPI_Wtime();
		int rc = NETLOOM_CALL(netloom_reorder, scr, &nc, NULL, &info);
		double t = MPI_Wtime() - t0;
		if (rc != NETLOOM_OK) {
			if (wr == 0)
				fprintf(stderr, "netloom_reorder: %s\n", NETLOOM_STRERROR(rc));
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		MPI_Reduce(&t, &tr[c], 1, MPI_DOUBLE, MPI_MAX, 0, scr);
		tm[c] = info.map_seconds;
		MPI_Comm_free(&nc);
		MPI_Barrier(scr);
		t0 = MPI_Wtime();
		MPI_Comm_split(scr, 0, n - 1 - r, &nc);
		t = MPI_Wtime() - t0;
		MPI_Reduce(&t, &ts[c], 1, MPI_DOUBLE, MPI_MAX, 0, scr);
		MPI_Comm_free(&nc);
	}
	if (r == 0) {
		qsort(tr, (size_t)calls, sizeof(double), cmpd);
		qsort(tm, (size_t)calls, sizeof(double), cmpd);
		qsort(ts, (size_t)calls, sizeof(double), cmpd);
		printf("ranks %d on %d nodes: netloom_reorder %.4f s (slowest rank, median of %d; min %.4f), of which mapping on rank 0 %.4f s; "
		       "MPI_Comm_split alone %.4f s; predicted inter-node bytes %llu -> %llu\n",
		       n, info.nodes, tr[calls / 2], calls, tr[0], tm[calls / 2], ts[calls / 2],
		       (unsigned long long)info.inter_node_before, (unsigned long long)info.inter_node_after);
	}
	MPI_Comm_free(&scr);
	MPI_Finalize();
	return 0;
}
