package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/daemon"
	"github.com/netloom/netloom/internal/health"
)

func healthCmd() *cobra.Command {
	var (
		db       string
		asJSON   bool
		window   time.Duration
		berLimit float64
		horizon  time.Duration
		limit    int
		all      bool
	)
	c := &cobra.Command{
		Use:   "health [LINK]",
		Short: "rank the fabric's links by risk: error rates, bit error rate, trend and prediction",
		Long: `Reads the port samples a netloom daemon stored in --db over the last --window
and ranks every link direction by risk (docs/health.md): its symbol,
link-integrity and receive error rates, link recoveries and downs, its
estimated bit error rate (symbol errors against the bits the receiving port
takes in at the link's active width and speed, the link signalling all the
time), the trend of its error rate and, for a link whose errors rise, when its
bit error rate is expected to reach --ber-limit, how sure the fit is and since
when it has been rising. Samples that span a counter reset or a saturated
counter are left out. Directions without errors are left out of the table
unless --all; --json prints every direction.

With LINK (GUID:PORT-GUID:PORT, or GUID:PORT of either end) it prints that
link's two directions (--json adds their samples).`,
		Example: `  netloom health --db /var/lib/netloom/netloom.db --window 6h`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if window <= 0 || window > 7*24*time.Hour {
				return usagef("--window %s: want a duration from 1s to 168h", window)
			}
			if !(berLimit > 0 && berLimit <= 1e-3) {
				return usagef("--ber-limit %g: want a bit error rate in (0, 1e-3]", berLimit)
			}
			if horizon <= 0 {
				return usagef("--horizon %s: want a positive duration", horizon)
			}
			return runHealth(c.Context(), c.OutOrStdout(), db, args, window, health.Options{BERLimit: berLimit, Horizon: horizon}, asJSON, limit, all)
		},
	}
	f := c.Flags()
	f.StringVar(&db, "db", daemon.DefaultDB, "the store a netloom daemon writes: a file path, sqlite:PATH or postgres://USER@HOST/DB")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.DurationVar(&window, "window", health.DefaultWindow, "history to look at, e.g. 30m or 6h")
	f.Float64Var(&berLimit, "ber-limit", health.DefaultBERLimit, "bit error rate a prediction is about")
	f.DurationVar(&horizon, "horizon", health.DefaultHorizon, "how far ahead a rising link's fit is extended to rank it")
	f.IntVar(&limit, "limit", 20, "directions shown in the table (0: all)")
	f.BoolVar(&all, "all", false, "list directions without errors too")
	c.AddCommand(healthImpactCmd(), healthDegradedCmd())
	return c
}

