package model

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/netloom/netloom/internal/ingest"
)

// TraceCuts reads the replay traces' descriptions (rank-N.ti.json) of the
// offline profile in dir, found as netloom report finds it, and says of
// every rank whose trace was cut when and why, in the words netloom model
// uses (truncatedWarning); none when no trace was cut or the run was not
// traced. It is what netloom report says of the traces.
func TraceCuts(dir string) ([]string, error) {
	fsys := os.DirFS(dir)
	sub, err := ingest.FindProfileDirFS(fsys, dir)
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(fsys, path.Join(sub, "rank-*.ti.json"))
	if err != nil {
		return nil, err
	}
	type cut struct {
		rank int
		meta traceMeta
	}
	var cuts []cut
	for _, name := range names {
		r, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(path.Base(name), "rank-"), ".ti.json"))
		if err != nil || r < 0 {
			continue // not a rank's
		}
		m, err := readTraceMeta(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(dir, name), err)
		}
		if m.Truncated {
			cuts = append(cuts, cut{r, m})
		}
	}
	slices.SortFunc(cuts, func(a, b cut) int { return a.rank - b.rank }) // rank-10 after rank-9, as netloom model says them
	out := make([]string, 0, len(cuts))
	for i, c := range cuts {
		if i == maxCutWarnings {
			out = append(out, fmt.Sprintf("and %d more ranks' traces were cut", len(cuts)-maxCutWarnings))
			break
		}
		out = append(out, truncatedWarning(c.rank, &c.meta))
	}
	return out, nil
}
