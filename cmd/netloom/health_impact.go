package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/daemon"
	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/internal/health"
	"github.com/netloom/netloom/internal/store"
)

// impactSource is what the impact and degraded commands read from the
// store: the newest topology, its forwarding tables and the running jobs,
// with the node names nodeMap (a --node-map file, or "") overrides.
func impactSource(ctx context.Context, db, nodeMap string) (store.Store, health.ImpactRequest, error) {
	var req health.ImpactRequest
	var err error
	if req.NodeOverrides, err = readNodeMap(nodeMap); err != nil {
		return nil, req, err
	}
	t, err := storedTopology(ctx, db)
	if err != nil {
		return nil, req, err
	}
	st, err := daemon.OpenStore(ctx, db, "")
	if err != nil {
		return nil, req, err
	}
	req.Topo, req.Now = t, time.Now()
	ft, _, err := st.ForwardingTablesAt(ctx, req.Now)
	if err == nil {
		req.Routes = fabric.NewRoutes(t, ft)
	} else if !errors.Is(err, store.ErrNotFound) {
		st.Close()
		return nil, req, err
	}
	list, _, err := st.Jobs(ctx, store.JobQuery{State: store.JobRunning, Limit: 10000})
	if err != nil {
		st.Close()
		return nil, req, err
	}
	for _, js := range list {
		if j, err := st.Job(ctx, js.ID); err == nil {
			req.Jobs = append(req.Jobs, j)
		}
	}
	return st, req, nil
}

func healthImpactCmd() *cobra.Command {
	var (
		db, link, sw, nodes string
		nodeMap             string
		asJSON              bool
		window              time.Duration
		limit               int
	)
	c := &cobra.Command{
		Use:   "impact (--link LINK | --switch SWITCH | --nodes N1,N2,...)",
		Short: "the running jobs a link, switch or set of nodes to be taken out would disturb, and the load after",
		Long: `Answers "what does taking this out cost" from the store a netloom daemon writes
(docs/health.md, "Repair impact"): the running jobs whose routes cross the link,
the switch or the nodes (user, ranks, bytes link attribution put on it in the
last --window), and the load their traffic would put on the remaining links:
the heaviest direction before and after, and every direction whose load changes.

While the element is up the routes after are predicted (shortest paths avoiding
it; the subnet manager may choose otherwise, which cannot be known before it
happens). Once it is down, the routes after are the forwarding tables the
subnet manager computed, as the daemon read them. Draining nodes moves no route:
their jobs' traffic leaves the fabric.`,
		Example: `  netloom health impact --db /var/lib/netloom/netloom.db --switch "spine-3"`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if window <= 0 || window > 7*24*time.Hour {
				return usagef("--window %s: want a duration from 1s to 168h", window)
			}
			n := 0
			for _, v := range []string{link, sw, nodes} {
				if v != "" {
					n++
				}
			}
			if n != 1 {
				return usagef("give exactly one of --link, --switch or --nodes")
			}
			var list []string
			for _, x := range strings.Split(nodes, ",") {
				if x = strings.TrimSpace(x); x != "" {
					list = append(list, x)
				}
			}
			if nodes != "" && len(list) == 0 {
				return usagef("--nodes %q: want node names, comma-separated", nodes)
			}
			st, req, err := impactSource(c.Context(), db, nodeMap)
			if err != nil {
				return err
			}
			defer st.Close()
			req.Link, req.Switch, req.Nodes, req.Window, req.MaxPairs = link, sw, list, window, limit
			im, err := health.QueryImpact(c.Context(), st, req)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(c.OutOrStdout(), im)
			}
			writeImpact(c.OutOrStdout(), im, limit)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&db, "db", daemon.DefaultDB, "the store a netloom daemon writes: a file path, sqlite:PATH or postgres://USER@HOST/DB")
	f.StringVar(&nodeMap, "node-map", "", "node names to host adapters, as netloom serve's --node-map `file`")
	f.StringVar(&link, "link", "", "the link: GUID:PORT-GUID:PORT, or GUID:PORT of either end")
	f.StringVar(&sw, "switch", "", "the switch: GUID, LID or description")
	f.StringVar(&nodes, "nodes", "", "the nodes to drain: names, comma-separated")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.DurationVar(&window, "window", health.DefaultImpactWindow, "the traffic moved: the jobs' bytes over this much history")
	f.IntVar(&limit, "limit", 20, "pairs and load changes listed")
	return c
}

