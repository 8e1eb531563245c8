#!/usr/bin/env bash
# make demo: a simulated InfiniBand fabric (ibsim + OpenSM) monitored by
# `netloom serve` on the embedded database, with synthetic traffic injected
# through ibsim's console so the counters move, and a real MPI job (Open MPI,
# 8 ranks on hosts n1..n4) run under the Netloom agent again and again. The
# UI is at http://DEMO_LISTEN/. Ctrl-C stops everything.
#
# Environment: DEMO_HOSTS (default 64), DEMO_LISTEN (default localhost:8466),
# DEMO_AGENT (UDP for the agents, default 127.0.0.1:8467), DEMO_DIR (its
# files, default var/demo), DEMO_SECONDS (stop after this many seconds;
# default: run until Ctrl-C).
#
# The first run of the job is traced (job demo-traced, its profile and
# replay traces in DIR/traces/demo-traced, the daemon's --trace-root), so
# the job page's "What would help", netloom report, model and place have a
# job to answer for; the banner lists the commands to try.
set -euo pipefail
cd "$(dirname "$0")/.."

hosts=${DEMO_HOSTS:-64}
listen=${DEMO_LISTEN:-localhost:8466}
agent=${DEMO_AGENT:-127.0.0.1:8467}
dir=${DEMO_DIR:-$(pwd)/var/demo}
preload=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
rm -rf "$dir" && mkdir -p "$dir"
export IBSIM_SOCKNAME="netloom-demo-$$" OSM_TMP_DIR="$dir" OSM_CACHE_DIR="$dir"