func runHealth(ctx context.Context, w io.Writer, db string, args []string, window time.Duration, opt health.Options, asJSON bool, limit int, all bool) error {
	t, err := storedTopology(ctx, db)
	if err != nil {
		return err
	}
	st, err := daemon.OpenStore(ctx, db, "")
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now()
	if len(args) == 1 {
		l, err := t.FindLink(args[0])
		if err != nil {
			return err
		}
		dirs, err := health.QueryLink(ctx, st, t, l, now.Add(-window), now, opt)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(w, map[string]any{"at": now, "window_seconds": window.Seconds(), "ber_limit": opt.BERLimit, "link": l, "directions": dirs})
		}
		for _, d := range dirs {
			writeDirection(w, &d)
			fmt.Fprintln(w)
		}
		return nil
	}
	rep, err := health.Query(ctx, st, t, now.Add(-window), now, opt)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, struct {
			*health.Report
			Degraded []health.Degraded `json:"degraded"`
		}{rep, health.FindDegraded(t)})
	}
	fmt.Fprintf(w, "link health over the last %s: %d links, BER limit %g", window, rep.Links, rep.BERLimit)
	// Every status's count, clean and no history included (0 where none
	// but for the error statuses, which are left out at 0).
	for _, s := range []string{health.StatusRising, health.StatusOverLimit, health.StatusRetrained, health.StatusErrors, health.StatusClean, health.StatusNoHistory} {
		if n := rep.Counts[s]; n > 0 || s == health.StatusClean || s == health.StatusNoHistory {
			fmt.Fprintf(w, ", %d %s", n, strings.ReplaceAll(s, "_", " "))
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tRISK\tSTATUS\tTREND\tBER NOW\tBER MEAN\tSYMBOL/s\tINTEGRITY\tRCV ERR\tRECOVERS\tDOWNED\tPREDICTION\tDIRECTION")
	shown, listed := 0, 0
	for i := range rep.Directions {
		d := &rep.Directions[i]
		if !all && d.Status == health.StatusClean || !all && d.Status == health.StatusNoHistory {
			continue
		}
		listed++
		if limit > 0 && shown >= limit {
			continue
		}
		shown++
		fmt.Fprintf(tw, "%d\t%.3g\t%s\t%s\t%.3g\t%.3g\t%.3g\t%d\t%d\t%d\t%d\t%s\t%s\n", shown, d.Risk, d.Status, d.Trend, d.BERNow, d.BER,
			d.SymbolRate, d.LinkIntegrityErrors, d.RcvErrors, d.LinkRecovers, d.LinkDowned, predictionText(d, now), directionName(d))
	}
	tw.Flush()
	if shown == 0 {
		fmt.Fprintln(w, "no link direction counted errors in the window")
	}
	if shown < listed {
		what := "that counted errors"
		if all {
			what = "in all"
		}
		fmt.Fprintf(w, "showing the riskiest %d of %d directions %s (--limit %d; --limit 0 shows them all)\n", shown, listed, what, limit)
	}
	deg := health.FindDegraded(t)
	for i := range deg {
		if i == 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "degraded: link %s %s[%d] - %s[%d]: %s\n", deg[i].Link, deg[i].ANode, deg[i].A.Port, deg[i].BNode, deg[i].B.Port, deg[i].Reason)
	}
	return nil
}

func directionName(d *health.Direction) string {
	name := func(n string, p fmt.Stringer) string {
		if n == "" {
			return p.String()
		}
		return fmt.Sprintf("%q[%s]", n, p)
	}
	return name(d.FromNode, d.From) + " -> " + name(d.ToNode, d.To)
}

func predictionText(d *health.Direction, now time.Time) string {
	p := d.Prediction
	switch {
	case p == nil:
		return "-"
	case p.CrossesAt.IsZero():
		return fmt.Sprintf("rising since %s (R² %.2f; link rate unknown)", p.RisingSince.Local().Format(time.TimeOnly), p.Confidence)
	case p.Crossed:
		return fmt.Sprintf("crossed %g at %s, rising since %s (R² %.2f)", p.BERLimit, p.CrossesAt.Local().Format(time.DateTime),
			p.RisingSince.Local().Format(time.TimeOnly), p.Confidence)
	}
	return fmt.Sprintf("crosses %g at %s (in %s), rising since %s (R² %.2f)", p.BERLimit, p.CrossesAt.Local().Format(time.DateTime),
		time.Duration(p.InSeconds*float64(time.Second)).Round(time.Second), p.RisingSince.Local().Format(time.TimeOnly), p.Confidence)
}

func writeDirection(w io.Writer, d *health.Direction) {
	fmt.Fprintf(w, "%s\n  link %s, %s %s (%.3g bit/s)\n  status %s, trend %s, risk %.3g\n", directionName(d), d.Link, d.Width, d.Speed,
		d.BitsPerSecond, d.Status, d.Trend, d.Risk)
	fmt.Fprintf(w, "  %d samples (%.0f s), %d left out for a counter reset, %d for a saturated counter\n", d.Samples, d.Seconds, d.Resets, d.Saturated)
	fmt.Fprintf(w, "  symbol errors %d (%.3g/s), link integrity %d, receive errors %d, recoveries %d, downed %d\n", d.SymbolErrors, d.SymbolRate,
		d.LinkIntegrityErrors, d.RcvErrors, d.LinkRecovers, d.LinkDowned)
	fmt.Fprintf(w, "  BER now %.3g, mean %.3g\n  prediction: %s\n", d.BERNow, d.BER, predictionText(d, time.Now()))
}
