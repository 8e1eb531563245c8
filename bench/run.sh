#!/usr/bin/env bash
# make bench: every benchmark, printing ratios measured in one run. Long:
# the Stampede-size ibsim fabric takes a while to come up. Set BENCH_SIZES
# (small,stampede,large) to choose fabric sizes.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== fabric: cached sweep vs ibqueryerrors --load-cache, discovery vs ibnetdiscover, route vs ibtracert"
go run ./bench/fabric --sizes "${BENCH_SIZES:-small,stampede}" --netloom bin/netloom
echo "== storage: bytes on disk per port sample"
go run ./bench/storage
echo "== ui: map first frame and live colour update, Stampede size"
node bench/ui/bench.mjs
echo "== agent: added cost per MPI call versus Open MPI's monitoring, memory per rank"
bench/agent/run.sh
echo "== ingest: the daemon under 1x and 10x Stampede load"
go run ./bench/ingest --systems "${BENCH_SYSTEMS:-stampede,10x-stampede}" --duration "${BENCH_DURATION:-3m}" --netloom bin/netloom
echo "== health: ranking and predictions at Stampede size, against the sweep"
go run ./bench/health -sweeps 120 -netloom bin/netloom -daemon-sweeps 60
echo "== eth: an Ethernet lab's sweep versus snmp_exporter (as root)"
go run ./bench/eth --leaves 2,8,31,63
