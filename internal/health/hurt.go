package health

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/store"
)

// maxHurtSpans bounds the error spans one answer reads jobs for.
const maxHurtSpans = 200

// ErrorSpan is a time range in which a link counted errors (symbol,
// link-integrity or receive errors, link recoveries or downs, either
// direction), from samples that do not span a counter reset or a
// saturated counter.
type ErrorSpan struct {
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Errors uint64    `json:"errors"`
}

// HurtJob is a job whose traffic crossed the link while it counted errors.
type HurtJob struct {
	Job   string `json:"job"`
	User  string `json:"user,omitempty"`
	State string `json:"state,omitempty"`
	// Bytes is its traffic attributed to the link within the error spans.
	Bytes uint64 `json:"bytes"`
	// Spans counts the error spans it had traffic in.
	Spans int `json:"spans"`
}

// Hurt is the answer.
type Hurt struct {
	Link      string      `json:"link"`
	From      time.Time   `json:"from"`
	To        time.Time   `json:"to"`
	Spans     []ErrorSpan `json:"error_spans"`
	Truncated bool        `json:"spans_truncated"`
	Jobs      []HurtJob   `json:"jobs"`
}

// QueryHurt finds the spans of [from, to] in which link l counted errors
// and the jobs link attribution put on l within them.
func QueryHurt(ctx context.Context, st store.Store, t *fabric.Topology, l *fabric.Link, from, to time.Time) (*Hurt, error) {
	h := &Hurt{Link: l.ID(), From: from, To: to, Spans: []ErrorSpan{}, Jobs: []HurtJob{}}
	samples, err := st.PortSamples(ctx, []fabric.PortRef{l.A, l.B}, from, to)
	if err != nil {
		return nil, err
	}
	type iv struct {
		lo, hi time.Time
		n      uint64
	}
	var ivs []iv
	for _, xs := range samples {
		for i := range xs {
			p := PointOf(&xs[i])
			if !p.usable() {
				continue
			}
			if n := p.Symbol + p.Integrity + p.Rcv + p.Recovers + p.Downed; n > 0 {
				ivs = append(ivs, iv{p.Time.Add(-p.Span), p.Time, n})
			}
		}
	}
	slices.SortFunc(ivs, func(a, b iv) int { return a.lo.Compare(b.lo) })
	for _, x := range ivs {
		if k := len(h.Spans) - 1; k >= 0 && !x.lo.After(h.Spans[k].To) {
			if x.hi.After(h.Spans[k].To) {
				h.Spans[k].To = x.hi
			}
			h.Spans[k].Errors += x.n
			continue
		}
		h.Spans = append(h.Spans, ErrorSpan{From: x.lo, To: x.hi, Errors: x.n})
	}
	if len(h.Spans) > maxHurtSpans {
		h.Spans, h.Truncated = h.Spans[len(h.Spans)-maxHurtSpans:], true
	}
	byJob := map[string]*HurtJob{}
	for _, sp := range h.Spans {
		got, err := st.LinkJobs(ctx, []fabric.PortRef{l.A, l.B}, sp.From, sp.To)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, x := range got {
			j := byJob[x.Job]
			if j == nil {
				j = &HurtJob{Job: x.Job}
				byJob[x.Job] = j
			}
			j.Bytes += x.Bytes
			if !seen[x.Job] {
				seen[x.Job] = true
				j.Spans++
			}
		}
	}
	for _, j := range byJob {
		h.Jobs = append(h.Jobs, *j)
	}
	slices.SortFunc(h.Jobs, func(a, b HurtJob) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Job, b.Job)
	})
	return h, nil
}
