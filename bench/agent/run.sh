#!/bin/sh
# Agent overhead, measured in one run: the same benchmark (bench.c) without
# the agent, with it (LD_PRELOAD), and with Open MPI's monitoring components
# (--mca pml_monitoring_enable 1), and with the agent timing every call
# (NETLOOM_TIME_SAMPLE=1; the default times one call in 32), and with the
# wait before each collective timed apart (NETLOOM_WAITS=1), and the agent
# with Open MPI's monitoring on (what netloom run does by default: the agent
# then also counts what the library sends, agent/README.md "Physical
# traffic"), ROUNDS times interleaved; medians printed with the time each
# adds, and the agent's against the monitoring's. "phys-hook" is what the
# agent adds on top of the monitoring less what it adds alone: the cost of
# its hook in the monitoring's calls.
# With BASE=<git revision>, that revision's agent is built apart and run
# as one more configuration ("base", its defaults) in the same interleaved
# rounds, its medians printed beside this build's ("agent-base": what this
# build adds over it), and the two builds' code compared function by
# function (wrappers.sh): the hot path instruction for instruction.
#   [BASE=rev] bench/agent/run.sh [iterations] [rounds]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
iters=${1:-200000}
rounds=${2:-5}
make -s -C "$root/agent" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/bench" "$here/bench.c"
configs="plain agent exact waits monitoring physical"
if [ -n "${BASE:-}" ]; then
	mkdir -p "$tmp/base"
	(cd "$root" && git archive "$BASE" agent proto go.mod go.sum) | tar -x -C "$tmp/base"
	make -s -C "$tmp/base/agent" ../bin/lib/libnetloom-ompi.so ../bin/lib/libnetloom-mpich.so >/dev/null
	configs="plain base agent exact waits monitoring physical"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() { # config
	case $1 in
	plain) mpirun --oversubscribe --bind-to core -np 2 "$tmp/bench" "$iters" ;;
	agent) mpirun --oversubscribe --bind-to core -np 2 -x LD_PRELOAD="$root/bin/lib/libnetloom-ompi.so" -x NETLOOM_DAEMON=127.0.0.1:9 "$tmp/bench" "$iters" ;;
	base) mpirun --oversubscribe --bind-to core -np 2 -x LD_PRELOAD="$tmp/base/bin/lib/libnetloom-ompi.so" -x NETLOOM_DAEMON=127.0.0.1:9 "$tmp/bench" "$iters" ;;
	exact) mpirun --oversubscribe --bind-to core -np 2 -x LD_PRELOAD="$root/bin/lib/libnetloom-ompi.so" -x NETLOOM_DAEMON=127.0.0.1:9 -x NETLOOM_TIME_SAMPLE=1 "$tmp/bench" "$iters" ;;
	waits) mpirun --oversubscribe --bind-to core -np 2 -x LD_PRELOAD="$root/bin/lib/libnetloom-ompi.so" -x NETLOOM_DAEMON=127.0.0.1:9 -x NETLOOM_WAITS=1 "$tmp/bench" "$iters" ;;
	monitoring) mpirun --oversubscribe --bind-to core -np 2 --mca pml_monitoring_enable 1 "$tmp/bench" "$iters" ;;
	physical) mpirun --oversubscribe --bind-to core -np 2 --mca pml_monitoring_enable 1 -x LD_PRELOAD="$root/bin/lib/libnetloom-ompi.so" -x NETLOOM_DAEMON=127.0.0.1:9 "$tmp/bench" "$iters" ;;
	esac
}
i=0
while [ $i -lt "$rounds" ]; do
	for c in $configs; do
		run $c | sed "s/^/$c /" >>"$tmp/results"
	done
	i=$((i + 1))
done
echo "Open MPI $(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p'), 2 ranks, $iters iterations, median of $rounds interleaved rounds"
awk -f "$here/medians.awk" -f /dev/fd/3 "$tmp/results" 3<<'AWK'
END {
	printf "%-22s %9s %9s %9s %9s %9s %9s %11s %11s %11s %11s %11s %9s %9s %9s\n", "metric", "plain", "agent", "exact", "waits", "ompi-mon", "agent+mon", "agent-add", "exact-add", "waits-add", "mon-add", "a+mon-add", "phys-hook", "agent/mon", "exact/mon"
	split("pingpong_0B_oneway pingpong_8B_oneway msgrate_ns_per_msg send_procnull kernel_us_per_iter", order, " ")
	for (i = 1; i <= 5; i++) {
		m = order[i]; if (!(m in metrics)) continue
		p = median("plain," m); a = median("agent," m); s = median("exact," m); w = median("waits," m); o = median("monitoring," m); h = median("physical," m)
		r = (o - p) > 0.005 * p ? sprintf("%.2f", (a - p) / (o - p)) : "-"
		rs = (o - p) > 0.005 * p ? sprintf("%.2f", (s - p) / (o - p)) : "-"
		printf "%-22s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %+11.2f %+11.2f %+11.2f %+11.2f %+11.2f %+9.2f %9s %9s\n", m, p, a, s, w, o, h, a - p, s - p, w - p, o - p, h - p, (h - o) - (a - p), r, rs
	}
	print "(ns, except kernel in us per iteration; ping-pong one-way = 2 MPI calls per rank: added per call is half)"
	if (!n["base,send_procnull"]) exit
	printf "\nagainst BASE (its agent, defaults, in the same rounds)\n%-22s %9s %9s %9s %11s %11s\n", "metric", "plain", "base", "agent", "base-add", "agent-base"
	for (i = 1; i <= 5; i++) {
		m = order[i]; if (!(m in metrics)) continue
		p = median("plain," m); b = median("base," m); a = median("agent," m)
		printf "%-22s %9.2f %9.2f %9.2f %+11.2f %+11.2f\n", m, p, b, a, b - p, a - b
	}
}
AWK
if [ -n "${BASE:-}" ]; then
	echo
	echo "== the code against $BASE (bench/agent/wrappers.sh)"
	"$here/wrappers.sh" "$tmp/base/bin/lib" "$root/bin/lib" || echo "!! a wrapper differs from $BASE's"
fi
mpicc -O2 -I"$root/agent/src" -I"$root/agent/build/ompi" -o "$tmp/mem" "$here/mem.c"
"$tmp/mem" 1024
