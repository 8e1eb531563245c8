#!/usr/bin/env bash
# make demo-eth (as root): an Ethernet fabric of network namespaces (the lab
# of docs/ethlab.md, preset ecmp: a routed leaf-spine, leaf1 with h1, h2 and
# leaf2 with h3, h4, each leaf linked to spine1 and spine2, lldpd and snmpd
# in every switch, and every switch port exporting sFlow through a pmacctd)
# monitored by `netloom serve --fabric eth:FILE` over SNMP and LLDP, with its
# sFlow collector (sflow_listen) taking the switches' samples. Two MPI jobs
# under the Netloom agent run again and again at the same time: alpha-N, a
# ring over h1 and h3, and beta-N, a ring over h2 and h4. Both host pairs
# are pinned over spine1 (ethlab pin): an ECMP collision, leaf1's uplink to
# spine1 carrying both jobs while its equal-cost uplink to spine2 idles
# (and the same on leaf2, back). The switches' own counters measure it, the
# samples show which flow took which uplink, and the hot spots and job
# pages name the collision. Ctrl-C stops everything and removes the lab.
#
# Environment: DEMO_LISTEN (default localhost:8466), DEMO_LAB (lab id,
# default nldem), DEMO_DIR (its files, default var/demo-eth), DEMO_SIZE (bytes per message, default 4194304),
# DEMO_ITERS (messages per rank per job, default 200), DEMO_SFLOW_RATE
# (the switches sample 1 packet in N, default 100), DEMO_SECONDS (run one
# round only, stop after it or after this many seconds, whichever is later,
# and print the round's jobs, collisions and uplink counters; default: run
# until Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || { echo "demo-eth: needs root (network namespaces)" >&2; exit 1; }
listen=${DEMO_LISTEN:-localhost:8466}
id=${DEMO_LAB:-nldem}
size=${DEMO_SIZE:-4194304}
iters=${DEMO_ITERS:-200}
sflow_rate=${DEMO_SFLOW_RATE:-100}
dir=${DEMO_DIR:-$(pwd)/var/demo-eth}
rm -rf "$dir" && mkdir -p "$dir"

go build -o bin/ethlab ./test/ethlab/cmd/ethlab
pids=()
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bin/ethlab down "$id" >/dev/null 2>&1 || true
}
# Ctrl-C or a TERM is the way to stop the demo: cleanup runs once (on
# exit) and the demo ends cleanly (status 0), as make demo does; a trap
# that ran cleanup on INT and then went on left `wait` to end the script
# with 130 (143 for TERM), which make reported as an error.
trap cleanup EXIT
trap 'exit 0' INT TERM

bin/ethlab down "$id" >/dev/null 2>&1 || true # a lab left by an earlier run
echo "demo-eth: building the lab $id (routed: two leaves, two spines, hosts h1..h4; sFlow from every switch port, 1 in $sflow_rate)"
bin/ethlab up --id "$id" --preset ecmp --sflow :6343 --sflow-rate "$sflow_rate" | tee "$dir/lab.txt"
read -r mgmt_cidr mgmt_ip < <(sed -n 's/^management \([^ ]*\) (root namespace \([^ ]*\) on .*/\1 \2/p' "$dir/lab.txt")
bin/ethlab config "$id" > "$dir/eth.yaml"
# The collision: both jobs' host pairs over spine1, both directions.
bin/ethlab pin "$id" h1 h3 spine1
bin/ethlab pin "$id" h2 h4 spine1
# uplinks prints every leaf uplink's transmitted bytes, by the kernel's
# counters in the leaf's namespace: "leaf1 spine1 swp3 BYTES".
uplinks() {
  sed -n 's/^  link \(leaf[0-9]*\) \(swp[0-9]*\) <-> \(spine[0-9]*\) .*/\1 \3 \2/p' "$dir/lab.txt" |
    while read -r leaf spine port; do
      echo "$leaf $spine $port $(ip netns exec "ethl$id-$leaf" cat "/sys/class/net/$port/statistics/tx_bytes")"
    done
}

# Anonymous access is off: an administrator account and an API token.
. scripts/demo/accounts.sh