pids=()
cleanup() {
  pkill -f "$dir/halo" 2>/dev/null || true   # the MPI job's launcher and ranks
  # Newest first: OpenSM can hang on its way out when ibsim is gone first.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  for _ in $(seq 100); do # up to 10 s, then no more waiting
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
# Ctrl-C or a TERM is the way to stop the demo: it ends cleanly (status 0).
trap cleanup EXIT
trap 'exit 0' INT TERM

echo "demo: generating a fat tree of $hosts hosts"
bin/netloom topo gen fat-tree --hosts "$hosts" --radix 16 -o "$dir/fabric.net"

echo "demo: starting ibsim and OpenSM"
mkfifo "$dir/console"
sleep infinity > "$dir/console" & pids+=($!)   # keeps ibsim's stdin open
ibsim -s "$dir/fabric.net" < "$dir/console" > "$dir/ibsim.log" 2>&1 & pids+=($!)
exec 3> "$dir/console"                         # our handle for console commands
sleep 1
LD_PRELOAD=$preload opensm -s 0 -f "$dir/opensm.log" > "$dir/opensm.out" 2>&1 & pids+=($!)
for _ in $(seq 120); do grep -q "Entering MASTER state" "$dir/opensm.out" && break; sleep 0.5; done
grep -q "Entering MASTER state" "$dir/opensm.out" || { echo "demo: OpenSM did not come up; see $dir/opensm.log" >&2; exit 1; }
for _ in $(seq 60); do LD_PRELOAD=$preload ibtracert 1 2 >/dev/null 2>&1 && break; sleep 0.5; done

# Anonymous access is off: an administrator account and an API token.
. scripts/demo/accounts.sh

# The demo's agents run without munged, so the daemon is told to accept
# their datagrams unverified (the default, agent_auth auto, would refuse
# them all), and only from this machine: the job's ranks all run here.
echo "demo: starting netloom serve on http://$listen, MPI agents to udp://$agent"
LD_PRELOAD=$preload bin/netloom serve --fabric ib --db "$dir/netloom.db" --listen "$listen" \
  --config "$dir/netloom.yaml" \
  --agent-listen "$agent" --agent-address-file "$dir/agent-address" \
  --agent-auth none --agent-networks 127.0.0.0/8 --trace-root "$dir/traces" \
  --sweep-interval 5s --discover-interval 1m > "$dir/netloom.log" 2>&1 & pids+=($!)
for _ in $(seq 60); do curl -sf "${auth[@]}" "http://$listen/api/v1/status" >/dev/null 2>&1 && break; sleep 0.5; done

# Synthetic traffic: raise the data counters of a few switch ports every
# few seconds through ibsim's console, as real traffic would.
switches=$(grep -o '^Switch[[:space:]]*[0-9]* "[^"]*"' "$dir/fabric.net" | sed 's/.*"\(.*\)"/\1/' | head -4)
(
  n=0
  while sleep 5; do
    n=$((n + 1))
    for sw in $switches; do
      for p in 1 2 9 10; do
        echo "PerformanceSet \"$sw\"[$p] PortCountersExtended.PortXmitData=$((n * 250000000 * p))" >&3
        echo "PerformanceSet \"$sw\"[$p] PortCountersExtended.PortRcvData=$((n * 120000000 * p))" >&3
      done
    done
  done
) & pids+=($!)

# A real MPI job under the agent, over and over: 8 ranks, two per host.
# The first run, 2,000 iterations (about 130,000 MPI events to replay;
# the daemon replays at most 2 million), is traced with its waits timed
# (job demo-traced); the daemon reads its traces under its trace root once
# it has ended.
mpicc -O2 -o "$dir/halo" scripts/demo/halo.c
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$dir/traces"
(
  bin/netloom run --daemon "$agent" --interval 2s --job-id demo-traced --trace --waits --output "$dir/traces" -- \
    mpirun --oversubscribe -np 8 scripts/demo/onnode.sh "$dir/halo" 60 2000 >> "$dir/mpi.log" 2>&1
  echo "demo: the traced job demo-traced has ended" >> "$dir/mpi.log"
  while true; do
    bin/netloom run --daemon "$agent" --interval 2s -- \
      mpirun --oversubscribe -np 8 scripts/demo/onnode.sh "$dir/halo" 60 >> "$dir/mpi.log" 2>&1 || sleep 5
  done
) & pids+=($!)

cat <<MSG

Netloom demo is running.
  UI:          http://$listen/  (sign in as admin, password $password)
  MPI agents:  udp://$agent  (unverified, --agent-auth none; from 127.0.0.0/8 only)
  your jobs:   bin/netloom run --daemon $agent -- mpirun -np 4 ./app  (without --daemon, netloom run says where it would send)
  API token:   T=$token
  status:      curl -H "Authorization: Bearer \$T" http://$listen/api/v1/status
  fabric:      curl -H "Authorization: Bearer \$T" http://$listen/api/v1/fabric/nodes
  top links:   curl -H "Authorization: Bearer \$T" 'http://$listen/api/v1/links/top?by=utilization&n=5'
  route:       curl -H "Authorization: Bearer \$T" 'http://$listen/api/v1/routes?src=n1&dst=n$hosts'
  events:      curl -H "Authorization: Bearer \$T" http://$listen/api/v1/events
  MPI jobs:    curl -H "Authorization: Bearer \$T" http://$listen/api/v1/jobs
  metrics:     curl -H "Authorization: Bearer \$T" http://$listen/metrics
  port metrics: curl -H "Authorization: Bearer \$T" 'http://$listen/metrics/ports?counters=xmit_data_bytes'
  CLI:         IBSIM_SOCKNAME=$IBSIM_SOCKNAME LD_PRELOAD=$preload bin/netloom fabric route n1 n$hosts
The traced job demo-traced ends within a minute of this banner ("has ended" in $dir/mpi.log); then:
  report:      bin/netloom report $dir/traces/demo-traced
  model:       bin/netloom model $dir/traces/demo-traced --db $dir/netloom.db
  place:       bin/netloom place demo-traced --db $dir/netloom.db --nodes 'n[1-8]' --cores-per-node 2
  health:      bin/netloom health --db $dir/netloom.db --window 10m --all
  what-ifs:    curl -H "Authorization: Bearer \$T" http://$listen/api/v1/jobs/demo-traced/model
  job page:    http://$listen/jobs/demo-traced
Logs in $dir. Press Ctrl-C to stop.
MSG
if [ -n "${DEMO_SECONDS:-}" ]; then
  sleep "$DEMO_SECONDS"
  curl -s "${auth[@]}" "http://$listen/api/v1/status"; echo
else
  wait
fi
