package place

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// HostCoresFrom says where ThisHost's count came from.
const (
	HostCoresTopology = "this host's CPU topology: its cores, as hwloc and Open MPI's rankfile slots count them"
	HostCoresCPUs     = "this host's CPUs: its CPU topology is unreadable"
)

// ThisHost returns a NodeCores function for Options: a node named as
// this host (its hostname, or the hostname's first label) has this host's
// cores; other nodes are unknown.
func ThisHost() func(node string) (int, string) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return func(string) (int, string) { return 0, "" }
	}
	short, _, _ := strings.Cut(host, ".")
	var cores int
	var from string
	return func(node string) (int, string) {
		if node != host && node != short {
			if n, _, _ := strings.Cut(node, "."); n != short {
				return 0, ""
			}
		}
		if cores == 0 {
			cores, from = HostCores("/sys/devices/system/cpu")
		}
		return cores, from
	}
}

// HostCores counts the cores of this host's online CPUs from the Linux
// CPU topology under sysCPU (/sys/devices/system/cpu): distinct (package,
// core) pairs, as hwloc counts cores and Open MPI numbers a rankfile's
// slots (hardware threads of one core are one slot). Where the topology
// cannot be read it is the CPUs the Go runtime sees.
func HostCores(sysCPU string) (int, string) {
	online, err := os.ReadFile(filepath.Join(sysCPU, "online"))
	if err == nil {
		cpus, err := parseCPUList(strings.TrimSpace(string(online)))
		if err == nil && len(cpus) > 0 {
			cores := map[[2]string]bool{}
			for _, c := range cpus {
				dir := filepath.Join(sysCPU, fmt.Sprintf("cpu%d", c), "topology")
				pkg, err1 := os.ReadFile(filepath.Join(dir, "physical_package_id"))
				core, err2 := os.ReadFile(filepath.Join(dir, "core_id"))
				if err1 != nil || err2 != nil {
					cores = nil
					break
				}
				cores[[2]string{strings.TrimSpace(string(pkg)), strings.TrimSpace(string(core))}] = true
			}
			if len(cores) > 0 {
				return len(cores), HostCoresTopology
			}
		}
	}
	return runtime.NumCPU(), HostCoresCPUs
}

// parseCPUList reads a Linux CPU list ("0-3,8,10-11").
func parseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
		}
		if a < 0 || b < a || b-a > 1<<16 {
			return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}
