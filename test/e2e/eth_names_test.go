package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
	"github.com/netloom/netloom/test/ethlab"
)

// TestEthSharedSysName: a lab whose switches' SNMP agents all answer one
// sysName ("vm", as switches left with a default host name do) while their
// lldpd each advertise the switch's own name. Discovery, the daemon's map,
// links and routes and the CLI name every switch distinctly, by the LLDP
// system name its neighbours see, and say why.
func TestEthSharedSysName(t *testing.T) {
	d := ethlab.Preset("two-leaf")
	d.SysName = "vm"
	lab := ethlab.StartT(t, d, ethlab.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := lab.WaitLLDP(ctx); err != nil {
		t.Fatal(err)
	}
	// The source file names no switch: only what the switches answer
	// tells them apart.
	noName := regexp.MustCompile(`, name: "[^"]*"`)
	cfg := ethConfig(t, lab, false, "", func(_ string, entry *string) { *entry = noName.ReplaceAllString(*entry, "") })
	switches := []string{"leaf1", "leaf2", "spine1"}
	why := `sysName "vm" is shared by 3 polled switches; named by its LLDP system name as its`

	t.Run("source", func(t *testing.T) {
		src := openEth(t, cfg)
		topo, err := src.Discover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if errs := src.Errors(); len(errs) > 0 {
			t.Errorf("errors on a healthy lab: %+v", errs)
		}
		var got []string
		for _, n := range src.SwitchNames() {
			got = append(got, n.Name)
			if n.SysName != "vm" || !strings.HasPrefix(n.Why, why) || !strings.HasSuffix(n.Why, "(lldpRemSysName)") {
				t.Errorf("switch %s: sysName %q, why %q", n.Name, n.SysName, n.Why)
			}
		}
		if !slices.Equal(got, switches) {
			t.Errorf("switch names %v, want %v", got, switches)
		}
		if got, want := discoveredLinks(topo, src.PortNames()), wiredLinks(lab); !slices.Equal(got, want) {
			t.Errorf("discovered links\n %v\nlab wiring\n %v", got, want)
		}
	})

	t.Run("daemon", func(t *testing.T) {
		dm, _ := serveEth(t, lab, cfg)
		var nodes struct {
			Nodes []struct{ GUID, Description string }
		}
		if dm.get("/api/v1/fabric/nodes?type=switch", &nodes) != 200 {
			t.Fatal("nodes")
		}
		var got []string
		for _, n := range nodes.Nodes {
			got = append(got, n.Description)
		}
		slices.Sort(got)
		if !slices.Equal(got, switches) {
			t.Errorf("the map's switches %v, want %v", got, switches)
		}
		// Every link's ends are named as the lab wired them.
		var links struct {
			Links []struct{ ID string }
		}
		if dm.get("/api/v1/fabric/links", &links) != 200 {
			t.Fatal("links")
		}
		var ends []string
		for _, l := range links.Links {
			var detail struct {
				Directions []struct {
					From string `json:"from_description"`
					To   string `json:"to_description"`
				}
			}
			if code := dm.get("/api/v1/links/"+l.ID, &detail); code != 200 || len(detail.Directions) != 2 {
				t.Fatalf("link %s: %d %+v", l.ID, code, detail)
			}
			x, y := detail.Directions[0].From, detail.Directions[0].To
			if detail.Directions[1].From != y || detail.Directions[1].To != x {
				t.Errorf("link %s: directions %+v", l.ID, detail.Directions)
			}
			if y < x {
				x, y = y, x
			}
			ends = append(ends, x+"-"+y)
		}
		slices.Sort(ends)
		var wired []string
		for _, w := range lab.Wiring() {
			x, y := w.A.Node, w.B.Node
			if y < x {
				x, y = y, x
			}
			wired = append(wired, x+"-"+y)
		}
		slices.Sort(wired)
		if !slices.Equal(ends, wired) {
			t.Errorf("links' ends\n %v\nlab wiring\n %v", ends, wired)
		}
		var rt fabric.Route
		if code := dm.get("/api/v1/routes?src=h1&dst=h3", &rt); code != 200 {
			t.Fatalf("route: %d", code)
		}
		if p := hopNames(rt); p != "h1,leaf1,spine1,leaf2" {
			t.Errorf("route h1 -> h3 through %s", p)
		}
		// Each switch's name is logged once, with why.
		log := dm.log.String()
		for _, sw := range switches {
			re := regexp.MustCompile(`ethernet switch named switch=` + sw + ` guid=\S+ sysName=vm why="` + regexp.QuoteMeta(strings.ReplaceAll(why, `"`, `\"`)))
			if n := len(re.FindAllString(log, -1)); n != 1 {
				t.Errorf("the daemon logged %s's name and why %d times:\n%s", sw, n, tailString(log, 20))
			}
		}
	})

	t.Run("cli", func(t *testing.T) {
		cmd := exec.Command(netloomBin, "fabric", "route", "h1", "h3", "--fabric", "eth:"+cfg, "--json")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("netloom fabric route: %v\n%s", err, stderr.String())
		}
		var rt fabric.Route
		if err := json.Unmarshal(out, &rt); err != nil {
			t.Fatal(err)
		}
		if p := hopNames(rt); p != "h1,leaf1,spine1,leaf2" {
			t.Errorf("netloom fabric route h1 -> h3 through %s", p)
		}
		if strings.Count(stderr.String(), "ethernet switch named") != 3 {
			t.Errorf("netloom fabric route does not say why the switches have their names:\n%s", stderr.String())
		}
	})
}

// hopNames lists a route's hops by description.
func hopNames(rt fabric.Route) string {
	var path []string
	for _, h := range rt.Hops {
		path = append(path, h.Description)
	}
	return strings.Join(path, ",")
}
