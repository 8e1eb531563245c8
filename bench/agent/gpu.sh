#!/bin/sh
# What the agent costs a CUDA job's host buffers, in one run: bench.c (host
# buffers only) on 2 Open MPI ranks, ROUNDS times interleaved, in four
# configurations: plain, agent (a CPU-only process: no probe, the wrappers'
# fast path), plain+cuda and agent+cuda (cuda_ctx.so preloaded: the driver
# loaded and a context current, so the agent probes every buffer, a cached
# page at a time). "probe-add" = (agent+cuda - plain+cuda) - (agent - plain)
# is what probing adds to the agent. Needs a GPU and libcuda.so.1; uses the
# agent in bin/lib as built, or NETLOOM_AGENT_LIB (test/gpu/run.sh).
#   bench/agent/gpu.sh [iterations] [rounds]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
iters=${1:-200000}
rounds=${2:-5}
lib=${NETLOOM_AGENT_LIB:-$root/bin/lib/libnetloom-ompi.so}
[ -f "$lib" ] || make -s -C "$root/agent" >/dev/null
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" # where the agent finds protobuf-c, if not installed
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/bench" "$here/bench.c"
cc -O2 -shared -fPIC -o "$tmp/cuda_ctx.so" "$here/cuda_ctx.c" -ldl
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() { # config
	case $1 in
	plain) mpirun --oversubscribe --bind-to core -np 2 "$tmp/bench" "$iters" ;;
	agent) mpirun --oversubscribe --bind-to core -np 2 -x LD_PRELOAD="$lib" -x LD_LIBRARY_PATH -x NETLOOM_DAEMON=127.0.0.1:9 "$tmp/bench" "$iters" ;;
	plain+cuda) mpirun --oversubscribe --bind-to core -np 2 -x LD_PRELOAD="$tmp/cuda_ctx.so" "$tmp/bench" "$iters" ;;
	agent+cuda) mpirun --oversubscribe --bind-to core -np 2 -x LD_PRELOAD="$tmp/cuda_ctx.so:$lib" -x LD_LIBRARY_PATH -x NETLOOM_DAEMON=127.0.0.1:9 "$tmp/bench" "$iters" ;;
	esac
}
i=0
while [ $i -lt "$rounds" ]; do
	for c in plain agent plain+cuda agent+cuda; do
		run $c | sed "s/^/$c /" >>"$tmp/results"
	done
	i=$((i + 1))
done
echo "Open MPI $(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p'), 2 ranks, $iters iterations, median of $rounds interleaved rounds, $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
awk -f "$here/medians.awk" -f /dev/fd/3 "$tmp/results" 3<<'AWK'
END {
	printf "%-22s %9s %9s %11s %11s %11s %11s %11s\n", "metric", "plain", "agent", "plain+cuda", "agent+cuda", "agent-add", "a+cuda-add", "probe-add"
	split("pingpong_0B_oneway pingpong_8B_oneway msgrate_ns_per_msg send_procnull kernel_us_per_iter", order, " ")
	for (i = 1; i <= 5; i++) {
		m = order[i]; if (!(m in metrics)) continue
		p = median("plain," m); a = median("agent," m); pc = median("plain+cuda," m); ac = median("agent+cuda," m)
		printf "%-22s %9.2f %9.2f %11.2f %11.2f %+11.2f %+11.2f %+11.2f\n", m, p, a, pc, ac, a - p, ac - pc, (ac - pc) - (a - p)
	}
	print "(ns, except kernel in us per iteration; ping-pong one-way = 2 MPI calls per rank: added per call is half)"
}
AWK
