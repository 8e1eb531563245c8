package analysis

import (
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/fabric"
)

func TestNodeMap(t *testing.T) {
	routes := generate(t, "fat-tree:hosts=8,radix=8")
	topo := routes.Topology()
	m, err := NewNodeMap(topo, nil)
	if err != nil {
		t.Fatal(err)
	}
	n3, _ := topo.FindNode("n3")
	if lid, err := m.LID("n3"); err != nil || lid != n3.LID {
		t.Errorf("n3 -> %d, %v; want %d", lid, err, n3.LID)
	}
	if _, err := m.LID("c42"); err == nil || !strings.Contains(err.Error(), "c42") {
		t.Errorf("unknown node: %v", err)
	}
	// A mapping file sends a scheduler name to an adapter by GUID or description.
	mapping, err := ParseMapping(strings.NewReader("# site names\nc42 "+n3.GUID.String()+"\nc43 \"n4 HCA-1\"\n"), "map")
	if err != nil {
		t.Fatal(err)
	}
	m, err = NewNodeMap(topo, mapping)
	if err != nil {
		t.Fatal(err)
	}
	n4, _ := topo.FindNode("n4")
	for name, want := range map[string]fabric.LID{"c42": n3.LID, "c43": n4.LID, "n3": n3.LID} {
		if lid, err := m.LID(name); err != nil || lid != want {
			t.Errorf("%s -> %d, %v; want %d", name, lid, err, want)
		}
	}
	// Which names an adapter answers to, and how: the consistency check
	// of "explained" names them.
	if got := m.NamesOf(n3.LID); len(got) != 2 || got[0] != (MappedName{"c42", ByMappingFile}) || got[1] != (MappedName{"n3", ByDescription}) {
		t.Errorf("names of n3's adapter: %v", got)
	}
	if got := m.NamesOf(0); got != nil {
		t.Errorf("names of LID 0: %v", got)
	}
	if _, err := NewNodeMap(topo, map[string]string{"x": "0x99"}); err == nil {
		t.Error("mapping to an unknown GUID accepted")
	}
}

func TestParseMappingErrors(t *testing.T) {
	for text, want := range map[string]string{
		"n1\n":                  "map:1",
		"n1 0xzz\n":             "map:1",
		"\n\nn1 \"open\n":       "map:3",
		"n1 0x1\nn1 0x2\n":      "mapped twice",
		"n1 0x1\nn2 notaguid\n": "map:2",
	} {
		if _, err := ParseMapping(strings.NewReader(text), "map"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}

func FuzzParseMapping(f *testing.F) {
	f.Add("n1 0x0002c90300000002\nn2 \"n2 HCA-1\"\n# c\n")
	f.Add("x \"\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMapping(strings.NewReader(s), "fuzz")
		if err == nil && m == nil {
			t.Fatal("nil map without error")
		}
	})
}
