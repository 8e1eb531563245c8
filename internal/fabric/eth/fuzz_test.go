package eth

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gosnmp/gosnmp"

	"github.com/netloom/netloom/internal/analysis"
	"github.com/netloom/netloom/internal/fabric"
)

// fuzzColumns are every column the source decodes.
var fuzzColumns = append(append([]string{}, discoverColumns...), columnsOf(hcColumns)...)

var fuzzTypes = []gosnmp.Asn1BER{gosnmp.Integer, gosnmp.OctetString, gosnmp.Counter32, gosnmp.Counter64, gosnmp.Gauge32,
	gosnmp.TimeTicks, gosnmp.EndOfMibView, gosnmp.NoSuchObject, gosnmp.Null, gosnmp.ObjectIdentifier}

// varbindsFrom turns fuzz bytes into a GetBulk answer: each 6-byte chunk
// is a column, an index of up to 8 arcs, a type and a value.
func varbindsFrom(data []byte) []gosnmp.SnmpPDU {
	var out []gosnmp.SnmpPDU
	for len(data) >= 6 {
		col := fuzzColumns[int(data[0])%len(fuzzColumns)]
		n := int(data[1]) % 9
		typ := fuzzTypes[int(data[2])%len(fuzzTypes)]
		v := data[3:6]
		data = data[6:]
		var idx []string
		for i := 0; i < n && len(data) > 0; i++ {
			idx = append(idx, fmt.Sprint(data[0]))
			data = data[1:]
		}
		name := "." + col
		if len(idx) > 0 {
			name += "." + strings.Join(idx, ".")
		}
		var val any
		switch typ {
		case gosnmp.Integer:
			val = int(v[0]) - 10
		case gosnmp.OctetString:
			val = append([]byte(nil), v...)
		case gosnmp.Counter32, gosnmp.Gauge32:
			val = uint(v[0]) << 24
		case gosnmp.Counter64:
			val = uint64(v[0]) << 56
		case gosnmp.TimeTicks:
			val = uint32(v[1])
		case gosnmp.ObjectIdentifier:
			val = ".1.3"
		}
		if v[2]%17 == 0 {
			name = "1.x" // an unparsable OID
		}
		out = append(out, gosnmp.SnmpPDU{Name: name, Type: typ, Value: val})
	}
	return out
}

// FuzzDecodeVarbinds feeds arbitrary GetBulk answers to the table
// splitter and every decoder: errors, never a panic, and every row they
// return has a valid index.
func FuzzDecodeVarbinds(f *testing.F) {
	f.Add([]byte{0, 1, 1, 's', 'w', 'p', 1, 6, 1, 2, 3, 4, 5, 1})
	f.Add([]byte{11, 3, 0, 4, 1, 1, 0, 5, 1, 12, 3, 1, 'h', '1', 2, 0, 5, 1, 17, 8, 0, 2, 2, 3, 0, 3, 1, 1, 4, 10})
	f.Add([]byte{20, 1, 3, 9, 9, 9, 7, 21, 1, 6, 0, 0, 1, 7})
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		vbs := varbindsFrom(data)
		cols := map[string]*column{}
		var active []*column
		for _, c := range fuzzColumns {
			cols[c] = newColumn(c)
			active = append(active, cols[c])
		}
		_ = absorb(active, vbs)
		// Also as one column per answer, the way a narrow walk reads.
		for _, c := range fuzzColumns[:3] {
			_ = absorb([]*column{newColumn(c)}, vbs)
		}
		ifs, _ := decodeIfaces(cols)
		for i, r := range ifs {
			if i <= 0 || r.Index != i {
				t.Fatalf("interface row %d has index %d", i, r.Index)
			}
		}
		lps, _ := decodeLocPorts(cols)
		for n := range lps {
			if n <= 0 {
				t.Fatalf("local port %d", n)
			}
		}
		rems, _ := decodeRemotes(cols)
		for _, r := range rems {
			if r.LocalPort <= 0 {
				t.Fatalf("remote on local port %d", r.LocalPort)
			}
		}
		rows, _ := decodeCounters(cols, hcColumns)
		ps := &portState{}
		for _, r := range rows {
			unwrap(ps, r, false)
		}
	})
}

