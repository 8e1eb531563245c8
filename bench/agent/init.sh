#!/bin/sh
# MPI_Init's time with and without the agent, in one run: NP ranks of
# init.c (Open MPI, oversubscribed on this machine), ROUNDS times
# interleaved; prints the median of the slowest rank's MPI_Init and the
# ratio agent/plain. The agent makes no MPI call in MPI_Init (issue 21).
#   bench/agent/init.sh [np] [rounds]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
np=${1:-64}
rounds=${2:-7}
make -s -C "$root/agent" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/init" "$here/init.c"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
i=0
while [ $i -lt "$rounds" ]; do
	mpirun --oversubscribe -np "$np" "$tmp/init" | sed 's/^/plain /' >>"$tmp/results"
	mpirun --oversubscribe -np "$np" -x LD_PRELOAD="$root/bin/lib/libnetloom-ompi.so" -x NETLOOM_DAEMON=127.0.0.1:9 \
		"$tmp/init" | sed 's/^/agent /' >>"$tmp/results"
	i=$((i + 1))
done
echo "Open MPI, $np ranks, MPI_Init of the slowest rank, median of $rounds interleaved rounds"
awk '
function median(k,   i, j, t, m, a) {
	m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
{ n[$1]++; v[$1, n[$1]] = $3 }
END {
	p = median("plain"); a = median("agent")
	printf "plain %.3f s, agent %.3f s, agent/plain %.3f\n", p, a, a / p
}' "$tmp/results"
