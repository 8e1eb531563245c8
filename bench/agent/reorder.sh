#!/bin/sh
# The cost of netloom_reorder (docs/reorder.md), in two parts:
#  1. through MPI: 64 ranks (Open MPI, oversubscribed on this machine's
#     cores, 8 fake nodes of 8 ranks via NETLOOM_NODE), a ring scrambled over
#     the nodes, netloom_reorder CALLS times against MPI_Comm_split alone
#     (reorder_mpi.c);
#  2. the mapping alone (agent/src/remap.c compiled into remap_bench.c, no
#     MPI) at 64 and 1,024 ranks of synthetic matrices: 1,024 ranks do not
#     run as processes on 2 cores; the MPI part at that size is a gather of
#     8 KiB rows and a broadcast of 4 KiB of keys.
#   [BASE=rev] bench/agent/reorder.sh [calls]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
calls=${1:-5}
make -s -C "$root/agent" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -I"$root/agent/include" -o "$tmp/reorder_mpi" "$here/reorder_mpi.c"
gcc -O2 -std=c11 -D_GNU_SOURCE -I"$root/agent/src" -o "$tmp/remap_bench" "$here/remap_bench.c" "$root/agent/src/remap.c" -ldl -lpthread
cat >"$tmp/wrap.sh" <<'SH'
#!/bin/sh
NETLOOM_NODE="node$((OMPI_COMM_WORLD_RANK / NL_BENCH_PPN))" exec "$@"
SH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NL_BENCH_PPN=8
echo "== through MPI (Open MPI $(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p'), $(nproc) cores)"
mpirun --oversubscribe -np 64 -x NL_BENCH_PPN -x LD_PRELOAD="$root/bin/lib/libnetloom-ompi.so" sh "$tmp/wrap.sh" "$tmp/reorder_mpi" "$calls" 10
echo "== the mapping alone (remap.c; 16 ranks per node)"
"$tmp/remap_bench" 64 16 "$calls"
"$tmp/remap_bench" 1024 16 "$calls"
# 3. the hot path unchanged: with BASE=<git revision>, that revision's agent
#    is built apart and the wrappers' code compared instruction by
#    instruction (addresses masked) with this one's.
if [ -n "${BASE:-}" ]; then
	mkdir -p "$tmp/base"
	(cd "$root" && git archive "$BASE" agent proto go.mod go.sum) | tar -x -C "$tmp/base"
	make -s -C "$tmp/base/agent" ../bin/lib/libnetloom-ompi.so ../bin/lib/libnetloom-mpich.so >/dev/null
	dis() { # lib function
		objdump -d --no-show-raw-insn "$1" | awk -v f="<$2>:" '$2 == f { p = 1; next } p && /^$/ { exit } p { $1 = ""; print }' |
			sed -E 's/[0-9a-f]+ <[^>]*>/ADDR/g; s/0x[0-9a-f]+\(%rip\)/RIP/g; s/# .*//'
	}
	echo "== the wrappers against $BASE"
	for lib in ompi mpich; do
		for f in MPI_Isend MPI_Irecv MPI_Waitall MPI_Send MPI_Recv MPI_Sendrecv MPI_Allreduce MPI_Put; do
			a=$(dis "$tmp/base/bin/lib/libnetloom-$lib.so" $f)
			b=$(dis "$root/bin/lib/libnetloom-$lib.so" $f)
			if [ "$a" = "$b" ]; then s=identical; else s=DIFFERENT; fi
			printf '%-6s %-14s %4d instructions, %s\n' "$lib" "$f" "$(printf '%s\n' "$b" | wc -l)" "$s"
		done
	done
fi
