package e2e

// Neighbourhood collectives (testdata/mpi/neighbors.c): bytes and messages per
// peer from the communicators' topologies, cartesian (periodic and not),
// graph and distributed graph, under Open MPI and MPICH.

import (
	"testing"

	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
)

// expectNeighbors is what rank r of n reports for neighbors.c (agent/README.md,
// "Collectives": block i to the i-th destination of the topology, nothing to
// MPI_PROC_NULL, a neighbour listed twice gets two messages).
func expectNeighbors(n, r int) expectation {
	e := newExpectation()
	mod := func(x int) int { return ((x % n) + n) % n }
	// torus: 2 x 2 periodic, 3 x MPI_Neighbor_alltoall of 5 doubles; the
	// neighbours below and above in dimension 0 are both r^2, in dimension 1 r^1
	for it := 0; it < 3; it++ {
		for _, p := range []int{r ^ 2, r ^ 2, r ^ 1, r ^ 1} {
			e.collTo("MPI_Neighbor_alltoall", p, 40)
			e.recvd["MPI_Neighbor_alltoall"] += 40
		}
	}
	// line: non-periodic, ends have an MPI_PROC_NULL neighbour
	if r > 0 {
		e.collTo("MPI_Neighbor_allgather", r-1, 12)
		e.recvd["MPI_Neighbor_allgather"] += 12
		e.collTo("MPI_Ineighbor_alltoallw", r-1, 8) // 1 double down
		e.recvd["MPI_Ineighbor_alltoallw"] += 6     // 3 shorts from below
	}
	if r < n-1 {
		e.collTo("MPI_Neighbor_allgather", r+1, 12)
		e.recvd["MPI_Neighbor_allgather"] += 12
		e.collTo("MPI_Ineighbor_alltoallw", r+1, 6) // 3 shorts up
		e.recvd["MPI_Ineighbor_alltoallw"] += 8     // 1 double from above
	}
	// dist: sub-rank s = n-1-r sends s+1 ints to s+1 and 2 ints to s+2, twice
	s := n - 1 - r
	world := func(sub int) int { return n - 1 - sub }
	for _, fn := range []string{"MPI_Neighbor_alltoallv", "MPI_Ineighbor_alltoallv"} {
		e.collTo(fn, world(mod(s+1)), uint64(4*(s+1)))
		e.collTo(fn, world(mod(s+2)), 8)
		e.recvd[fn] = uint64(4*(mod(s-1)+1)) + 8
	}
	// ring (graph): r+1 ints to each neighbour
	for _, p := range []int{mod(r - 1), mod(r + 1)} {
		e.collTo("MPI_Neighbor_allgatherv", p, uint64(4*(r+1)))
		e.recvd["MPI_Neighbor_allgatherv"] += uint64(4 * (p + 1))
	}
	// ring2: periodic 1-D cartesian, 1 int to each neighbour
	for _, p := range []int{mod(r - 1), mod(r + 1)} {
		e.collTo("MPI_Neighbor_alltoall", p, 4)
		e.recvd["MPI_Neighbor_alltoall"] += 4
	}
	for fn, c := range map[string]uint64{"MPI_Neighbor_alltoall": 4, "MPI_Neighbor_allgather": 1, "MPI_Ineighbor_alltoallw": 1,
		"MPI_Neighbor_alltoallv": 1, "MPI_Ineighbor_alltoallv": 1, "MPI_Neighbor_allgatherv": 1, "MPI_Comm_free": 6, "MPI_Wait": 2} {
		e.calls[fn] = c
	}
	return e
}

func TestAgentNeighbors(t *testing.T) {
	profileEachMPI(t, "testdata/mpi/neighbors.c", "neighbors done on 4 ranks", nil,
		func(t *testing.T, m mpiImpl, ds []*agentpb.Datagram, job *store.Job) {
			checkProfilesAgainst(t, m, ds, job, false, expectNeighbors)
		})
}
