package sim

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/netloom/netloom/internal/fabric"
)

// ibnetdiscoverOut is what ibnetdiscover printed for a 2-host fabric
// served by ibsim and swept by OpenSM.
const ibnetdiscoverOut = `#
# Topology file: generated on Sun Nov 22 03:28:44 2026
#
# Initiated from node 0000000000100000 port 0000000000100001

vendid=0x0
devid=0x0
sysimgguid=0x200001
switchguid=0x200001(200001)
Switch	8 "S-0000000000200001"		# "spine1" base port 0 lid 3 lmc 0
[1]	"S-0000000000200000"[5]		# "leaf1" lid 2 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x200000
switchguid=0x200000(200000)
Switch	8 "S-0000000000200000"		# "leaf1" enhanced port 0 lid 2 lmc 0
[1]	"H-0000000000100000"[1](100001) 		# "n1 HCA-1" lid 1 4xSDR
[2]	"H-0000000000100002"[1](100003) 		# "n2 HCA-1" lid 4 4xSDR
[5]	"S-0000000000200001"[1]		# "spine1" lid 3 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100002
caguid=0x100002
Ca	1 "H-0000000000100002"		# "n2 HCA-1"
[1](100003) 	"S-0000000000200000"[2]		# lid 4 lmc 0 "leaf1" lid 2 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100000
caguid=0x100000
Ca	1 "H-0000000000100000"		# "n1 HCA-1"
[1](100001) 	"S-0000000000200000"[1]		# lid 1 lmc 0 "leaf1" lid 2 4xSDR
`

// ibsimExample is the style of ibsim's own example net files: free-form
// ids, no LIDs, links listed from one end or both, a width hint.
const ibsimExample = `# ibsim example
Switch	8 "Switch1"
[1]	"Hca1"[1]
[2]	"Hca2"[2]
[3]	"Switch2"[3]
[4]	"Switch2"[4]	w=12

Switch 8 "Switch2"
[3]	"Switch1"[3]
[4]	"Switch1"[4]

Hca	2 "Hca1"
[1]	"Switch1"[1]

Hca	2 "Hca2"
[2]	"Switch1"[2]
`

func TestParseIbnetdiscover(t *testing.T) {
	topo, err := ParseNetfile(strings.NewReader(ibnetdiscoverOut), "disc.net")
	if err != nil {
		t.Fatal(err)
	}
	if c := topo.Counts(); c != (fabric.Counts{Switches: 2, CAs: 2, SwitchPorts: 16, Links: 3}) {
		t.Fatalf("counts %+v", c)
	}
	n2, err := topo.FindNode("n2")
	if err != nil {
		t.Fatal(err)
	}
	if n2.GUID != 0x100002 || n2.LID != 4 || n2.PortGUIDs[1] != 0x100003 || n2.Description != "n2 HCA-1" {
		t.Errorf("n2 = %+v", n2)
	}
	spine, err := topo.FindNode("spine1")
	if err != nil || spine.LID != 3 || spine.GUID != 0x200001 {
		t.Errorf("spine1 = %+v, %v", spine, err)
	}
	l, ok := topo.LinkAt(fabric.PortRef{GUID: 0x200000, Port: 5})
	if !ok || l.Width != "4X" || l.Speed != "SDR" || l.A != (fabric.PortRef{GUID: 0x200000, Port: 5}) {
		t.Errorf("leaf1/5 link = %+v", l)
	}
	ft, algo, err := ComputeRoutes(context.Background(), topo)
	if err != nil {
		t.Fatal(err)
	}
	if algo != AlgoUpDown {
		t.Errorf("algorithm %s, want %s", algo, AlgoUpDown)
	}
	checkRoutes(t, topo, ft, 0)
}

