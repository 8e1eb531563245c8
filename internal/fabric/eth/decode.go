package eth

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"

	"github.com/gosnmp/gosnmp"
)

// OIDs read, numeric (Debian ships no MIB files). Columns end in a dot-free
// prefix: a row's OID is the column, ".", then the row's index.
const (
	oidSysUpTime = "1.3.6.1.2.1.1.3.0"
	oidSysName   = "1.3.6.1.2.1.1.5.0"

	// IF-MIB ifTable (1.3.6.1.2.1.2.2.1.x)
	oidIfDescr        = "1.3.6.1.2.1.2.2.1.2"
	oidIfType         = "1.3.6.1.2.1.2.2.1.3"
	oidIfSpeed        = "1.3.6.1.2.1.2.2.1.5"
	oidIfPhysAddress  = "1.3.6.1.2.1.2.2.1.6"
	oidIfOperStatus   = "1.3.6.1.2.1.2.2.1.8"
	oidIfInOctets     = "1.3.6.1.2.1.2.2.1.10"
	oidIfInUcastPkts  = "1.3.6.1.2.1.2.2.1.11"
	oidIfInNUcastPkts = "1.3.6.1.2.1.2.2.1.12"
	oidIfInDiscards   = "1.3.6.1.2.1.2.2.1.13"
	oidIfInErrors     = "1.3.6.1.2.1.2.2.1.14"
	oidIfOutOctets    = "1.3.6.1.2.1.2.2.1.16"
	oidIfOutUcastPkts = "1.3.6.1.2.1.2.2.1.17"
	oidIfOutNUcast    = "1.3.6.1.2.1.2.2.1.18"
	oidIfOutDiscards  = "1.3.6.1.2.1.2.2.1.19"
	oidIfOutErrors    = "1.3.6.1.2.1.2.2.1.20"

	// IF-MIB ifXTable (1.3.6.1.2.1.31.1.1.1.x)
	oidIfName              = "1.3.6.1.2.1.31.1.1.1.1"
	oidIfHCInOctets        = "1.3.6.1.2.1.31.1.1.1.6"
	oidIfHCInUcastPkts     = "1.3.6.1.2.1.31.1.1.1.7"
	oidIfHCInMulticastPkts = "1.3.6.1.2.1.31.1.1.1.8"
	oidIfHCInBroadcastPkts = "1.3.6.1.2.1.31.1.1.1.9"
	oidIfHCOutOctets       = "1.3.6.1.2.1.31.1.1.1.10"
	oidIfHCOutUcastPkts    = "1.3.6.1.2.1.31.1.1.1.11"
	oidIfHCOutMulticast    = "1.3.6.1.2.1.31.1.1.1.12"
	oidIfHCOutBroadcast    = "1.3.6.1.2.1.31.1.1.1.13"
	oidIfHighSpeed         = "1.3.6.1.2.1.31.1.1.1.15"
	oidIfAlias             = "1.3.6.1.2.1.31.1.1.1.18"
	oidIfCounterDiscont    = "1.3.6.1.2.1.31.1.1.1.19"

	// LLDP-MIB (IEEE 802.1AB-2005, 1.0.8802.1.1.2)
	oidLldpLocChassisIDSubtype = "1.0.8802.1.1.2.1.3.1.0"
	oidLldpLocChassisID        = "1.0.8802.1.1.2.1.3.2.0"
	oidLldpLocSysName          = "1.0.8802.1.1.2.1.3.3.0"
	oidLldpLocPortIDSubtype    = "1.0.8802.1.1.2.1.3.7.1.2"
	oidLldpLocPortID           = "1.0.8802.1.1.2.1.3.7.1.3"
	oidLldpLocPortDesc         = "1.0.8802.1.1.2.1.3.7.1.4"
	oidLldpRemChassisIDSubtype = "1.0.8802.1.1.2.1.4.1.1.4"
	oidLldpRemChassisID        = "1.0.8802.1.1.2.1.4.1.1.5"
	oidLldpRemPortIDSubtype    = "1.0.8802.1.1.2.1.4.1.1.6"
	oidLldpRemPortID           = "1.0.8802.1.1.2.1.4.1.1.7"
	oidLldpRemPortDesc         = "1.0.8802.1.1.2.1.4.1.1.8"
	oidLldpRemSysName          = "1.0.8802.1.1.2.1.4.1.1.9"
	oidLldpRemManAddrIfSubtype = "1.0.8802.1.1.2.1.4.2.1.3"
)

