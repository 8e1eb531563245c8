/* Neighbourhood collectives with known per-peer traffic for the agent's
 * end-to-end test (test/e2e/agent_neighbors_test.go computes the same),
 * on 4 ranks:
 *   torus  2 x 2 periodic cartesian: 3 halo exchanges with MPI_Neighbor_alltoall,
 *          5 doubles a block (in each dimension both neighbours are one rank)
 *   line   1-D non-periodic cartesian (ranks 0 and 3 have an MPI_PROC_NULL
 *          neighbour): MPI_Neighbor_allgather of 3 ints, then
 *          MPI_Ineighbor_alltoallw of 1 double down and 3 shorts up
 *   dist   distributed graph on a reversed communicator (sub-rank s = 3 - rank):
 *          s sends s+1 ints to s+1 and 2 ints to s+2 (mod 4), with
 *          MPI_Neighbor_alltoallv, then MPI_Ineighbor_alltoallv
 *   ring   graph topology (MPI_Graph_create), neighbours r-1 and r+1:
 *          MPI_Neighbor_allgatherv of r+1 ints
 *   ring2  1-D periodic cartesian made after the torus is freed (its handle
 *          may be reused): MPI_Neighbor_alltoall of 1 int */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int r, n;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (n != 4) {
		if (r == 0)
			fprintf(stderr, "neighbors: run on 4 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}

	/* torus */
	MPI_Comm torus;
	int dims2[2] = {2, 2}, per2[2] = {1, 1};
	MPI_Cart_create(MPI_COMM_WORLD, 2, dims2, per2, 0, &torus);
	double halo[4 * 5] = {0}, rhalo[4 * 5];
	for (int it = 0; it < 3; it++)
		MPI_Neighbor_alltoall(halo, 5, MPI_DOUBLE, rhalo, 5, MPI_DOUBLE, torus);

	/* line */
	MPI_Comm line;
	int dims1[1] = {4}, per1[1] = {0};
	MPI_Cart_create(MPI_COMM_WORLD, 1, dims1, per1, 0, &line);
	int ag[3] = {r, r, r}, rag[2 * 3];
	MPI_Neighbor_allgather(ag, 3, MPI_INT, rag, 3, MPI_INT, line);
	double down = r, rdown = 0;
	short up[3] = {1, 2, 3}, rup[3];
	char wsend[64], wrecv[64];
	/* block 0 goes down (1 double), block 1 up (3 shorts); from below come
	 * 3 shorts (its block up), from above 1 double */
	int scw[2] = {1, 3}, rcw[2] = {3, 1};
	MPI_Aint sdw[2] = {0, 8}, rdw[2] = {0, 8};
	MPI_Datatype stw[2] = {MPI_DOUBLE, MPI_SHORT}, rtw[2] = {MPI_SHORT, MPI_DOUBLE};
	*(double *)wsend = down;
	for (int i = 0; i < 3; i++)
		((short *)(wsend + 8))[i] = up[i];
	MPI_Request req;
	MPI_Ineighbor_alltoallw(wsend, scw, sdw, stw, wrecv, rcw, rdw, rtw, line, &req);
	MPI_Wait(&req, MPI_STATUS_IGNORE);
	(void)rdown;
	(void)rup;

	/* dist */
	MPI_Comm rev, dist;
	MPI_Comm_split(MPI_COMM_WORLD, 0, n - 1 - r, &rev);
	int s;
	MPI_Comm_rank(rev, &s);
	int dst[2] = {(s + 1) % n, (s + 2) % n}, src[2] = {(s + n - 1) % n, (s + n - 2) % n};
	MPI_Dist_graph_create_adjacent(rev, 2, src, MPI_UNWEIGHTED, 2, dst, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dist);
	int sc[2] = {s + 1, 2}, rc[2] = {src[0] + 1, 2}, sd[2] = {0, 8}, rd[2] = {0, 8};
	int sv[16] = {0}, rv[16];
	MPI_Neighbor_alltoallv(sv, sc, sd, MPI_INT, rv, rc, rd, MPI_INT, dist);
	MPI_Ineighbor_alltoallv(sv, sc, sd, MPI_INT, rv, rc, rd, MPI_INT, dist, &req);
	MPI_Wait(&req, MPI_STATUS_IGNORE);

	/* ring */
	MPI_Comm ring;
	int index[4] = {2, 4, 6, 8}, edges[8] = {3, 1, 0, 2, 1, 3, 2, 0};
	MPI_Graph_create(MPI_COMM_WORLD, 4, index, edges, 0, &ring);
	int nb[2];
	MPI_Graph_neighbors(ring, r, 2, nb);
	int gv[4] = {0}, rgv[8], grc[2] = {nb[0] + 1, nb[1] + 1}, gd[2] = {0, 4};
	MPI_Neighbor_allgatherv(gv, r + 1, MPI_INT, rgv, grc, gd, MPI_INT, ring);

	/* ring2, after the torus is gone */
	MPI_Comm_free(&torus);
	MPI_Comm ring2;
	int per1p[1] = {1};
	MPI_Cart_create(MPI_COMM_WORLD, 1, dims1, per1p, 0, &ring2);
	int one[2] = {r, r}, rone[2];
	MPI_Neighbor_alltoall(one, 1, MPI_INT, rone, 1, MPI_INT, ring2);

	MPI_Comm_free(&ring2);
	MPI_Comm_free(&ring);
	MPI_Comm_free(&dist);
	MPI_Comm_free(&rev);
	MPI_Comm_free(&line);
	if (r == 0)
		printf("neighbors done on %d ranks\n", n);
	MPI_Finalize();
	return 0;
}