func TestParseIbsimExample(t *testing.T) {
	topo, err := ParseNetfile(strings.NewReader(ibsimExample), "example.net")
	if err != nil {
		t.Fatal(err)
	}
	if c := topo.Counts(); c != (fabric.Counts{Switches: 2, CAs: 2, SwitchPorts: 16, Links: 4}) {
		t.Fatalf("counts %+v", c)
	}
	hca2, err := topo.FindNode("Hca2")
	if err != nil {
		t.Fatal(err)
	}
	if hca2.LID == 0 || hca2.PortLID(2) == 0 || hca2.PortLID(1) != hca2.LID && hca2.PortLIDs[1] != 0 {
		t.Errorf("Hca2 LIDs not assigned: %+v", hca2)
	}
	sw1, _ := topo.FindNode("Switch1")
	if sw1.LID == 0 {
		t.Error("Switch1 got no LID")
	}
	l, _ := topo.LinkAt(fabric.PortRef{GUID: sw1.GUID, Port: 4})
	if l.Width != "12X" || l.Speed != "SDR" {
		t.Errorf("Switch1/4 link is %s %s, want 12X SDR", l.Width, l.Speed)
	}
	ft, algo, err := ComputeRoutes(context.Background(), topo)
	if err != nil {
		t.Fatal(err)
	}
	if algo != AlgoUpDown {
		t.Errorf("algorithm %s, want %s", algo, AlgoUpDown)
	}
	checkRoutes(t, topo, ft, 0)
}

// A ring of switches is no tree: routes fall back to minhop.
func TestParseRingMinHop(t *testing.T) {
	const ring = `Switch 4 "a"
[1] "ha"[1]
[2] "b"[3]
[3] "d"[2]
Switch 4 "b"
[1] "hb"[1]
[2] "c"[3]
Switch 4 "c"
[1] "hc"[1]
[2] "d"[3]
Switch 4 "d"
[1] "hd"[1]
Hca 1 "ha"
Hca 1 "hb"
Hca 1 "hc"
Hca 1 "hd"
`
	topo, err := ParseNetfile(strings.NewReader(ring), "ring.net")
	if err != nil {
		t.Fatal(err)
	}
	ft, algo, err := ComputeRoutes(context.Background(), topo)
	if err != nil {
		t.Fatal(err)
	}
	if algo != AlgoMinHop {
		t.Errorf("algorithm %s, want %s", algo, AlgoMinHop)
	}
	if longest := checkRoutes(t, topo, ft, 0); longest != 4 {
		t.Errorf("longest path %d links, want 4 (two switch hops around the ring)", longest)
	}
}

func TestNetfileRoundTrip(t *testing.T) {
	for _, sp := range []Spec{
		{Kind: KindFatTree, Hosts: 16, Radix: 8, Levels: 2},
		{Kind: KindFatTree, Hosts: 40, Radix: 8, Levels: 3, Speed: "HDR"},
	} {
		topo, _, err := Generate(context.Background(), sp)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteNetfile(&buf, topo); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(strings.TrimLeft(strings.SplitN(buf.String(), "\nHca", 2)[1], " \t"), "1 \"H-") {
			t.Errorf("%s: first node in the net file is not a host", sp)
		}
		back, err := ParseNetfile(bytes.NewReader(buf.Bytes()), "rt.net")
		if err != nil {
			t.Fatalf("%s: %v\n%s", sp, err, buf.String())
		}
		if !reflect.DeepEqual(back.Nodes, topo.Nodes) {
			t.Errorf("%s: nodes differ after a round trip", sp)
		}
		if !reflect.DeepEqual(back.Links, topo.Links) {
			t.Errorf("%s: links differ after a round trip", sp)
		}
	}
}

func TestSpecFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.net")
	if err := os.WriteFile(path, []byte(ibsimExample), 0o644); err != nil {
		t.Fatal(err)
	}
	sp, err := ParseSpec("sim:file:" + path)
	if err != nil {
		t.Fatal(err)
	}
	topo, ft, err := Generate(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	if len(ft) != 2 || len(topo.Nodes) != 4 {
		t.Errorf("file fabric: %d nodes, %d tables", len(topo.Nodes), len(ft))
	}
	_, _, err = Generate(context.Background(), Spec{Kind: KindFile, Path: filepath.Join(t.TempDir(), "missing.net")})
	if err == nil || !strings.Contains(err.Error(), "missing.net") {
		t.Errorf("missing file: error %v", err)
	}
}

func TestParseNetfileErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		line int
		want string
	}{
		{"", 0, "no nodes"},
		{"[1] \"x\"[1]\n", 1, "before any"},
		{"Switch 8 \"a\"\nbogus line\n", 2, "unexpected"},
		{"Switch 0 \"a\"\n", 1, "port count"},
		{"Switch 300 \"a\"\n", 1, "port count"},
		{"Switch 8 a\n", 1, "quoted node id"},
		{"Switch 8 \"a\"\nSwitch 8 \"a\"\n", 2, "defined twice"},
		{"Switch 8 \"a\"\n[9] \"b\"[1]\n", 2, "ports 1..8"},
		{"Switch 8 \"a\"\n[1] \"b\"[1]\n[1] \"b\"[2]\n", 3, "listed twice"},
		{"Switch 8 \"a\"\n[1] b[1]\n", 2, "quoted remote"},
		{"Switch 8 \"a\"\n[1] \"b\"\n", 2, "REMOTE-PORT"},
		{"Switch 8 \"a\"\n[1] \"b\"[1] junk\n", 2, "unexpected"},
		{"Switch 8 \"a\"\n[1] \"b\"[1] w=3\n", 2, "width"},
		{"Switch 8 \"a\"\n[1] \"b\"[1]\n", 2, "unknown node \"b\""},
		{"Switch 8 \"a\"\n[1] \"b\"[3]\nHca 2 \"b\"\n", 2, "ports 1..2"},
		{"Switch 8 \"a\"\n[1] \"a\"[1]\n", 2, "itself"},
		{"Switch 8 \"a\"\n[1] \"b\"[1]\n[2] \"b\"[1]\nHca 1 \"b\"\n", 3, "which line 2 links"},
		{"Switch 8 \"a\"\n[1] \"b\"[1]\nSwitch 8 \"b\"\n[1] \"a\"[2]\n", 4, "but line 2"},
		{"Switch 8 \"a\" # \"x\" lid 99999\n", 1, "lid"},
		{"Switch 8 \"a\" # \"unterminated\n", 1, "unterminated"},
		{"Switch 8 \"a\" # lid 5\nSwitch 8 \"b\" # lid 5\n", 2, "LID 5"},
		{"switchguid=0xzz\n", 1, "switchguid"},
		{"switchguid=1\nSwitch 8 \"a\"\nswitchguid=1\nSwitch 8 \"b\"\n", 4, "GUID"},
		{"include other.net\n", 1, "not supported"},
		{"Hca 1 \"h\"\n[1](zz) \"a\"[1]\n", 2, "guid"},
		{"Switch 8 \"a\"\n" + strings.Repeat("x", maxLineLen+10) + "\n", 2, "longer than"},
	} {
		_, err := ParseNetfile(strings.NewReader(tc.in), "bad.net")
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: error %v, want a *ParseError", clip(tc.in), err)
			continue
		}
		if pe.File != "bad.net" || pe.Line != tc.line || !strings.Contains(pe.Error(), tc.want) {
			t.Errorf("%q: error %q (line %d), want line %d and %q", clip(tc.in), pe, pe.Line, tc.line, tc.want)
		}
	}
}

func FuzzParseNetfile(f *testing.F) {
	f.Add(ibnetdiscoverOut)
	f.Add(ibsimExample)
	topo, err := GenerateFatTree(6, 4, 2)
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteNetfile(&buf, topo); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.String())
	f.Add("Switch 8 \"a\" # \"x\" lid 3\n[1][ext 1](1) \"b\"[1](2) w=4 # lid 1 \"y\" lid 2 4xEDR\nCa 1 \"b\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		topo, err := ParseNetfile(strings.NewReader(in), "fuzz.net")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "fuzz.net") {
				t.Fatalf("error %v is not a ParseError naming the file", err)
			}
			return
		}
		// Whatever parses writes out and reads back the same.
		var out bytes.Buffer
		if err := WriteNetfile(&out, topo); err != nil {
			t.Fatal(err)
		}
		back, err := ParseNetfile(&out, "again.net")
		if err != nil {
			t.Fatalf("re-reading written file: %v\n%s", err, out.String())
		}
		if back.Counts() != topo.Counts() {
			t.Fatalf("counts %+v after a round trip, want %+v", back.Counts(), topo.Counts())
		}
		if _, _, err := ComputeRoutes(context.Background(), topo); err != nil {
			t.Fatal(err)
		}
	})
}