# The agents run in the hosts' namespaces and report over the lab's
# management network, unverified (no munged in the lab), from it only.
agent="$mgmt_ip:8467"
echo "demo-eth: starting netloom serve on http://$listen, polling the switches of $dir/eth.yaml"
bin/netloom serve --fabric "eth:$dir/eth.yaml" --db "$dir/netloom.db" --listen "$listen" \
  --config "$dir/netloom.yaml" \
  --agent-listen "$agent" --agent-address-file "$dir/agent-address" \
  --agent-auth none --agent-networks "$mgmt_cidr" --sflow-listen "$mgmt_ip:6343" \
  --sweep-interval 2s --discover-interval 1m > "$dir/netloom.log" 2>&1 & pids+=($!)
for _ in $(seq 60); do curl -sf "${auth[@]}" "http://$listen/api/v1/status" >/dev/null 2>&1 && break; sleep 0.5; done
curl -sf "${auth[@]}" "http://$listen/api/v1/status" >/dev/null || { echo "demo-eth: the daemon did not start; see $dir/netloom.log" >&2; exit 1; }
# Two sweeps before the first job, so the counters measure all of it.
for _ in $(seq 60); do
  curl -sf "${auth[@]}" "http://$listen/api/v1/status" | grep -q '"count":\([2-9]\|[1-9][0-9]\)' && break
  sleep 0.5
done

# Two real MPI jobs under the agent at once, over and over: alpha-N, a ring
# over h1 and h3, and beta-N over h2 and h4, each rank sending to the other
# leaf. Each round's uplink counters before and after, in uplinks-N.txt.
mpicc -O2 -o "$dir/ring" test/ethlab/testdata/ring.c
job() { # NAME HOSTS
  bin/ethlab mpirun "$id" --hosts "$2" --env LD_PRELOAD="$(pwd)/bin/lib/libnetloom-ompi.so" \
    --env NETLOOM_DAEMON="$agent" --env NETLOOM_INTERVAL=1 --env NETLOOM_JOB_ID="$1" \
    "$dir/ring" "$size" "$iters" >> "$dir/mpi.log" 2>&1
}
(
  n=0
  while true; do
    n=$((n + 1))
    uplinks > "$dir/uplinks-$n.before"
    job "alpha-$n" h1,h3 & a=$!
    job "beta-$n" h2,h4 & b=$!
    wait $a || sleep 5
    wait $b || sleep 5
    uplinks > "$dir/uplinks.tmp" && mv "$dir/uplinks.tmp" "$dir/uplinks-$n.after"
    # The switches' counters and samples of one round apart from the
    # next's: a job's range ends 10 s after it, the samples' buckets are 10 s.
    sleep 25
  done
) & pids+=($!)

cat <<MSG

Netloom Ethernet demo is running.
  UI:          http://$listen/  (sign in as admin, password $password): the map, the jobs alpha-1, beta-1, ...
  the collision: alpha-N (h1 <-> h3) and beta-N (h2 <-> h4) both cross leaf1's uplink to spine1 (and
               leaf2's, back): pinned there by \`bin/ethlab pin\`, while the equal-cost uplinks to spine2 idle.
               The switches export sFlow (a pmacctd per port, 1 in $sflow_rate) to sflow_listen $mgmt_ip:6343;
               the samples show which job's flows took which uplink.
  look at:     the job pages http://$listen/jobs/alpha-1 and http://$listen/jobs/beta-1 (the collision,
               with the idle uplink beside it); the hot spots' collisions (curl below);
               the uplinks' own counters: ip netns exec ethl${id}-leaf1 ip -s link show swp3 (spine1), swp4 (spine2)
  API token:   T=$token
  hot spots:   curl -H "Authorization: Bearer \$T" 'http://$listen/api/v1/hotspots?min_utilization=0'  (collisions)
  a job:       curl -H "Authorization: Bearer \$T" http://$listen/api/v1/jobs/alpha-1/why  (links, collisions)
  jobs:        curl -H "Authorization: Bearer \$T" http://$listen/api/v1/jobs
  route:       curl -H "Authorization: Bearer \$T" 'http://$listen/api/v1/routes?src=h1&dst=h3'
  CLI:         bin/netloom fabric discover --fabric eth:$dir/eth.yaml
  the lab:     bin/ethlab status; ip netns exec ethl${id}-leaf1 ip rule (the pins)
