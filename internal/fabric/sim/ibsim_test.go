package sim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/test/ibsim"
)

func linkShapes(t *fabric.Topology) []string {
	out := make([]string, 0, len(t.Links))
	for _, l := range t.Links {
		a, _ := t.Node(l.A.GUID)
		b, _ := t.Node(l.B.GUID)
		x := fmt.Sprintf("%s[%d]", a.Description, l.A.Port)
		y := fmt.Sprintf("%s[%d]", b.Description, l.B.Port)
		if y < x {
			x, y = y, x
		}
		out = append(out, x+"-"+y)
	}
	sort.Strings(out)
	return out
}

// TestNetfileUnderIbsim serves generated fat trees with the real ibsim,
// lets OpenSM sweep them, and checks that ibnetdiscover finds exactly the
// fabric WriteNetfile described.
func TestNetfileUnderIbsim(t *testing.T) {
	if m := ibsim.Missing(); m != "" {
		t.Skipf("cannot run ibsim here: %s", m)
	}
	for _, sp := range []Spec{
		{Kind: KindFatTree, Hosts: 16, Radix: 8, Levels: 2},
		{Kind: KindFatTree, Hosts: 20, Radix: 8, Levels: 3},
	} {
		t.Run(sp.String(), func(t *testing.T) {
			if sp.Levels == 3 && testing.Short() {
				t.Skip("short mode: one fabric is enough")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			topo, _, err := Generate(ctx, sp)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WriteNetfile(&buf, topo); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "fabric.net")
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := ibsim.Start(ctx, path, ibsim.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Stop()
			// OpenSM may still be assigning LIDs; rediscover until every
			// host has one.
			var seen *fabric.Topology
			for {
				out, err := f.Run(ctx, "ibnetdiscover")
				if err == nil {
					seen, err = ParseNetfile(bytes.NewReader(out), "ibnetdiscover output")
					if err != nil {
						t.Fatalf("%v\n%s", err, out)
					}
					if allLIDs(seen) {
						break
					}
				}
				select {
				case <-ctx.Done():
					t.Fatalf("ibnetdiscover never saw every host with a LID: %v", err)
				case <-time.After(200 * time.Millisecond):
				}
			}
			if got, want := seen.Counts(), topo.Counts(); got != want {
				t.Fatalf("ibnetdiscover sees %+v, generated %+v", got, want)
			}
			for k := 1; k <= sp.Hosts; k++ {
				n, err := seen.FindNode(fmt.Sprintf("n%d", k))
				if err != nil {
					t.Fatal(err)
				}
				if n.Description != fmt.Sprintf("n%d HCA-1", k) || n.LID == 0 {
					t.Errorf("host n%d seen as %q LID %d", k, n.Description, n.LID)
				}
			}
			got, want := linkShapes(seen), linkShapes(topo)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("ibnetdiscover links differ:\n got %v\nwant %v", got, want)
			}
		})
	}
}

func allLIDs(t *fabric.Topology) bool {
	for i := range t.Nodes {
		if t.Nodes[i].Type == fabric.CA && t.Nodes[i].LID == 0 {
			return false
		}
	}
	return true
}
