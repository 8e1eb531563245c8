/* A ring scrambled over the nodes, reordered online (test/e2e/reorder_test.go).
 *
 *   reorder MODE ROUNDS SIZE
 *
 * Node of world rank w: w / NL_TEST_PPN (as testdata/mpi/nodewrap.sh names
 * it). The ring runs on "scr", MPI_COMM_WORLD split so that ring position k
 * is world rank (k % nodes) * ppn + k / nodes: every ring neighbour is on
 * another node. One round: each rank sends SIZE bytes to its right and to its
 * left neighbour (MPI_Sendrecv twice) and checks what it got.
 *
 * MODE 1: phase 1 (ROUNDS rounds on scr), then prints its matrix rows.
 * MODE 2: phase 1, mark "p2", netloom_reorder(scr), phase 2 on the new
 *         communicator, prints its rows since "p2", the prediction and the
 *         new ranks. Without the agent: says so and runs phase 2 on scr.
 * MODE 3: misuse: prints "MISUSE case code" lines.
 *
 * Lines: ROW w peer bytes msgs (p2p, world ranks; in MODE 2 since "p2"),
 * ROW1 (MODE 2: from MPI_Init to the mark "p2": phase 1), PHYS w peer bytes msgs
 * (Open MPI's physical p2p), ALL i j bytes (netloom_matrix_all on WORLD, rank
 * 0), INFO before after total moved method nodes, NEWRANK w newrank. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netloom.h>

static int wr, wn;

static void phase(MPI_Comm c, int rounds, int size)
{
	int r, n;
	MPI_Comm_rank(c, &r);
	MPI_Comm_size(c, &n);
	char *out = malloc((size_t)size), *in = malloc((size_t)size);
	int right = (r + 1) % n, left = (r + n - 1) % n;
	for (int k = 0; k < rounds; k++) {
		memset(out, (char)(r + k), (size_t)size);
		MPI_Sendrecv(out, size, MPI_BYTE, right, 1, in, size, MPI_BYTE, left, 1, c, MPI_STATUS_IGNORE);
		if (in[size - 1] != (char)(left + k)) {
			fprintf(stderr, "rank %d: wrong data from the left\n", wr);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		MPI_Sendrecv(out, size, MPI_BYTE, left, 2, in, size, MPI_BYTE, right, 2, c, MPI_STATUS_IGNORE);
		if (in[0] != (char)(right + k)) {
			fprintf(stderr, "rank %d: wrong data from the right\n", wr);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	free(out);
	free(in);
}

/* rows prints this rank's p2p row on WORLD since from, one rank at a time */
static void rows(const char *from)
{
	uint64_t *b = calloc((size_t)wn, 8), *m = calloc((size_t)wn, 8), *pb = calloc((size_t)wn, 8), *pm = calloc((size_t)wn, 8);
	int rc = NETLOOM_CALL(netloom_matrix, MPI_COMM_WORLD, NETLOOM_P2P, from, NULL, b, m);
	int prc = NETLOOM_CALL(netloom_matrix, MPI_COMM_WORLD, NETLOOM_P2P | NETLOOM_PHYSICAL, from, NULL, pb, pm);
	/* spans between marks: from "p2" to "p2end" (taken right after phase 2,
	 * nothing sent since) is what was read since "p2"; from MPI_Init to
	 * "p2" is phase 1, printed as ROW1 */
	uint64_t *sb = calloc((size_t)wn, 8), *b1 = calloc((size_t)wn, 8), *m1 = calloc((size_t)wn, 8);
	int src = from ? NETLOOM_CALL(netloom_matrix, MPI_COMM_WORLD, NETLOOM_P2P, from, "p2end", sb, NULL) : NETLOOM_OK;
	int rc1 = from ? NETLOOM_CALL(netloom_matrix, MPI_COMM_WORLD, NETLOOM_P2P, NULL, from, b1, m1) : -1;
	for (int q = 0; from && rc == NETLOOM_OK && q < wn; q++)
		if (src != NETLOOM_OK || sb[q] != b[q])
			printf("ERR %d span p2..p2end to %d: %d %llu, since p2 %llu\n", wr, q, src, (unsigned long long)sb[q], (unsigned long long)b[q]);
	for (int t = 0; t < wn; t++) {
		MPI_Barrier(MPI_COMM_WORLD);
		if (t != wr)
			continue;
		if (rc != NETLOOM_OK)
			printf("ERR %d netloom_matrix %d %s\n", wr, rc, NETLOOM_STRERROR(rc));
		for (int q = 0; rc == NETLOOM_OK && q < wn; q++)
			printf("ROW %d %d %llu %llu\n", wr, q, (unsigned long long)b[q], (unsigned long long)m[q]);
		for (int q = 0; prc == NETLOOM_OK && q < wn; q++)
			printf("PHYS %d %d %llu %llu\n", wr, q, (unsigned long long)pb[q], (unsigned long long)pm[q]);
		for (int q = 0; rc1 == NETLOOM_OK && q < wn; q++)
			printf("ROW1 %d %d %llu %llu\n", wr, q, (unsigned long long)b1[q], (unsigned long long)m1[q]);
		fflush(stdout);
	}
	/* the collective form, on WORLD: rank 0 prints it */
	uint64_t *all = calloc((size_t)wn * (size_t)wn, 8);
	rc = NETLOOM_CALL(netloom_matrix_all, MPI_COMM_WORLD, NETLOOM_P2P, from, NULL, all, NULL);
	if (wr == 0 && rc == NETLOOM_OK)
		for (int i = 0; i < wn; i++)
			for (int j = 0; j < wn; j++)
				printf("ALL %d %d %llu\n", i, j, (unsigned long long)all[i * wn + j]);
	fflush(stdout);
	free(all);
	free(sb);
	free(b1);
	free(m1);
	free(b);
	free(m);
	free(pb);
	free(pm);
}

