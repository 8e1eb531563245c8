package store

import (
	"slices"
	"time"
)

// JoinJobParts joins the parts of one job that several collectors saved,
// each summing the ranks that reported to it (an agent sends to the
// collector its NETLOOM_DAEMON names, so one job's ranks may report to
// several). Parts come in the order of their collectors' fabric names.
//
// What is exact: the ranks are disjoint, so counts of ranks (reporting,
// finalized), seconds, bytes, messages, memory and drops are the parts'
// sums, as one collector hearing every rank would have summed them; the
// CPU and MPI percentages are the parts' means weighted by their
// reporting ranks (equal up to float rounding); the job starts at the
// earliest start and was updated at the latest update. It runs while any
// part runs; once all ended, it ends at the latest end, for that part's
// reason. Ranks (MPI_COMM_WORLD's size) is the largest any part saw.
// Nodes is the parts' sum: exact when each node's ranks report to one
// collector (the usual setup: NETLOOM_DAEMON set per node), an upper
// bound otherwise. Link attribution sums the bytes each collector routed
// over its own fabric; traffic between ranks of different fabrics crosses
// no link of either and stays unattributed (UnmappedBytes); a node is
// unmapped when every part that attributed failed to map it.
func JoinJobParts(parts []JobSummary) JobSummary {
	if len(parts) == 1 {
		return parts[0]
	}
	j := JobSummary{ID: parts[0].ID, State: JobFinished}
	var cpuPct, mpiPct float64
	var attrib []*Attribution
	var hosts []*HostLinkTraffic
	for i := range parts {
		p := &parts[i]
		if p.State == JobRunning {
			j.State = JobRunning
		}
		if j.Start.IsZero() || (!p.Start.IsZero() && p.Start.Before(j.Start)) {
			j.Start = p.Start
		}
		if p.Updated.After(j.Updated) {
			j.Updated = p.Updated
		}
		if p.State == JobFinished && !p.End.Before(j.End) {
			j.End, j.EndReason = p.End, p.EndReason
		}
		j.Ranks = max(j.Ranks, p.Ranks)
		j.Reporting += p.Reporting
		j.Finalized += p.Finalized
		j.Nodes += p.Nodes
		if j.User == "" {
			j.User = p.User
		}
		if j.Program == "" {
			j.Program = p.Program
		}
		if j.MPILibrary == "" {
			j.MPILibrary = p.MPILibrary
		}
		if j.TraceDir == "" { // every part's ranks write beside one profile folder
			j.TraceDir = p.TraceDir
		}
		j.CPUSeconds += p.CPUSeconds
		j.MPISeconds += p.MPISeconds
		cpuPct += p.CPUPercent * float64(p.Reporting)
		mpiPct += p.MPIPercent * float64(p.Reporting)
		j.Memory += p.Memory
		j.MemoryPeak += p.MemoryPeak
		j.IORead += p.IORead
		j.IOWrite += p.IOWrite
		j.MPIIORead += p.MPIIORead
		j.MPIIOWrite += p.MPIIOWrite
		j.Traffic = j.Traffic.Add(p.Traffic)
		j.IntraNode = j.IntraNode.Add(p.IntraNode)
		j.InterNode = j.InterNode.Add(p.InterNode)
		j.AgentDrops += p.AgentDrops
		j.PeersCapped = j.PeersCapped || p.PeersCapped
		if j.TrafficModel == "" || p.TrafficModel == TrafficPhysical { // physical if any part is
			j.TrafficModel = p.TrafficModel
		}
		if j.Scheduler == nil {
			j.Scheduler = p.Scheduler
		}
		j.Agent = j.Agent || p.Agent
		if j.TrafficSource == "" || p.TrafficSource == SourceAgent {
			j.TrafficSource = p.TrafficSource
		}
		if p.Attribution != nil {
			attrib = append(attrib, p.Attribution)
		}
		if p.HostLinks != nil {
			hosts = append(hosts, p.HostLinks)
		}
	}
	if j.State == JobRunning {
		j.End, j.EndReason = time.Time{}, ""
	}
	if j.Reporting > 0 {
		j.CPUPercent, j.MPIPercent = cpuPct/float64(j.Reporting), mpiPct/float64(j.Reporting)
	}
	j.Total = j.Traffic.Total()
	end := j.End
	if end.IsZero() {
		end = j.Updated
	}
	if !j.Start.IsZero() && end.After(j.Start) {
		j.Duration = end.Sub(j.Start).Seconds()
	}
	j.Attribution = joinAttribution(attrib)
	j.HostLinks = joinHostLinks(hosts)
	return j
}

func joinAttribution(parts []*Attribution) *Attribution {
	if len(parts) == 0 {
		return nil
	}
	a := &Attribution{UnmappedNodes: []string{}}
	var unmapped [][]string
	for _, p := range parts {
		a.Bytes += p.Bytes
		a.UnmappedBytes += p.UnmappedBytes
		unmapped = append(unmapped, p.UnmappedNodes)
		for _, e := range p.Errors {
			if !slices.Contains(a.Errors, e) {
				a.Errors = append(a.Errors, e)
			}
		}
		a.Intervals = max(a.Intervals, p.Intervals)
		if p.Updated.After(a.Updated) {
			a.Updated = p.Updated
		}
	}
	a.UnmappedNodes = inAll(unmapped)
	return a
}

func joinHostLinks(parts []*HostLinkTraffic) *HostLinkTraffic {
	if len(parts) == 0 {
		return nil
	}
	h := &HostLinkTraffic{}
	var unmapped [][]string
	for _, p := range parts {
		h.Sent += p.Sent
		h.Received += p.Received
		h.Nodes += p.Nodes
		unmapped = append(unmapped, p.UnmappedNodes)
		h.Intervals = max(h.Intervals, p.Intervals)
		if p.Updated.After(h.Updated) {
			h.Updated = p.Updated
		}
	}
	h.UnmappedNodes = inAll(unmapped)
	return h
}

// inAll returns the names in every list, in the first list's order.
func inAll(lists [][]string) []string {
	out := []string{}
	for _, n := range lists[0] {
		all := true
		for _, l := range lists[1:] {
			if !slices.Contains(l, n) {
				all = false
				break
			}
		}
		if all {
			out = append(out, n)
		}
	}
	return out
}