func dirText(d *health.DirLoad) string {
	if d == nil {
		return "none (no traffic)"
	}
	return fmt.Sprintf("%s[%d] -> %s[%d]: %d bytes (%.3g%%)", d.FromNode, d.From.Port, d.ToNode, d.To.Port, d.Bytes, d.Utilization)
}

func writeImpact(w io.Writer, im *health.Impact, limit int) {
	fmt.Fprintf(w, "%s: %s", im.Target.Name, im.State)
	if im.State == "down" {
		fmt.Fprintf(w, " since %s", im.DownSince.Local().Format(time.DateTime))
	}
	fmt.Fprintf(w, "\nroutes after: %s\ntraffic: %s, over the last %s\n\n", im.RouteNote, im.TrafficNote, time.Duration(im.Seconds*float64(time.Second)).Round(time.Second))
	if len(im.Jobs) == 0 {
		fmt.Fprintln(w, "no running job's route crosses it")
	} else {
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tUSER\tRANKS\tRANKS AFFECTED\tPAIRS CROSSING\tBYTES ON IT\tMOVED\tUNROUTABLE\tNODES")
		for _, j := range im.Jobs {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", j.Job, j.User, j.Ranks, j.RanksAffected, j.PairsCrossing, j.Bytes, j.MovedBytes,
				j.Unroutable, strings.Join(j.Nodes, ","))
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nheaviest direction before: %s\nheaviest direction after:  %s\n", dirText(im.HeaviestBefore), dirText(im.HeaviestAfter))
	if len(im.Changes) > 0 {
		fmt.Fprintln(w, "\nload changes:")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DIRECTION\tBEFORE\tAFTER\tCHANGE")
		for i, ch := range im.Changes {
			if limit > 0 && i >= limit {
				fmt.Fprintf(tw, "... %d more\n", len(im.Changes)-i)
				break
			}
			fmt.Fprintf(tw, "%s[%d] -> %s[%d]\t%d\t%d\t%+d\n", ch.FromNode, ch.From.Port, ch.ToNode, ch.To.Port, ch.Before, ch.After, ch.Delta)
		}
		tw.Flush()
	}
	for _, e := range im.Errors {
		fmt.Fprintln(w, "warning:", e)
	}
}

func healthDegradedCmd() *cobra.Command {
	var (
		db      string
		nodeMap string
		asJSON  bool
		window  time.Duration
	)
	c := &cobra.Command{
		Use:   "degraded",
		Short: "links up narrower or slower than their peers, and the running jobs they slow",
		Long: `Lists the links whose active width or speed is below that of most links of their
kind (between switches, or to host adapters), or below what both ends support,
with the running jobs whose routes cross them and the bytes link attribution put
on them in the last --window (docs/health.md, "Degraded links").`,
		Example: `  netloom health degraded --db /var/lib/netloom/netloom.db`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if window <= 0 || window > 7*24*time.Hour {
				return usagef("--window %s: want a duration from 1s to 168h", window)
			}
			st, req, err := impactSource(c.Context(), db, nodeMap)
			if err != nil {
				return err
			}
			defer st.Close()
			req.Window = window
			rep, err := health.QueryDegraded(c.Context(), st, req)
			if err != nil {
				return err
			}
			w := c.OutOrStdout()
			if asJSON {
				return writeJSON(w, rep)
			}
			if len(rep.Links) == 0 {
				fmt.Fprintln(w, "no degraded link: every link runs at its peers' width and speed")
			}
			for _, d := range rep.Links {
				fmt.Fprintf(w, "link %s %s[%d] - %s[%d]: %s\n", d.Link, d.ANode, d.A.Port, d.BNode, d.B.Port, d.Reason)
				for _, j := range d.Jobs {
					fmt.Fprintf(w, "  job %s (%s): %d ranks, %d node pairs cross it, %d bytes on it\n", j.Job, j.User, j.Ranks, j.PairsCrossing, j.Bytes)
				}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&db, "db", daemon.DefaultDB, "the store a netloom daemon writes: a file path, sqlite:PATH or postgres://USER@HOST/DB")
	f.StringVar(&nodeMap, "node-map", "", "node names to host adapters, as netloom serve's --node-map `file`")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.DurationVar(&window, "window", health.DefaultImpactWindow, "the jobs' traffic over this much history")
	return c
}