static void misuse(void)
{
	uint64_t b[64];
	MPI_Comm nc = MPI_COMM_WORLD;
	int rc;
#define SAY(name, code)                                                                   \
	do {                                                                              \
		rc = (code);                                                              \
		if (wr == 0)                                                              \
			printf("MISUSE %s %d %s\n", name, rc, NETLOOM_STRERROR(rc));      \
		fflush(stdout);                                                           \
	} while (0)
	SAY("null", NETLOOM_CALL(netloom_matrix, MPI_COMM_NULL, NETLOOM_ALL, NULL, NULL, b, NULL));
	SAY("reorder-null", NETLOOM_CALL(netloom_reorder, MPI_COMM_NULL, &nc, NULL, NULL));
	SAY("classes", NETLOOM_CALL(netloom_matrix, MPI_COMM_WORLD, 0, NULL, NULL, b, NULL));
	SAY("mark", NETLOOM_CALL(netloom_matrix, MPI_COMM_WORLD, NETLOOM_ALL, "never", NULL, b, NULL));
	/* a mark only rank 0 has: the collective forms fail on every rank, no hang */
	if (wr == 0 && netloom_mark)
		netloom_mark("only0");
	SAY("mark-some", NETLOOM_CALL(netloom_matrix_all, MPI_COMM_WORLD, NETLOOM_ALL, "only0", NULL, NULL, b));
	rc = NETLOOM_CALL(netloom_reorder, MPI_COMM_WORLD, &nc, "only0", NULL);
	printf("MISUSE-ALL reorder-mark-some %d %d %d\n", wr, rc, nc == MPI_COMM_NULL);
	/* an intercommunicator: the two halves of WORLD */
	MPI_Comm half, inter;
	MPI_Comm_split(MPI_COMM_WORLD, wr < wn / 2, wr, &half);
	MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, wr < wn / 2 ? wn / 2 : 0, 7, &inter);
	SAY("intercomm", NETLOOM_CALL(netloom_reorder, inter, &nc, NULL, NULL));
	SAY("intercomm-matrix", NETLOOM_CALL(netloom_matrix, inter, NETLOOM_ALL, NULL, NULL, b, NULL));
	/* the reordering itself: Scotch missing when NETLOOM_SCOTCH_LIB points nowhere */
	MPI_Sendrecv(b, 8, MPI_BYTE, (wr + 1) % wn, 3, b + 8, 8, MPI_BYTE, (wr + wn - 1) % wn, 3, MPI_COMM_WORLD,
		     MPI_STATUS_IGNORE);
	rc = NETLOOM_CALL(netloom_reorder, MPI_COMM_WORLD, &nc, NULL, NULL);
	printf("MISUSE-ALL reorder %d %d %d %s\n", wr, rc, nc == MPI_COMM_NULL, NETLOOM_STRERROR(rc));
	fflush(stdout);
	MPI_Comm_free(&inter);
	MPI_Comm_free(&half);
	if (nc != MPI_COMM_NULL)
		MPI_Comm_free(&nc);
}

int main(int argc, char **argv)
{
	int mode = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 20, size = argc > 3 ? atoi(argv[3]) : 4096;
	uint64_t before[1];
	/* before MPI_Init: the agent is not running */
	int rc0 = NETLOOM_CALL(netloom_matrix, MPI_COMM_WORLD, NETLOOM_ALL, NULL, NULL, before, NULL);
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &wr);
	MPI_Comm_size(MPI_COMM_WORLD, &wn);
	if (wr == 0)
		printf("MISUSE before-init %d %s\n", rc0, NETLOOM_STRERROR(rc0));
	const char *e = getenv("NL_TEST_PPN");
	int ppn = e ? atoi(e) : 2, nodes = wn / ppn;
	int key = (wr % ppn) * nodes + wr / ppn; /* ring position of world rank wr */
	MPI_Comm scr;
	MPI_Comm_split(MPI_COMM_WORLD, 0, key, &scr);
	if (mode == 3) {
		misuse();
	} else {
		phase(scr, rounds, size);
		if (mode == 1) {
			rows(NULL);
		} else {
			if (netloom_mark)
				netloom_mark("p2");
			struct netloom_reorder_info info;
			MPI_Comm nc;
			int rc = NETLOOM_CALL(netloom_reorder, scr, &nc, NULL, &info);
			if (rc != NETLOOM_OK) {
				if (wr == 0)
					printf("NOREORDER %d %s\n", rc, NETLOOM_STRERROR(rc));
				nc = scr; /* the program goes on as it was */
			} else {
				int nr;
				MPI_Comm_rank(nc, &nr);
				if (wr == 0)
					printf("INFO %llu %llu %llu %d %d %d\n", (unsigned long long)info.inter_node_before,
					       (unsigned long long)info.inter_node_after, (unsigned long long)info.total_bytes,
					       info.moved, info.method, info.nodes);
				printf("NEWRANK %d %d\n", wr, nr);
				fflush(stdout);
			}
			phase(nc, rounds, size);
			if (netloom_mark)
				netloom_mark("p2end");
			rows("p2");
			if (nc != scr)
				MPI_Comm_free(&nc);
		}
	}
	MPI_Comm_free(&scr);
	MPI_Finalize();
	return 0;
}