// oidName names the columns in errors, as the MIBs do.
var oidName = map[string]string{
	oidSysUpTime: "sysUpTime", oidSysName: "sysName",
	oidIfDescr: "ifDescr", oidIfType: "ifType", oidIfSpeed: "ifSpeed", oidIfPhysAddress: "ifPhysAddress",
	oidIfOperStatus: "ifOperStatus", oidIfInOctets: "ifInOctets", oidIfInUcastPkts: "ifInUcastPkts",
	oidIfInNUcastPkts: "ifInNUcastPkts", oidIfInDiscards: "ifInDiscards", oidIfInErrors: "ifInErrors",
	oidIfOutOctets: "ifOutOctets", oidIfOutUcastPkts: "ifOutUcastPkts", oidIfOutNUcast: "ifOutNUcastPkts",
	oidIfOutDiscards: "ifOutDiscards", oidIfOutErrors: "ifOutErrors",
	oidIfName: "ifName", oidIfHCInOctets: "ifHCInOctets", oidIfHCInUcastPkts: "ifHCInUcastPkts",
	oidIfHCInMulticastPkts: "ifHCInMulticastPkts", oidIfHCInBroadcastPkts: "ifHCInBroadcastPkts",
	oidIfHCOutOctets: "ifHCOutOctets", oidIfHCOutUcastPkts: "ifHCOutUcastPkts",
	oidIfHCOutMulticast: "ifHCOutMulticastPkts", oidIfHCOutBroadcast: "ifHCOutBroadcastPkts",
	oidIfHighSpeed: "ifHighSpeed", oidIfAlias: "ifAlias", oidIfCounterDiscont: "ifCounterDiscontinuityTime",
	oidLldpLocChassisIDSubtype: "lldpLocChassisIdSubtype", oidLldpLocChassisID: "lldpLocChassisId",
	oidLldpLocSysName: "lldpLocSysName", oidLldpLocPortIDSubtype: "lldpLocPortIdSubtype",
	oidLldpLocPortID: "lldpLocPortId", oidLldpLocPortDesc: "lldpLocPortDesc",
	oidLldpRemChassisIDSubtype: "lldpRemChassisIdSubtype", oidLldpRemChassisID: "lldpRemChassisId",
	oidLldpRemPortIDSubtype: "lldpRemPortIdSubtype", oidLldpRemPortID: "lldpRemPortId",
	oidLldpRemPortDesc: "lldpRemPortDesc", oidLldpRemSysName: "lldpRemSysName",
	oidLldpRemManAddrIfSubtype: "lldpRemManAddrTable",
}

func nameOf(oid string) string {
	if n, ok := oidName[oid]; ok {
		return n
	}
	return oid
}

// normOID drops the leading dot gosnmp writes.
func normOID(s string) string { return strings.TrimPrefix(s, ".") }

// parseOID splits a dotted OID into its arcs.
func parseOID(s string) ([]uint32, bool) {
	s = normOID(s)
	if s == "" {
		return nil, false
	}
	parts := strings.Split(s, ".")
	out := make([]uint32, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return nil, false
		}
		out[i] = uint32(v)
	}
	return out, true
}

// compareOID orders OIDs arc by arc, as SNMP walks them.
func compareOID(a, b []uint32) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}

// cell is one value of a table column.
type cell struct {
	index []uint32 // the row's index: the OID's arcs past the column
	pdu   gosnmp.SnmpPDU
}

// column is the walk of one column.
type column struct {
	prefix []uint32
	last   []uint32 // the last OID returned inside the column
	cells  []cell
	done   bool
}

func newColumn(oid string) *column {
	p, ok := parseOID(oid)
	if !ok {
		panic("eth: bad column OID " + oid)
	}
	return &column{prefix: p, last: p}
}

// nextOID is the OID the column's next GetBulk starts from.
func (c *column) nextOID() string { return formatOID(c.last) }

func formatOID(arcs []uint32) string {
	var b strings.Builder
	for i, a := range arcs {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.FormatUint(uint64(a), 10))
	}
	return b.String()
}

// maxCells bounds one column, so an agent that never ends a table cannot
// make a walk grow without bound.
const maxCells = 1 << 16

