package storecopy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Options tune a copy; the zero value is good.
type Options struct {
	// Batch is how many rows are read and written at a time; default
	// 500 (a port sample row holds one switch's ports of one sweep, about
	// 1 KiB).
	Batch int
	// Force copies into a target that holds data, deleting it first.
	// Without it a non-empty target is refused.
	Force bool
	// Progress, when set, is called at the start and end of each table
	// and at most every Every (default 2s) in between.
	Progress func(Progress)
	Every    time.Duration
}

// Progress is how far a copy is.
type Progress struct {
	Table   string
	Rows    int64 // copied so far
	Total   int64 // in the source's snapshot
	Elapsed time.Duration
	Done    bool // the table is done
}

// Rate is rows per second so far.
func (p Progress) Rate() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Rows) / p.Elapsed.Seconds()
}

// String is one progress line: "port_samples: 12000/48000 rows (25%), 3400 rows/s".
func (p Progress) String() string {
	pct := 100.0
	if p.Total > 0 {
		pct = 100 * float64(p.Rows) / float64(p.Total)
	}
	s := fmt.Sprintf("%s: %d/%d rows (%.0f%%), %.0f rows/s", p.Table, p.Rows, p.Total, pct, p.Rate())
	if p.Done {
		s += fmt.Sprintf(", done in %.1fs", p.Elapsed.Seconds())
	}
	return s
}

// TableReport is what was copied of one table.
type TableReport struct {
	Table   string        `json:"table"`
	Rows    int64         `json:"rows"`
	Elapsed time.Duration `json:"-"`
	Seconds float64       `json:"seconds"`
}

// Report is what a copy did.
type Report struct {
	Tables  []TableReport `json:"tables"`
	Rows    int64         `json:"rows"`
	Seconds float64       `json:"seconds"`
}

// ErrNotEmpty is returned when the target holds data and Force is off.
var ErrNotEmpty = errors.New("the target store is not empty")

// Copy copies everything from holds into to, from one snapshot of from,
// and checks that the target then holds as many rows of each table as
// the snapshot. The target must not be written by anyone else meanwhile
// (stop its daemons). A copy that fails leaves a partial target: run it
// again with Force.
func Copy(ctx context.Context, from, to Engine, opt Options) (Report, error) {
	if opt.Batch <= 0 {
		opt.Batch = 500
	}
	if opt.Every <= 0 {
		opt.Every = 2 * time.Second
	}
	var rep Report
	start := time.Now()
	held, err := counts(ctx, to)
	if err != nil {
		return rep, fmt.Errorf("read target: %w", err)
	}
	if nonEmpty := describe(held); nonEmpty != "" {
		if !opt.Force {
			return rep, fmt.Errorf("%w (it holds %s): copy into a new database, or give --force to delete what it holds", ErrNotEmpty, nonEmpty)
		}
		if err := to.Clear(ctx); err != nil {
			return rep, fmt.Errorf("clear target: %w", err)
		}
	}
	want := map[string]int64{}
	err = from.ReadSnapshot(ctx, func(r Reader) error {
		for _, t := range Tables {
			n, err := r.Count(ctx, t)
			if err != nil {
				return fmt.Errorf("count %s: %w", t.Name, err)
			}
			want[t.Name] = n
		}
		for _, t := range Tables {
			tr, err := copyTable(ctx, r, to, t, want[t.Name], opt)
			if err != nil {
				return err
			}
			rep.Tables = append(rep.Tables, tr)
			rep.Rows += tr.Rows
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	if err := to.FinishLoad(ctx); err != nil {
		return rep, fmt.Errorf("finish: %w", err)
	}
	got, err := counts(ctx, to)
	if err != nil {
		return rep, fmt.Errorf("check target: %w", err)
	}
	for _, t := range Tables {
		if got[t.Name] != want[t.Name] {
			return rep, fmt.Errorf("check target: %s holds %d rows, the source %d", t.Name, got[t.Name], want[t.Name])
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

func copyTable(ctx context.Context, r Reader, to Engine, t *Table, total int64, opt Options) (TableReport, error) {
	start := time.Now()
	p := Progress{Table: t.Name, Total: total}
	report := func(done bool) {
		if opt.Progress != nil {
			p.Elapsed, p.Done = time.Since(start), done
			opt.Progress(p)
		}
	}
	report(false)
	last := time.Now()
	var werr error
	err := r.Rows(ctx, t, opt.Batch, func(rows [][]any) error {
		if err := to.Load(ctx, t, rows); err != nil {
			werr = fmt.Errorf("write %s (after %d rows): %w", t.Name, p.Rows, err)
			return werr
		}
		p.Rows += int64(len(rows))
		if time.Since(last) >= opt.Every {
			last = time.Now()
			report(false)
		}
		return nil
	})
	if werr != nil {
		return TableReport{}, werr
	}
	if err != nil {
		return TableReport{}, fmt.Errorf("read %s (after %d rows): %w", t.Name, p.Rows, err)
	}
	report(true)
	el := time.Since(start)
	return TableReport{Table: t.Name, Rows: p.Rows, Elapsed: el, Seconds: el.Seconds()}, nil
}

// counts returns the rows of every table of e.
func counts(ctx context.Context, e Engine) (map[string]int64, error) {
	out := map[string]int64{}
	err := e.ReadSnapshot(ctx, func(r Reader) error {
		for _, t := range Tables {
			n, err := r.Count(ctx, t)
			if err != nil {
				return fmt.Errorf("count %s: %w", t.Name, err)
			}
			out[t.Name] = n
		}
		return nil
	})
	return out, err
}

// describe lists the non-empty tables, "" when all are empty.
func describe(n map[string]int64) string {
	var s []string
	for _, t := range Tables {
		if n[t.Name] > 0 {
			s = append(s, fmt.Sprintf("%d %s", n[t.Name], strings.ReplaceAll(t.Name, "_", " ")))
		}
	}
	return strings.Join(s, ", ")
}
