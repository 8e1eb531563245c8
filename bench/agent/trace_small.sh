#!/bin/sh
# What the replay trace costs small messages, under both MPIs, in one run:
# trace_bw.c (osu_bw's pattern: windows of 64 MPI_Isend/MPI_Irecv of 8 bytes,
# MPI_Waitall, a 4-byte ack) on 2 ranks of Open MPI and of MPICH, with the
# agent untraced (its defaults), timed (NETLOOM_TIME_SAMPLE=1: every call
# timed, as tracing makes it, nothing recorded) and traced (NETLOOM_TRACE=1,
# what `netloom run --trace` sets), ROUNDS times interleaved. Prints per MPI
# the medians in million messages per second, traced/untraced, and the
# nanoseconds per message (one MPI_Isend or MPI_Irecv and its share of the
# MPI_Waitall, on each rank) that timing every call adds and that tracing
# adds in all.
# With BASE=<git revision>, that revision's agent is built apart and traced
# in the same rounds ("base"), printed beside this build's. Each round runs
# the configurations in another order (rotated by one).
#   [BASE=rev] bench/agent/trace_small.sh [windows] [rounds]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
iters=${1:-20000}
rounds=${2:-7}
make -s -C "$root/agent" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc.openmpi -O2 -o "$tmp/bw-ompi" "$here/trace_bw.c" 2>/dev/null
mpicc.mpich -O2 -o "$tmp/bw-mpich" "$here/trace_bw.c" 2>/dev/null
configs="untraced timed traced"
if [ -n "${BASE:-}" ]; then
	mkdir -p "$tmp/base"
	(cd "$root" && git archive "$BASE" agent proto go.mod go.sum) | tar -x -C "$tmp/base"
	make -s -C "$tmp/base/agent" ../bin/lib/libnetloom-ompi.so ../bin/lib/libnetloom-mpich.so >/dev/null
	configs="untraced timed traced base"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() { # mpi config
	lib="$root/bin/lib/libnetloom-$1.so" trace=1 sample=1
	case $2 in
	untraced) trace=0 sample=32 ;;
	timed) trace=0 ;;
	base) lib="$tmp/base/bin/lib/libnetloom-$1.so" ;;
	esac
	rm -rf "$tmp/out"
	case $1 in
	ompi) mpirun.openmpi --oversubscribe --bind-to core -np 2 -x LD_PRELOAD="$lib" -x NETLOOM_DAEMON=127.0.0.1:9 \
		-x NETLOOM_OUTPUT="$tmp/out" -x NETLOOM_TRACE="$trace" -x NETLOOM_TIME_SAMPLE="$sample" "$tmp/bw-ompi" "$iters" ;;
	mpich) mpirun.mpich -launcher fork -bind-to core -n 2 -genv LD_PRELOAD "$lib" -genv NETLOOM_DAEMON 127.0.0.1:9 \
		-genv NETLOOM_OUTPUT "$tmp/out" -genv NETLOOM_TRACE "$trace" -genv NETLOOM_TIME_SAMPLE "$sample" "$tmp/bw-mpich" "$iters" ;;
	esac | sed -n "s/^bw_8B_window64 /$1-$2 rate /p"
	if [ "$trace" = 1 ] && ! ls "$tmp"/out/*/rank-1.ti.gz >/dev/null 2>&1; then
		echo "!! $1 $2: no trace written" >&2
		exit 1
	fi
}
i=0
while [ $i -lt "$rounds" ]; do
	# each round starts one configuration further on: none always runs
	# after the same one (this pattern's rate drifts within a round on a
	# shared machine)
	set -- $configs
	k=$((i % $#))
	while [ $k -gt 0 ]; do
		set -- "$@" "$1"
		shift
		k=$((k - 1))
	done
	for m in ompi mpich; do
		for c in "$@"; do
			run $m $c >>"$tmp/results"
		done
	done
	i=$((i + 1))
done
echo "osu_bw pattern, 8 B, window 64, $iters windows (+10% warm-up), 2 ranks, the agent on; median of $rounds interleaved rounds, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Open MPI $(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p'), MPICH $(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p')"
# rate: trace_bw's MB/s / 8 bytes = million messages per second
awk -f "$here/medians.awk" -f /dev/fd/3 "$tmp/results" 3<<'AWK'
END {
	printf "%-6s %10s %10s %10s %10s %13s %13s %14s\n", "mpi", "untraced", "timed", "traced", "base", "traced/untr.", "timed-add ns", "traced-add ns"
	split("ompi mpich", mpis, " ")
	for (i = 1; i <= 2; i++) {
		m = mpis[i]
		u = median(m "-untraced,rate") / 8; t = median(m "-traced,rate") / 8; e = median(m "-timed,rate") / 8
		b = n[m "-base,rate"] ? sprintf("%10.3f", median(m "-base,rate") / 8) : sprintf("%10s", "-")
		bx = n[m "-base,rate"] ? sprintf(" (base %.3f, %+.1f ns)", median(m "-base,rate") / 8 / u, 1e3 / (median(m "-base,rate") / 8) - 1e3 / u) : ""
		printf "%-6s %10.3f %10.3f %10.3f %s %13.3f %+13.1f %+14.1f%s\n", m, u, e, t, b, t / u, 1e3 / e - 1e3 / u, 1e3 / t - 1e3 / u, bx
	}
	print "(million messages per second; *-add: ns per message added against untraced; base: BASE traced)"
}
AWK