// absorb takes one GetBulk response for the active columns (interleaved:
// repetition r of column j is vbs[r*len(active)+j]) into them. Each column
// ends at its first varbind outside it or at endOfMibView; a varbind that
// does not advance its column (an agent walking backwards or in a loop) is
// an error naming the column.
func absorb(active []*column, vbs []gosnmp.SnmpPDU) error {
	if len(active) == 0 {
		return nil
	}
	for k, vb := range vbs {
		c := active[k%len(active)]
		if c.done {
			continue
		}
		switch vb.Type {
		case gosnmp.EndOfMibView, gosnmp.NoSuchObject, gosnmp.NoSuchInstance:
			c.done = true
			continue
		}
		oid, ok := parseOID(vb.Name)
		if !ok {
			return fmt.Errorf("%s: unparsable OID %q in the answer", nameOf(formatOID(c.prefix)), clip(vb.Name))
		}
		if len(oid) <= len(c.prefix) || compareOID(oid[:len(c.prefix)], c.prefix) != 0 {
			c.done = true
			continue
		}
		if compareOID(oid, c.last) <= 0 {
			return fmt.Errorf("%s: the agent went back from %s to %s (OIDs not increasing)", nameOf(formatOID(c.prefix)), formatOID(c.last), clip(vb.Name))
		}
		if len(c.cells) >= maxCells {
			return fmt.Errorf("%s: more than %d rows", nameOf(formatOID(c.prefix)), maxCells)
		}
		c.last = oid
		c.cells = append(c.cells, cell{index: oid[len(c.prefix):], pdu: vb})
	}
	return nil
}

// clip bounds what an error repeats of the agent's data.
func clip(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "…"
	}
	return s
}

// asUint reads an integer-valued varbind.
func asUint(p gosnmp.SnmpPDU) (uint64, bool) {
	switch v := p.Value.(type) {
	case uint:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	case int:
		if v < 0 {
			return 0, false
		}
		return uint64(v), true
	case int64:
		if v < 0 {
			return 0, false
		}
		return uint64(v), true
	}
	return 0, false
}

// asInt reads an INTEGER (an enumeration) varbind.
func asInt(p gosnmp.SnmpPDU) (int, bool) {
	u, ok := asUint(p)
	if !ok || u > math.MaxInt32 {
		return 0, false
	}
	return int(u), true
}

// asBytes reads an OCTET STRING varbind.
func asBytes(p gosnmp.SnmpPDU) ([]byte, bool) {
	switch v := p.Value.(type) {
	case []byte:
		return v, true
	case string:
		return []byte(v), true
	}
	return nil, false
}

// asText reads a DisplayString, dropping a trailing NUL and bounding it.
func asText(p gosnmp.SnmpPDU) string {
	b, _ := asBytes(p)
	s := strings.TrimRight(string(b), "\x00")
	if len(s) > 255 {
		s = s[:255]
	}
	return strings.ToValidUTF8(s, "?")
}

// Iface is one row of ifTable/ifXTable.
type Iface struct {
	Index     int
	Name      string // ifName, else ifDescr
	Descr     string
	Alias     string
	Type      int
	MAC       []byte
	HighSpeed uint64 // Mb/s: ifHighSpeed, else ifSpeed / 1e6
	Oper      int    // ifOperStatus: 1 up, 2 down, ...
}

// ifTypeLoopback is IANAifType softwareLoopback.
const ifTypeLoopback = 24

// single reads a one-arc index (ifIndex, lldpPortNumber) of 1..2^31-1.
func single(idx []uint32) (int, bool) {
	if len(idx) != 1 || idx[0] == 0 || idx[0] > math.MaxInt32 {
		return 0, false
	}
	return int(idx[0]), true
}

// decodeIfaces joins the interface columns into rows by ifIndex. A row
// with a malformed index or value is an error naming the column and row,
// and is left out; the others are kept.
func decodeIfaces(cols map[string]*column) (map[int]*Iface, []error) {
	out := map[int]*Iface{}
	var errs []error
	row := func(oid string, c cell) *Iface {
		i, ok := single(c.index)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: bad ifIndex %s", nameOf(oid), formatOID(c.index)))
			return nil
		}
		r := out[i]
		if r == nil {
			r = &Iface{Index: i}
			out[i] = r
		}
		return r
	}
	speed := map[int]uint64{}
	for oid, col := range cols {
		for _, c := range col.cells {
			r := row(oid, c)
			if r == nil {
				continue
			}
			bad := false
			switch oid {
			case oidIfDescr:
				r.Descr = asText(c.pdu)
			case oidIfName:
				r.Name = asText(c.pdu)
			case oidIfAlias:
				r.Alias = asText(c.pdu)
			case oidIfType:
				r.Type, bad = intOrBad(c.pdu)
			case oidIfOperStatus:
				r.Oper, bad = intOrBad(c.pdu)
			case oidIfPhysAddress:
				b, ok := asBytes(c.pdu)
				bad = !ok
				r.MAC = append([]byte(nil), b...)
			case oidIfHighSpeed:
				v, ok := asUint(c.pdu)
				bad = !ok
				r.HighSpeed = v
			case oidIfSpeed:
				v, ok := asUint(c.pdu)
				bad = !ok
				speed[r.Index] = v
			}
			if bad {
				errs = append(errs, fmt.Errorf("%s.%d: unexpected %s value", nameOf(oid), r.Index, c.pdu.Type))
			}
		}
	}
	for i, r := range out {
		if r.Name == "" {
			r.Name = r.Descr
		}
		if r.HighSpeed == 0 && speed[i] > 0 && speed[i] < math.MaxUint32 {
			r.HighSpeed = speed[i] / 1e6
		}
	}
	return out, errs
}

