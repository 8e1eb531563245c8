package sqlstore

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/codec"
)

// CheckSweep validates one AddPortSamples call and returns a copy sorted
// by GUID then port; the caller's slice is left as it was.
func CheckSweep(in []fabric.PortSample) ([]fabric.PortSample, error) {
	t := in[0].Time
	if err := codec.CheckTime("Time", t); err != nil {
		return nil, fmt.Errorf("port sample 0 (%s): %w", in[0].Port, err)
	}
	for i := range in {
		s := &in[i]
		switch {
		case !s.Time.Equal(t):
			return nil, fmt.Errorf("port sample %d (%s): Time %s differs from the sweep's time %s (one call stores one sweep)",
				i, s.Port, s.Time.Format(time.RFC3339Nano), t.Format(time.RFC3339Nano))
		case s.Port.GUID == 0:
			return nil, fmt.Errorf("port sample %d: Port.GUID is zero", i)
		case s.Port.Port < 0 || s.Port.Port > codec.MaxPort:
			return nil, fmt.Errorf("port sample %d (%s): Port.Port %d out of range 0..%d", i, s.Port.GUID, s.Port.Port, codec.MaxPort)
		case s.Span < 0:
			return nil, fmt.Errorf("port sample %d (%s): Span %v is negative", i, s.Port, s.Span)
		}
	}
	out := append([]fabric.PortSample(nil), in...)
	sort.Slice(out, func(i, j int) bool { return out[i].Port.Less(out[j].Port) })
	for i := 1; i < len(out); i++ {
		if out[i].Port == out[i-1].Port {
			return nil, fmt.Errorf("port sample for %s: Port appears twice in one sweep", out[i].Port)
		}
	}
	return out, nil
}

// Switches calls fn with each switch's run of samples of a sorted sweep.
func Switches(sorted []fabric.PortSample, fn func(g fabric.GUID, samples []fabric.PortSample) error) error {
	for start := 0; start < len(sorted); {
		g := sorted[start].Port.GUID
		end := start + 1
		for end < len(sorted) && sorted[end].Port.GUID == g {
			end++
		}
		if err := fn(g, sorted[start:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// CheckEvents validates events before they are stored.
func CheckEvents(ev []fabric.Event) error {
	for i, e := range ev {
		if err := codec.CheckTime("Time", e.Time); err != nil {
			return fmt.Errorf("add events: event %d (%s): %w", i, e.Kind, err)
		}
		if e.Kind == "" {
			return fmt.Errorf("add events: event %d: Kind is empty", i)
		}
		if e.Port < 0 || e.Port > codec.MaxPort {
			return fmt.Errorf("add events: event %d (%s): Port %d out of range 0..%d", i, e.Kind, e.Port, codec.MaxPort)
		}
	}
	return nil
}

// CheckJob validates a job before it is stored.
func CheckJob(j *store.Job) error {
	if j == nil || j.ID == "" {
		return errors.New("job without an id")
	}
	if err := codec.CheckTime("start", j.Start); err != nil && !j.Start.IsZero() {
		return err
	}
	if !j.End.IsZero() {
		if err := codec.CheckTime("end", j.End); err != nil {
			return err
		}
	}
	return nil
}

// CheckProcessSamples validates process samples before they are stored.
func CheckProcessSamples(samples []store.ProcessSample) error {
	for i := range samples {
		if samples[i].Job == "" {
			return fmt.Errorf("add process samples: sample %d has no job", i)
		}
		if err := codec.CheckTime("sample time", samples[i].Time); err != nil {
			return fmt.Errorf("add process samples: job %s rank %d: %w", samples[i].Job, samples[i].Rank, err)
		}
	}
	return nil
}

// CheckLinkJobSamples validates link attribution before it is stored.
func CheckLinkJobSamples(samples []store.LinkJobSample) error {
	for i := range samples {
		x := &samples[i]
		if x.Job == "" {
			return fmt.Errorf("add link attribution: sample %d has no job", i)
		}
		if err := codec.CheckTime("attribution time", x.Time); err != nil {
			return fmt.Errorf("add link attribution: job %s port %s: %w", x.Job, x.Port, err)
		}
		if x.Bytes > math.MaxInt64 {
			return fmt.Errorf("add link attribution: job %s port %s: %d bytes is out of range", x.Job, x.Port, x.Bytes)
		}
	}
	return nil
}

// JobSortColumn maps store.JobSortKeys to columns of the jobs table.
func JobSortColumn(key string) (string, bool) {
	switch key {
	case "start":
		return "start_ns", true
	case "end":
		return "end_ns", true
	case "updated":
		return "updated_ns", true
	case "id":
		return "id", true
	}
	if store.ValidJobSort(key) {
		return key, true
	}
	return "", false
}

// JobMetricColumns are the jobs table's numeric columns filled from
// store.JobSortValue.
var JobMetricColumns = []string{"duration", "ranks", "nodes", "cpu", "cpu_seconds", "mpi", "mpi_seconds", "memory", "memory_peak",
	"io", "bytes", "msgs", "inter_node_bytes", "intra_node_bytes", "p2p_bytes", "coll_bytes", "rma_bytes", "p2p_msgs", "coll_msgs", "rma_msgs"}