// FuzzBuildLLDP mutates a leaf-spine's LLDP and IF-MIB data in arbitrary
// ways (ports renamed, neighbours moved, chassis IDs shared, ports down,
// entries duplicated or dropped) and builds the topology: errors, never a
// panic, and what it returns is a valid topology whose routes and
// attribution work.
func FuzzBuildLLDP(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{1, 0, 0, 9, 2, 1, 1, 1, 3, 2, 0, 0, 4, 1, 2, 7})
	f.Add([]byte{5, 0, 1, 3, 6, 2, 2, 2, 7, 1, 0, 0, 0, 3, 3, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		fab := leafSpine(2, 2, 2)
		var sws []*fakeSwitch
		for _, n := range fab.order {
			sws = append(sws, fab.sw[n])
		}
		for len(data) >= 4 {
			op, a, b, c := data[0]%8, int(data[1]), int(data[2]), data[3]
			data = data[4:]
			s := sws[a%len(sws)]
			o := sws[b%len(sws)]
			switch op {
			case 0: // rename a neighbour's port
				if len(s.rems) > 0 {
					s.rems[b%len(s.rems)].port = fmt.Sprintf("swp%d", c%8)
				}
			case 1: // move a neighbour to another local port
				if len(s.rems) > 0 {
					s.rems[b%len(s.rems)].local = int(c % 12)
				}
			case 2: // a neighbour claims another switch's chassis
				if len(s.rems) > 0 {
					s.rems[int(c)%len(s.rems)].chassis = o.chassis
					s.rems[int(c)%len(s.rems)].sys = o.name
				}
			case 3: // a port goes down or comes back
				if len(s.ifs) > 0 {
					s.ifs[b%len(s.ifs)].oper = int(c%7) + 1
				}
			case 4: // a duplicated neighbour entry
				if len(s.rems) > 0 {
					s.rems = append(s.rems, s.rems[b%len(s.rems)])
				}
			case 5: // a dropped entry (a truncated table)
				if len(s.rems) > 0 {
					i := b % len(s.rems)
					s.rems = append(s.rems[:i], s.rems[i+1:]...)
				}
			case 6: // two switches with one chassis ID
				s.chassis = o.chassis
			case 7: // a host renamed or its chassis shared with a switch
				if len(s.rems) > 0 {
					r := &s.rems[b%len(s.rems)]
					if c%2 == 0 {
						r.sys = fmt.Sprintf("h%d", c%5)
					} else {
						r.chassis = o.chassis
					}
				}
			}
		}
		vs, _ := fab.views(t)
		topo, lay, errs := build(vs)
		for _, e := range errs {
			if strings.Contains(e.Error(), "eth: topology:") {
				t.Fatalf("build produced an invalid topology: %v", e)
			}
		}
		if topo == nil {
			t.Fatal("no topology and no reason")
		}
		for _, l := range topo.Links {
			for _, end := range []fabric.PortRef{l.A, l.B} {
				n, ok := topo.Node(end.GUID)
				if !ok || end.Port < 1 || end.Port > n.Ports {
					t.Fatalf("link %s: end %s outside its node", l.ID(), end)
				}
				if _, named := lay.names[end]; !named {
					t.Fatalf("link %s: port %s has no name", l.ID(), end)
				}
			}
		}
		r := fabric.NewRoutes(topo, forwardingTables(topo))
		lids := r.CALIDs()
		a := analysis.NewAttributor(r)
		load := make([]uint64, a.Directions())
		var flows []analysis.Flow
		for _, s := range lids {
			for _, d := range lids {
				if s != d {
					_, _ = r.Path(s, d)
					flows = append(flows, analysis.Flow{Src: s, Dst: d, Bytes: 1000})
				}
			}
		}
		a.Attribute(flows, load)
		for _, l := range topo.Links {
			_, _, _ = r.PairSharesThrough(l.A, 10)
		}
	})
}