func intOrBad(p gosnmp.SnmpPDU) (int, bool) {
	v, ok := asInt(p)
	return v, !ok
}

// LocPort is one row of lldpLocPortTable.
type LocPort struct {
	Num       int
	IDSubtype int
	ID        []byte
	Desc      string
}

func decodeLocPorts(cols map[string]*column) (map[int]*LocPort, []error) {
	out := map[int]*LocPort{}
	var errs []error
	for oid, col := range cols {
		for _, c := range col.cells {
			n, ok := single(c.index)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: bad lldpLocPortNum %s", nameOf(oid), formatOID(c.index)))
				continue
			}
			r := out[n]
			if r == nil {
				r = &LocPort{Num: n}
				out[n] = r
			}
			switch oid {
			case oidLldpLocPortIDSubtype:
				r.IDSubtype, _ = asInt(c.pdu)
			case oidLldpLocPortID:
				b, _ := asBytes(c.pdu)
				r.ID = append([]byte(nil), b...)
			case oidLldpLocPortDesc:
				r.Desc = asText(c.pdu)
			}
		}
	}
	return out, errs
}

// Remote is one row of lldpRemTable: a neighbour seen on a local port.
type Remote struct {
	LocalPort      int
	Index          int
	ChassisSubtype int
	Chassis        []byte
	PortSubtype    int
	PortID         []byte
	PortDesc       string
	SysName        string
	MgmtAddrs      []string
}

// remKey is lldpRemTable's index past the time mark.
type remKey struct{ port, index int }

// decodeRemotes joins lldpRemTable's columns (index lldpRemTimeMark,
// lldpRemLocalPortNum, lldpRemIndex) and the addresses of
// lldpRemManAddrTable (index those three, lldpRemManAddrSubtype, then the
// address as a length-prefixed string).
func decodeRemotes(cols map[string]*column) ([]*Remote, []error) {
	rows := map[remKey]*Remote{}
	var order []remKey
	var errs []error
	get := func(k remKey) *Remote {
		r := rows[k]
		if r == nil {
			r = &Remote{LocalPort: k.port, Index: k.index}
			rows[k] = r
			order = append(order, k)
		}
		return r
	}
	for oid, col := range cols {
		for _, c := range col.cells {
			if len(c.index) < 3 || c.index[1] == 0 || c.index[1] > math.MaxInt32 || c.index[2] > math.MaxInt32 {
				errs = append(errs, fmt.Errorf("%s: bad index %s (want timeMark.localPortNum.remIndex)", nameOf(oid), formatOID(c.index)))
				continue
			}
			k := remKey{int(c.index[1]), int(c.index[2])}
			if oid == oidLldpRemManAddrIfSubtype {
				addr, err := decodeManAddr(c.index[3:])
				if err != nil {
					errs = append(errs, fmt.Errorf("lldpRemManAddrTable: port %d neighbour %d: %v", k.port, k.index, err))
					continue
				}
				r := get(k)
				r.MgmtAddrs = append(r.MgmtAddrs, addr)
				continue
			}
			if len(c.index) != 3 {
				errs = append(errs, fmt.Errorf("%s: bad index %s (want timeMark.localPortNum.remIndex)", nameOf(oid), formatOID(c.index)))
				continue
			}
			r := get(k)
			switch oid {
			case oidLldpRemChassisIDSubtype:
				r.ChassisSubtype, _ = asInt(c.pdu)
			case oidLldpRemChassisID:
				b, _ := asBytes(c.pdu)
				r.Chassis = append([]byte(nil), b...)
			case oidLldpRemPortIDSubtype:
				r.PortSubtype, _ = asInt(c.pdu)
			case oidLldpRemPortID:
				b, _ := asBytes(c.pdu)
				r.PortID = append([]byte(nil), b...)
			case oidLldpRemPortDesc:
				r.PortDesc = asText(c.pdu)
			case oidLldpRemSysName:
				r.SysName = asText(c.pdu)
			}
		}
	}
	out := make([]*Remote, 0, len(order))
	for _, k := range order {
		out = append(out, rows[k])
	}
	return out, errs
}

