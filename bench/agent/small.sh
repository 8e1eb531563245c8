#!/bin/sh
# What each agent mode costs small messages, in one run: small.c (osu_bw's
# pattern: windows of 64 MPI_Isend of 0, 1, 8 and 64 bytes) on 2 Open MPI
# ranks, ROUNDS times interleaved, in four configurations:
#   plain       no agent
#   logical     the agent alone (netloom run --logical)
#   physical    the agent with Open MPI's monitoring on (netloom run's default)
#   monitoring  Open MPI's monitoring alone
# and prints medians and each mode's loss against plain, in percent.
#   bench/agent/small.sh [loops] [rounds]
# Uses the agent in bin/lib, or NETLOOM_AGENT_LIB (built elsewhere).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
loops=${1:-4000}
rounds=${2:-7}
lib=${NETLOOM_AGENT_LIB:-$root/bin/lib/libnetloom-ompi.so}
[ -f "$lib" ] || make -s -C "$root/agent" >/dev/null
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" # where the agent finds protobuf-c, if not installed
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/small" "$here/small.c"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
agent="-x LD_PRELOAD=$lib -x LD_LIBRARY_PATH -x NETLOOM_DAEMON=127.0.0.1:9"
run() { # config
	case $1 in
	plain) mpirun --oversubscribe --bind-to core -np 2 "$tmp/small" "$loops" ;;
	logical) mpirun --oversubscribe --bind-to core -np 2 $agent "$tmp/small" "$loops" ;;
	physical) mpirun --oversubscribe --bind-to core -np 2 --mca pml_monitoring_enable 1 $agent "$tmp/small" "$loops" ;;
	monitoring) mpirun --oversubscribe --bind-to core -np 2 --mca pml_monitoring_enable 1 "$tmp/small" "$loops" ;;
	esac
}
i=0
while [ $i -lt "$rounds" ]; do
	for c in plain logical physical monitoring; do
		run $c | sed "s/^/$c /" >>"$tmp/results"
	done
	i=$((i + 1))
done
echo "Open MPI $(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p'), 2 ranks, $loops windows of 64, median of $rounds interleaved rounds, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
awk -f "$here/medians.awk" -f /dev/fd/3 "$tmp/results" 3<<'AWK'
END {
	printf "%-10s %10s %10s %10s %10s %9s %9s %9s\n", "metric", "plain", "logical", "physical", "monitoring", "logical%", "physical%", "monitor%"
	split("rate_0B rate_1B bw_1B rate_8B bw_8B rate_64B bw_64B", order, " ")
	for (i = 1; i <= 7; i++) {
		m = order[i]; if (!(m in metrics)) continue
		p = median("plain," m); l = median("logical," m); h = median("physical," m); o = median("monitoring," m)
		printf "%-10s %10.3f %10.3f %10.3f %10.3f %+8.1f%% %+8.1f%% %+8.1f%%\n", m, p, l, h, o, (l - p) / p * 100, (h - p) / p * 100, (o - p) / p * 100
	}
	print "(rate: million messages per second; bw: MB/s; %: change against plain, negative = slower)"
}
AWK
