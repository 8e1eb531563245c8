#!/usr/bin/env bash
# Installs the Debian packages Netloom builds and tests with. Idempotent:
# does nothing when everything is already there. Needs root (or sudo).
set -euo pipefail

packages=(
  # InfiniBand management stack: libraries the ib source links against, and
  # the simulated fabric + real tools the tests compare with.
  libibnetdisc-dev libibmad-dev libibumad-dev
  ibsim-utils opensm infiniband-diags
  # MPI: the agent is built and tested against both ABIs, C and Fortran.
  openmpi-bin libopenmpi-dev mpich libmpich-dev gfortran
  # The agent<->daemon wire format: protoc for Go, protoc-c for the agent.
  protobuf-compiler protobuf-c-compiler libprotobuf-c-dev
  # The web UI's end-to-end tests drive Debian's Chromium.
  chromium
  # SQLite's CLI, for looking into the embedded store.
  sqlite3
  # PostgreSQL 15: the second store engine's tests start their own server
  # (test/postgres) from these binaries.
  postgresql
  # Slurm on one host (slurmctld + several slurmd -N) with MUNGE, for the
  # scheduler adapter's tests.
  slurmctld slurmd slurm-client munge
  # MUNGE-authenticated agent datagrams: the daemon links libmunge.
  libmunge-dev
  # Backtraces of core files when a test's MPI rank dies (test/e2e/stress_test.go).
  gdb
  # Placement advice (netloom place) maps ranks with Scotch, linked by cgo.
  libscotch-dev
  # What-if predictions (netloom model) replay the agent's traces with
  # SimGrid's SMPI (smpirun); the agent gzips its traces with zlib.
  simgrid libsimgrid-dev zlib1g-dev
  # Alerts: the tests deliver to a real Alertmanager and check the shipped
  # rules and dashboards with promtool and a real Prometheus.
  prometheus prometheus-alertmanager
  # The Ethernet lab (test/ethlab, scripts/ethlab): lldpd and snmpd run one
  # instance per network namespace; snmp (snmpwalk, snmpget) checks them;
  # prometheus-snmp-exporter is what sites scrape switches with today.
  lldpd snmpd snmp prometheus-snmp-exporter
  # sFlow (internal/sflow): the tests decode what a real sFlow agent sends,
  # pmacctd's sfprobe plugin sampling a namespace's interface.
  pmacct
  # The lab's tests stream TCP between hosts with python3; make demo-eth
  # prints its summary with it.
  python3
  gcc make pkg-config
)

# Debian starts lldpd, snmpd and the SNMP exporter as system services on
# install. The lab runs its own instances, one per namespace, and a
# system-wide lldpd would talk LLDP over the lab's management veths in the
# root namespace: stop and disable them (with or without systemd).
quiet_services() {
  local s
  for s in lldpd snmpd prometheus-snmp-exporter pmacctd nfacctd sfacctd uacctd; do
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
      $SUDO systemctl disable --now "$s" >/dev/null 2>&1 || true
    else
      [ -x "/etc/init.d/$s" ] && $SUDO "/etc/init.d/$s" stop >/dev/null 2>&1 || true
      command -v update-rc.d >/dev/null 2>&1 && $SUDO update-rc.d "$s" disable >/dev/null 2>&1 || true
    fi
  done
}

# A package counts as there when it is installed or when an installed
# package provides it (simgrid is a virtual package: libsimgrid-dev).
provided=" $(dpkg-query -W -f='${Status}|${Provides}\n' 2>/dev/null | grep '^install ok installed|' \
  | cut -d'|' -f2 | sed -e 's/([^)]*)//g' -e 's/,/ /g' | tr -s ' \n' '  ') "
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && continue
  case "$provided" in *" $p "*) continue ;; esac
  missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
quiet_services
echo "install-deps: done"
