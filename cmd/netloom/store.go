package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/netloom/netloom/internal/daemon"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/storecopy"
)

func storeCmd() *cobra.Command {
	return group("store", "store tools: copy (between SQLite and PostgreSQL)", storeCopyCmd())
}

func storeCopyCmd() *cobra.Command {
	var (
		from, to string
		force    bool
		batch    int
		asJSON   bool
	)
	c := &cobra.Command{
		Use:   "copy --from URL --to URL",
		Short: "copy a store's whole history into another store (SQLite or PostgreSQL)",
		Long: `Copies everything a store holds into another one, of the same engine or not:
topology versions, forwarding tables, events, port samples and their
rollups, jobs with their processes and matrices, process samples and their
rollups, link attribution and the jobs' link totals. Stores are named as
for netloom serve --db: a file path or sqlite:PATH, or postgres://… (the
database must exist; the schema is created).

The source is read from one consistent snapshot, a batch of rows at a
time, so a daemon may go on writing it; stop the daemons of the target.
A target that holds data is refused unless --force, which deletes what it
holds first. Progress (rows per table, rate) goes to standard error every
few seconds; at the end the target's rows are counted against the
source's. A copy that fails leaves a partial target: run it again with
--force.`,
		Example: `  netloom store copy --from sqlite:/var/lib/netloom/netloom.db --to postgres://netloom@db/netloom
  netloom store copy --from postgres://netloom@db/netloom --to /tmp/netloom.db`,
		Args:              posArgs(),
		ValidArgsFunction: noFiles,
		RunE: func(c *cobra.Command, _ []string) error {
			if from == "" || to == "" {
				return usagef("--from and --to are required")
			}
			if batch < 1 {
				return usagef("--batch %d: want at least 1", batch)
			}
			if sameStore(from, to) {
				return usagef("--from and --to name the same store")
			}
			if f, ok := sqlitePath(from); ok {
				if _, err := os.Stat(f); err != nil {
					return fmt.Errorf("--from %s: %w", from, err)
				}
			}
			ctx := c.Context()
			src, err := openCopyStore(c, "--from", from)
			if err != nil {
				return err
			}
			defer src.Close()
			dst, err := openCopyStore(c, "--to", to)
			if err != nil {
				return err
			}
			defer dst.Close()
			stderr := c.ErrOrStderr()
			rep, err := storecopy.Copy(ctx, src.(storecopy.Engine), dst.(storecopy.Engine), storecopy.Options{
				Batch: batch, Force: force,
				Progress: func(p storecopy.Progress) {
					if p.Done || p.Rows > 0 {
						fmt.Fprintf(stderr, "netloom store copy: %s\n", p)
					}
				},
			})
			if err != nil {
				return fmt.Errorf("copy %s to %s: %w", redactURL(from), redactURL(to), err)
			}
			stdout := c.OutOrStdout()
			if asJSON {
				return writeJSON(stdout, rep)
			}
			fmt.Fprintf(stdout, "copied %d rows in %d tables in %.1fs:", rep.Rows, len(rep.Tables), rep.Seconds)
			for _, t := range rep.Tables {
				fmt.Fprintf(stdout, " %s %d", t.Table, t.Rows)
			}
			fmt.Fprintln(stdout)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&from, "from", "", "source store `URL`: a file path, sqlite:PATH or postgres://…")
	f.StringVar(&to, "to", "", "target store `URL`: a file path, sqlite:PATH or postgres://…")
	f.BoolVar(&force, "force", false, "copy into a store that holds data, deleting what it holds first")
	f.IntVar(&batch, "batch", 500, "rows read and written at a time")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}

// openCopyStore opens one side of a copy.
func openCopyStore(c *cobra.Command, flag, url string) (store.Store, error) {
	st, err := daemon.OpenStore(c.Context(), url, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if _, ok := st.(storecopy.Engine); !ok {
		st.Close()
		return nil, fmt.Errorf("%s %s: this store cannot be copied", flag, redactURL(url))
	}
	return st, nil
}

// sqlitePath returns the file a SQLite store URL names.
func sqlitePath(url string) (string, bool) {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return "", false
	}
	return strings.TrimPrefix(strings.TrimPrefix(url, "sqlite://"), "sqlite:"), true
}

// sameStore says whether two URLs name one SQLite file or are the same URL.
func sameStore(a, b string) bool {
	pa, okA := sqlitePath(a)
	pb, okB := sqlitePath(b)
	if !okA || !okB {
		return a == b
	}
	if fa, err := filepath.Abs(pa); err == nil {
		pa = fa
	}
	if fb, err := filepath.Abs(pb); err == nil {
		pb = fb
	}
	if pa == pb {
		return true
	}
	sa, errA := os.Stat(pa)
	sb, errB := os.Stat(pb)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// redactURL drops a password from a postgres:// URL, for messages.
func redactURL(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	auth, host, ok := strings.Cut(rest, "@")
	if !ok {
		return url
	}
	if user, _, hasPass := strings.Cut(auth, ":"); hasPass {
		return scheme + "://" + user + ":xxxxx@" + host
	}
	return url
}
