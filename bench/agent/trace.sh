#!/bin/sh
# What the replay trace (NETLOOM_TRACE=1) costs per nonblocking request, in
# one run:
#  1. trace_reqs.c: agent/src/trace.c alone, driven as the wrappers drive it,
#     ns per post and per completion at N = 1,000 / 10,000 / 100,000 /
#     1,000,000 requests, in windows of 64 and all outstanding at once, with
#     the ratio to N = 1,000 (the request table must not make them grow
#     with N: issue 29);
#  2. trace_bw.c: the osu_bw pattern (8 bytes, window 64) on 2 Open MPI ranks
#     with the agent untraced and traced, ROUNDS times interleaved, medians.
#     BASE_LIB=path/libnetloom-ompi.so adds "traced, BASE_LIB": another build
#     of the agent (the one before a change) traced in the same rounds.
#   bench/agent/trace.sh [N,N,...] [reps] [bw-iterations] [rounds]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ns=${1:-1000,10000,100000,1000000}
reps=${2:-5}
iters=${3:-2000}
rounds=${4:-5}
make -s -C "$root/agent" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -std=c11 -O2 -D_GNU_SOURCE -I"$root/agent/src" -I"$root/agent/include" -I"$root/agent/build/ompi" \
	-o "$tmp/trace_reqs" "$here/trace_reqs.c" -lz
"$tmp/trace_reqs" "$ns" "$reps"
echo
mpicc -O2 -o "$tmp/bw" "$here/trace_bw.c"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
lib="$root/bin/lib/libnetloom-ompi.so"
run() { # label lib trace
	rm -rf "$tmp/out"
	mpirun --oversubscribe --bind-to core -np 2 -x LD_PRELOAD="$2" -x NETLOOM_DAEMON=127.0.0.1:9 \
		-x NETLOOM_OUTPUT="$tmp/out" -x NETLOOM_TRACE="$3" "$tmp/bw" "$iters" | sed "s/^/$1 /"
}
i=0
while [ $i -lt "$rounds" ]; do
	run untraced "$lib" 0 >>"$tmp/bw.txt"
	run traced "$lib" 1 >>"$tmp/bw.txt"
	if [ -n "${BASE_LIB:-}" ]; then
		run base "$BASE_LIB" 1 >>"$tmp/bw.txt"
	fi
	i=$((i + 1))
done
echo "osu_bw pattern, 8 B, window 64, $iters windows (+10% warm-up), 2 Open MPI ranks, the agent on; MB/s, median of $rounds interleaved rounds"
awk '
{ v[$1, ++n[$1]] = $3 }
function median(k,   i, j, t, m, a) {
	m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
	printf "  untraced          %8.2f\n", median("untraced")
	printf "  traced            %8.2f\n", median("traced")
	if (n["base"]) printf "  traced, BASE_LIB  %8.2f\n", median("base")
}' "$tmp/bw.txt"