Logs in $dir. Press Ctrl-C to stop (the lab is removed).
MSG
if [ -n "${DEMO_SECONDS:-}" ]; then
  t0=$SECONDS
  # The first round alone: the jobs' loop stops once it is over, then the
  # switches' counters are served (net-snmp's are up to 5 s old) and the
  # jobs' last reports attributed.
  for _ in $(seq 1200); do [ -f "$dir/uplinks-1.after" ] && break; sleep 0.5; done
  kill "${pids[-1]}" 2>/dev/null || true
  sleep 12
  left=$((DEMO_SECONDS - (SECONDS - t0)))
  if [ "$left" -gt 0 ]; then sleep "$left"; fi
  curl -s "${auth[@]}" "http://$listen/api/v1/status"; echo
  echo "demo-eth: the first round of alpha and beta, measured by the switches:"
  python3 - "http://$listen" "$token" "$dir" <<'PY'
import datetime, json, sys, urllib.request
base, token, dir = sys.argv[1:]
def get(p):
    rq = urllib.request.Request(base + "/api/v1" + p, headers={"Authorization": "Bearer " + token})
    return json.load(urllib.request.urlopen(rq))
t = lambda s: datetime.datetime.fromisoformat(s[:19]).replace(tzinfo=datetime.timezone.utc)
fmt = lambda d: d.strftime("%Y-%m-%dT%H:%M:%SZ")
# The uplinks' own counters over the round (the kernel's, in the leaves).
def read(path):
    return {(l.split()[0], l.split()[1]): int(l.split()[3]) for l in open(path) if l.strip()}
b, a = read(dir + "/uplinks-1.before"), read(dir + "/uplinks-1.after")
for (leaf, spine) in sorted(b):
    print(f"  {leaf} -> {spine}: sent {a[(leaf, spine)] - b[(leaf, spine)]:>13,} B (the kernel's counter)")
# Each job's links over its run and 10 s after it: net-snmp serves IF-MIB
# values up to 5 s old, and the job's last report is attributed at the
# sweep after its end.
span = []
for name in ("alpha-1", "beta-1"):
    job = get(f"/jobs/{name}")["job"]
    frm, to = t(job["start"]), t(job["end"]) + datetime.timedelta(seconds=10)
    span += [frm, to]
    w = get(f"/jobs/{name}/why?from={fmt(frm)}&to={fmt(to)}&limit=100")
    json.dump(w, open(f"{dir}/{name}-why.json", "w"))
    cut = f", cut at {w['limit']}" if w["truncated"] else ""
    print(f"  {name}: {fmt(frm)} .. {fmt(to)}, route model: {w.get('route_model', 'forwarding tables')}; {len(w['links'])} of its {w['total']} directions{cut}")
    for l in w["links"]:
        e = l.get("explained_pct")
        rm = f"  ({l['route_model']})" if l.get("route_model") else ""
        print(f"  {l['from_description']:>7} -> {l['to_description']:<7} measured {l['measured']['bytes']:>13,} B"
              f"  job {l['job_bytes']:>13,} B  explained {'-' if e is None else format(e, '.2f') + '%'}{rm}")
    for c in w.get("collisions") or []:
        print(f"  {name}'s collision: {c['switch_description']} -> {c['to_description']} shared by {', '.join(c['jobs'])};"
              f" idle alternative {c['switch_description']} -> {c['least_loaded']['to_description']}")
# The hot spots from the round's start until now (no round after it).
now = datetime.datetime.now(datetime.timezone.utc)
h = get(f"/hotspots?min_utilization=0&window={int((now - min(span)).total_seconds()) + 1}s")
json.dump(h, open(f"{dir}/hotspots.json", "w"))
cs = h.get("collisions")
if cs is None:
    print("  hot spots: this daemon names no collisions")
else:
    print(f"  hot spots over both jobs' runs: {len(cs)} collision(s)")
    for c in cs:
        least = c["least_loaded"]
        print(f"  collision: {c['switch_description']} -> {c['to_description']} shared by {', '.join(c['jobs'])};"
              f" idle alternative {c['switch_description']} -> {least['to_description']} measured {least['measured_bytes']:,} B;"
              f" imbalance {c['imbalance']:.2f} ({c['imbalance_basis']})")
PY
else
  wait
fi