// decodeManAddr reads lldpRemManAddrSubtype and the address (an
// IANA address family, then a length-prefixed octet string).
func decodeManAddr(idx []uint32) (string, error) {
	if len(idx) < 2 {
		return "", fmt.Errorf("address index %s truncated", formatOID(idx))
	}
	family, n := idx[0], int(idx[1])
	if n != len(idx)-2 {
		return "", fmt.Errorf("address index %s: length %d but %d octets", formatOID(idx), idx[1], len(idx)-2)
	}
	b := make([]byte, n)
	for i, v := range idx[2:] {
		if v > 255 {
			return "", fmt.Errorf("address index %s: octet %d out of range", formatOID(idx), v)
		}
		b[i] = byte(v)
	}
	switch {
	case family == 1 && n == 4, family == 2 && n == 16:
		return net.IP(b).String(), nil
	}
	return fmt.Sprintf("%d:%x", family, b), nil
}

// portCounter is where one IF-MIB column goes in a port reading.
type portCounter int

const (
	pcInOctets portCounter = iota
	pcInUcast
	pcInMcast
	pcInBcast
	pcOutOctets
	pcOutUcast
	pcOutMcast
	pcOutBcast
	pcInDiscards
	pcInErrors
	pcOutDiscards
	pcOutErrors
	pcDiscont // ifCounterDiscontinuityTime: not a counter; a change means the counters restarted
	numPC
)

// hcColumns and c32Columns are what a sweep walks per switch: the 64-bit
// counters (with the 32-bit error counters, which have no 64-bit form), or
// for agents without ifXTable's HC counters the 32-bit ones.
var (
	hcColumns = map[string]portCounter{
		oidIfHCInOctets: pcInOctets, oidIfHCInUcastPkts: pcInUcast, oidIfHCInMulticastPkts: pcInMcast,
		oidIfHCInBroadcastPkts: pcInBcast, oidIfHCOutOctets: pcOutOctets, oidIfHCOutUcastPkts: pcOutUcast,
		oidIfHCOutMulticast: pcOutMcast, oidIfHCOutBroadcast: pcOutBcast,
		oidIfInDiscards: pcInDiscards, oidIfInErrors: pcInErrors, oidIfOutDiscards: pcOutDiscards, oidIfOutErrors: pcOutErrors,
		oidIfCounterDiscont: pcDiscont,
	}
	c32Columns = map[string]portCounter{
		oidIfInOctets: pcInOctets, oidIfInUcastPkts: pcInUcast, oidIfInNUcastPkts: pcInMcast,
		oidIfOutOctets: pcOutOctets, oidIfOutUcastPkts: pcOutUcast, oidIfOutNUcast: pcOutMcast,
		oidIfInDiscards: pcInDiscards, oidIfInErrors: pcInErrors, oidIfOutDiscards: pcOutDiscards, oidIfOutErrors: pcOutErrors,
	}
)

// rawCounters is one interface's IF-MIB counters as read; wide[c] is set
// where the value is a Counter64, have[c] where the agent gave it.
type rawCounters struct {
	v    [numPC]uint64
	wide [numPC]bool
	have [numPC]bool
}

// decodeCounters joins counter columns into rows by ifIndex.
func decodeCounters(cols map[string]*column, which map[string]portCounter) (map[int]*rawCounters, []error) {
	out := map[int]*rawCounters{}
	var errs []error
	for oid, col := range cols {
		pc, ok := which[oid]
		if !ok {
			continue
		}
		for _, c := range col.cells {
			i, ok := single(c.index)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: bad ifIndex %s", nameOf(oid), formatOID(c.index)))
				continue
			}
			v, ok := asUint(c.pdu)
			if !ok {
				errs = append(errs, fmt.Errorf("%s.%d: unexpected %s value", nameOf(oid), i, c.pdu.Type))
				continue
			}
			r := out[i]
			if r == nil {
				r = &rawCounters{}
				out[i] = r
			}
			r.v[pc], r.have[pc], r.wide[pc] = v, true, c.pdu.Type == gosnmp.Counter64
		}
	}
	return out, errs
}
