#!/usr/bin/env bash
# make demo-eth (as root): an Ethernet fabric of network namespaces (the lab
# of docs/ethlab.md: two leaves under a spine, hosts h1..h4, lldpd and snmpd
# in every switch) monitored by `netloom serve --fabric eth:FILE` over SNMP
# and LLDP, and a real MPI job (Open MPI, a ring over h1..h4 under the
# Netloom agent) run again and again. Its bytes really cross the veths: the
# links it crosses light up in the UI from the switches' own counters, and
# each link's page says how much of what the counters measured the job's
# attributed bytes explain. Ctrl-C stops everything and removes the lab.
#
# Environment: DEMO_LISTEN (default localhost:8466), DEMO_LAB (lab id,
# default nldem), DEMO_DIR (its files, default var/demo-eth), DEMO_SIZE (bytes per message, default 4194304),
# DEMO_ITERS (messages per rank per job, default 200), DEMO_SECONDS (stop
# after this many seconds and print the last job's links; default: run
# until Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || { echo "demo-eth: needs root (network namespaces)" >&2; exit 1; }
listen=${DEMO_LISTEN:-localhost:8466}
id=${DEMO_LAB:-nldem}
size=${DEMO_SIZE:-4194304}
iters=${DEMO_ITERS:-200}
dir=${DEMO_DIR:-$(pwd)/var/demo-eth}
rm -rf "$dir" && mkdir -p "$dir"

go build -o bin/ethlab ./test/ethlab/cmd/ethlab
pids=()
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bin/ethlab down "$id" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM

bin/ethlab down "$id" >/dev/null 2>&1 || true # a lab left by an earlier run
echo "demo-eth: building the lab $id (two leaves, a spine, hosts h1..h4)"
bin/ethlab up --id "$id" --preset two-leaf | tee "$dir/lab.txt"
read -r mgmt_cidr mgmt_ip < <(sed -n 's/^management \([^ ]*\) (root namespace \([^ ]*\) on .*/\1 \2/p' "$dir/lab.txt")
bin/ethlab config "$id" > "$dir/eth.yaml"

# Anonymous access is off: an administrator account and an API token.
. scripts/demo/accounts.sh

# The agents run in the hosts' namespaces and report over the lab's
# management network, unverified (no munged in the lab), from it only.
agent="$mgmt_ip:8467"
echo "demo-eth: starting netloom serve on http://$listen, polling the switches of $dir/eth.yaml"
bin/netloom serve --fabric "eth:$dir/eth.yaml" --db "$dir/netloom.db" --listen "$listen" \
  --config "$dir/netloom.yaml" \
  --agent-listen "$agent" --agent-address-file "$dir/agent-address" \
  --agent-auth none --agent-networks "$mgmt_cidr" \
  --sweep-interval 2s --discover-interval 1m > "$dir/netloom.log" 2>&1 & pids+=($!)
for _ in $(seq 60); do curl -sf "${auth[@]}" "http://$listen/api/v1/status" >/dev/null 2>&1 && break; sleep 0.5; done
curl -sf "${auth[@]}" "http://$listen/api/v1/status" >/dev/null || { echo "demo-eth: the daemon did not start; see $dir/netloom.log" >&2; exit 1; }
# Two sweeps before the first job, so the counters measure all of it.
for _ in $(seq 60); do
  curl -sf "${auth[@]}" "http://$listen/api/v1/status" | grep -q '"count":\([2-9]\|[1-9][0-9]\)' && break
  sleep 0.5
done

# A real MPI job under the agent, over and over: a ring over h1..h4, so
# h2 -> h3 and h4 -> h1 cross the leaves' uplinks both ways.
mpicc -O2 -o "$dir/ring" test/ethlab/testdata/ring.c
(
  n=0
  while true; do
    n=$((n + 1))
    bin/ethlab mpirun "$id" --hosts h1,h2,h3,h4 --env LD_PRELOAD="$(pwd)/bin/lib/libnetloom-ompi.so" \
      --env NETLOOM_DAEMON="$agent" --env NETLOOM_INTERVAL=1 --env NETLOOM_JOB_ID="ring-$n" \
      "$dir/ring" "$size" "$iters" >> "$dir/mpi.log" 2>&1 || sleep 5
    sleep 12 # the switches' counters of one job apart from the next's
  done
) & pids+=($!)

cat <<MSG

Netloom Ethernet demo is running.
  UI:          http://$listen/  (sign in as admin, password $password): the map, the jobs ring-1, ring-2, ...,
               each job's links (measured by the switches, explained by the job's bytes)
  API token:   T=$token
  jobs:        curl -H "Authorization: Bearer \$T" http://$listen/api/v1/jobs
  a job:       curl -H "Authorization: Bearer \$T" http://$listen/api/v1/jobs/ring-1/why
  hot spots:   curl -H "Authorization: Bearer \$T" 'http://$listen/api/v1/hotspots?min_utilization=1'
  route:       curl -H "Authorization: Bearer \$T" 'http://$listen/api/v1/routes?src=h1&dst=h3'
  CLI:         bin/netloom fabric discover --fabric eth:$dir/eth.yaml
  the lab:     bin/ethlab status; ip netns exec ethl${id}-leaf1 ip -s link
Logs in $dir. Press Ctrl-C to stop (the lab is removed).
MSG
if [ -n "${DEMO_SECONDS:-}" ]; then
  sleep "$DEMO_SECONDS"
  curl -s "${auth[@]}" "http://$listen/api/v1/status"; echo
  last=$(grep -c " sent " "$dir/mpi.log" || true)
  echo "demo-eth: $((last / 4)) ring jobs ran; the links of ring-1, measured by the switches and explained by its bytes:"
  if command -v python3 >/dev/null; then
    python3 - "http://$listen" "$token" "$dir/ring-1-why.json" <<'PY'
import datetime, json, sys, urllib.request
base, token, path = sys.argv[1:]
def get(p):
    rq = urllib.request.Request(base + "/api/v1" + p, headers={"Authorization": "Bearer " + token})
    return json.load(urllib.request.urlopen(rq))
job = get("/jobs/ring-1")["job"]
t = lambda s: datetime.datetime.fromisoformat(s[:19]).replace(tzinfo=datetime.timezone.utc)
# The switches' counters over the job's run and 10 s after it: net-snmp
# serves IF-MIB values up to 5 s old, and the job's last report is
# attributed at the sweep after its end.
frm, to = t(job["start"]), t(job["end"]) + datetime.timedelta(seconds=10)
fmt = lambda d: d.strftime("%Y-%m-%dT%H:%M:%SZ")
w = get(f"/jobs/ring-1/why?from={fmt(frm)}&to={fmt(to)}&limit=100")
json.dump(w, open(path, "w"))
cut = f", cut at {w['limit']}" if w["truncated"] else ""
print(f"  {fmt(frm)} .. {fmt(to)}, route model: {w.get('route_model', 'forwarding tables')}; {len(w['links'])} of its {w['total']} directions{cut}")
for l in w["links"]:
    e = l.get("explained_pct")
    print(f"  {l['from_description']:>7} -> {l['to_description']:<7} measured {l['measured']['bytes']:>13,} B"
          f"  job {l['job_bytes']:>13,} B  explained {'-' if e is None else format(e, '.2f') + '%'}")
PY
  else
    curl -s "${auth[@]}" "http://$listen/api/v1/jobs/ring-1/why" | tee "$dir/ring-1-why.json"; echo
  fi
else
  wait
fi
