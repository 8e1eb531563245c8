package model

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A job measured with more ranks than CPUs on a host ran oversubscribed:
// its ranks waited for a core in their compute and inside MPI calls (an
// MPI that busy-polls, as MPICH does, keeps its core while it waits for a
// message whose sender has none). The compute gaps the trace holds
// include the first; the replay, one core per rank and a message the
// moment its sender posts it, sees nothing of the second. Neither the
// profile nor the trace holds a host's CPU count (the agent reports the
// CPU a rank last ran on, not how many it may use), so it is found where
// it is known: this host's (nproc) when the ranks ran here, else Slurm's
// (scontrol's CPUTot of the node). CPUs, not cores: hardware threads run
// ranks at once too.

// HostLoad is one host's ranks against its CPUs, and where the number
// came from.
type HostLoad struct {
	Host   string `json:"host"`
	Ranks  int    `json:"ranks"`
	CPUs   int    `json:"cpus"`
	Source string `json:"cpus_from"`
}

// CoresOf says how many CPUs a host has, given its name (the ranks'
// hostname) and the node names its ranks reported, and where the number
// came from (0: not known). Tests replace it.
var CoresOf = HostCores

// Scontrol is Slurm's command that HostCores asks for a node's CPUs.
var Scontrol = "scontrol"

// HostCores is a host's CPUs: nproc (the CPUs this process may run on)
// when host is this machine, else Slurm's CPUTot of one of its nodes when
// scontrol answers within 5 seconds; 0 when neither knows.
func HostCores(ctx context.Context, host string, nodes []string) (int, string) {
	if me, err := os.Hostname(); err == nil && host != "" && shortName(host) == shortName(me) {
		return runtime.NumCPU(), "nproc on this host"
	}
	if _, err := exec.LookPath(Scontrol); err != nil {
		return 0, ""
	}
	for _, n := range append(append([]string{}, nodes...), host) {
		if n == "" {
			continue
		}
		if c := slurmCPUs(ctx, n); c > 0 {
			return c, "Slurm's CPUTot of node " + n
		}
	}
	return 0, ""
}

func shortName(h string) string {
	h, _, _ = strings.Cut(h, ".")
	return strings.ToLower(h)
}

var cpuTot = regexp.MustCompile(`(?:^|\s)CPUTot=(\d+)(?:\s|$)`)

// slurmCPUs is Slurm's CPUTot of a node (0: not known).
func slurmCPUs(ctx context.Context, node string) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, Scontrol, "show", "node", "-o", node).Output()
	if err != nil {
		return 0
	}
	m := cpuTot.FindSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// Oversubscribed is every host of the job that ran more of its ranks than
// it has CPUs, as far as they are known (CoresOf), by host name.
func (j *Job) Oversubscribed(ctx context.Context) []HostLoad {
	if j.Profile == nil {
		return nil
	}
	ranks := map[string]int{}
	nodes := map[string][]string{}
	for _, p := range j.Profile.Processes {
		h := p.Host
		if h == "" {
			h = p.Node
		}
		ranks[h]++
		if p.Node != "" && !contains(nodes[h], p.Node) {
			nodes[h] = append(nodes[h], p.Node)
		}
	}
	var out []HostLoad
	for h, n := range ranks {
		c, src := CoresOf(ctx, h, nodes[h])
		if c > 0 && n > c {
			out = append(out, HostLoad{Host: h, Ranks: n, CPUs: c, Source: src})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Host < out[b].Host })
	return out
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// fidelity says what the replay as ran is worth against the measured run:
// that the run was oversubscribed, or that the replay is far from it
// (unless a trace was cut: the replay then covers part of the run).
func fidelity(res *Result, truncated bool) []string {
	m, p := res.Measured.Elapsed, res.AsRan.Elapsed
	if m <= 0 || p <= 0 {
		return nil
	}
	part := fmt.Sprintf("%.0f%% of", 100*p/m)
	if p > m {
		part = fmt.Sprintf("%.2f times", p/m)
	}
	worth := fmt.Sprintf("as ran it predicts %s the measured elapsed time (%.4f s against %.4f s); read the what-ifs as changes from the replay as ran, not as the times the job would take",
		part, p, m)
	if len(res.Oversubscribed) > 0 {
		var hosts []string
		for i, h := range res.Oversubscribed {
			if i == 5 {
				hosts = append(hosts, fmt.Sprintf("and %d more hosts", len(res.Oversubscribed)-i))
				break
			}
			hosts = append(hosts, fmt.Sprintf("host %s ran %d ranks on %d CPUs (%s)", h.Host, h.Ranks, h.CPUs, h.Source))
		}
		return []string{fmt.Sprintf("the measured run was oversubscribed: %s. Its ranks waited for a core inside MPI calls too (an MPI that busy-polls, as MPICH does, keeps its core while it waits), which the replay, one core per rank, does not see: %s",
			strings.Join(hosts, ", "), worth)}
	}
	if !truncated && (p < m/2 || p > 2*m) {
		return []string{fmt.Sprintf("the replay is far from the measured run: %s. The platform (%s) does not describe how the job ran (on a calibrated platform: was the calibration measured on a busy machine?)", worth, res.Platform)}
	}
	return nil
}
