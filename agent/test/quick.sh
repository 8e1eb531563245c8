#!/bin/sh
# Quick C-level check of both agent libraries: a 2-rank ring runs with the
# library preloaded and leaves one profile per rank. The exact assertions are
# in test/e2e/agent_test.go (go test ./test/e2e -run TestAgent).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
lib=$(cd "$here/../../bin/lib" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/ring.c" <<'C'
#include <mpi.h>
int main(int argc, char **argv)
{
	int r, n, x = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	MPI_Sendrecv_replace(&x, 1, MPI_INT, (r + 1) % n, 0, (r + n - 1) % n, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	/* derived types freed and made again (the handle comes back): the
	 * datatype size cache must forget a freed type. Rank 0 sends 1 x (2, 5,
	 * then 3 ints) three times each: 3 x 40 = 120 bytes to rank 1. */
	int buf[8] = {0}, ints[3] = {2, 5, 3};
	for (int k = 0; k < 3; k++) {
		MPI_Datatype t;
		MPI_Type_contiguous(ints[k], MPI_INT, &t);
		MPI_Type_commit(&t);
		for (int j = 0; j < 3 && n > 1; j++)
			if (r == 0)
				MPI_Send(buf, 1, t, 1, 7, MPI_COMM_WORLD);
			else if (r == 1)
				MPI_Recv(buf, 1, t, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Type_free(&t);
	}
	/* v and w all-to-alls: rank 0 sends 2 then 3 ints to rank 1, rank 1
	 * sends 1 then 5 ints to rank 0 (nothing to themselves). */
	if (n == 2) {
		int sv[2][2] = {{0, 2}, {1, 0}}, sw[2][2] = {{0, 3}, {5, 0}}; /* [from][to] */
		int rcv[2] = {sv[0][r], sv[1][r]}, rcw[2] = {sw[0][r], sw[1][r]};
		int zero[2] = {0, 0}, bytes[2] = {0, 0}, in[16], out[16] = {0};
		MPI_Datatype ty[2] = {MPI_INT, MPI_INT};
		MPI_Alltoallv(out, sv[r], zero, MPI_INT, in, rcv, zero, MPI_INT, MPI_COMM_WORLD);
		MPI_Alltoallw(out, sw[r], bytes, ty, in, rcw, bytes, ty, MPI_COMM_WORLD);
	}
	MPI_Finalize();
	return 0;
}
C
check() { # name compiler launcher args...
	name=$1 cc=$2
	shift 2
	if ! command -v "$cc" >/dev/null; then
		echo "agent quick check: $name: $cc missing, skipped"
		return
	fi
	"$cc" -o "$tmp/ring-$name" "$tmp/ring.c"
	NETLOOM_OUTPUT="$tmp/out-$name" NETLOOM_JOB_ID=quick "$@" "$tmp/ring-$name"
	for r in 0 1; do
		test -s "$tmp/out-$name/quick/rank-$r.pb" || { echo "agent quick check: $name: no profile for rank $r" >&2; exit 1; }
	done
	if command -v go >/dev/null; then # rank 0 -> 1: 4 (ring) + 120 bytes, 1 + 9 messages
		m=$(cd "$here/../.." && go run ./cmd/netloom report --json "$tmp/out-$name/quick" | tr -d ' \n' | grep -o '"p2p":{"bytes":\[\[0,124\],\[4,0\]\],"msgs":\[\[0,10\],\[1,0\]\]}' || true)
		test -n "$m" || { echo "agent quick check: $name: wrong p2p matrix (datatype cache?)" >&2; exit 1; }
		# the v and w all-to-alls: 0 -> 1: 8 + 12 bytes, 1 -> 0: 4 + 20 bytes, one block each
		m=$(cd "$here/../.." && go run ./cmd/netloom report --json "$tmp/out-$name/quick" | tr -d ' \n' | grep -o '"coll":{"bytes":\[\[0,20\],\[24,0\]\],"msgs":\[\[0,2\],\[2,0\]\]}' || true)
		test -n "$m" || { echo "agent quick check: $name: wrong collective matrix (alltoallv/w)" >&2; exit 1; }
	fi
	echo "agent quick check: $name: ok"
}
check ompi mpicc env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
	mpirun --oversubscribe -np 2 -x NETLOOM_OUTPUT -x NETLOOM_JOB_ID -x LD_PRELOAD="$lib/libnetloom-ompi.so"
check mpich mpicc.mpich mpirun.mpich -np 2 -genv LD_PRELOAD "$lib/libnetloom-mpich.so"
