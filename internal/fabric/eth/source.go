package eth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netloom/netloom/internal/fabric"
)

// Options tune a Source.
type Options struct {
	// Log receives each error about a switch's data (one line each; the
	// same error again only every 5 minutes); nil means slog.Default().
	Log *slog.Logger
}

// Source reads an Ethernet fabric over SNMP. It is safe for concurrent
// use; each switch has one query stream at a time.
type Source struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	lay    *layout
	last   map[int]*view // by switch in the configuration: its last good read
	sw     map[fabric.GUID]*swState
	named  map[fabric.GUID]SwitchName // the switches' names the last discovery logged
	errs   map[[2]string]uint64       // (switch, field) -> errors
	logged map[[2]string]logged       // what was last logged per (switch, field)
}

// logged is the last message logged for a (switch, field), and when: the
// same error every sweep is logged again only every logEvery.
type logged struct {
	msg string
	at  time.Time
}

const (
	logEvery = 5 * time.Minute
	// maxErrorKeys bounds the (switch, field) pairs counted apart; past
	// it errors count under ("", "other"), so names an agent makes up
	// cannot grow the map without bound.
	maxErrorKeys = 4096
)

// swState is what sweeps remember of one switch: whether it has 64-bit
// counters, its uptime, and each port's raw counters (for 32-bit wraps).
type swState struct {
	mu      sync.Mutex
	hc      int // 0: not yet known, 1: ifHC* counters, -1: 32-bit ifTable only
	have    bool
	upTime  uint64
	upAt    time.Time
	ports   map[int]*portState
	cfgSlot int
	// table is the previous answer's raw counters of every interface:
	// an answer equal to it is the agent's cache (the management
	// interface the request crossed would have counted it otherwise).
	table map[int]rawCounters
}

type portState struct {
	have bool
	raw  [numPC]uint64
	high [numPC]uint64 // wraps of 32-bit counters, times 2^32
}

// Open checks the configuration; nothing is sent until Discover.
func Open(cfg Config, opt Options) (*Source, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("eth: %w", err)
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	return &Source{cfg: cfg.withDefaults(), log: opt.Log, last: map[int]*view{}, sw: map[fabric.GUID]*swState{},
		errs: map[[2]string]uint64{}, logged: map[[2]string]logged{}}, nil
}

// record counts and logs errors about switches' data.
func (s *Source) record(errs []error) {
	if len(errs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, err := range errs {
		var e *Error
		key := [2]string{"", "other"}
		if errors.As(err, &e) {
			key = [2]string{e.Switch, e.Field}
		}
		if _, known := s.errs[key]; !known && len(s.errs) >= maxErrorKeys {
			key = [2]string{"", "other"}
		}
		s.errs[key]++
		if l, ok := s.logged[key]; ok && l.msg == err.Error() && now.Sub(l.at) < logEvery {
			continue
		}
		if len(s.logged) < maxErrorKeys {
			s.logged[key] = logged{err.Error(), now}
		}
		s.log.Warn("ethernet fabric", "err", err)
	}
}

// ErrorCount is how many errors one switch's field has had.
type ErrorCount struct {
	Switch, Field string
	Count         uint64
}

// Errors lists the errors counted so far by switch and MIB object.
func (s *Source) Errors() []ErrorCount {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ErrorCount, 0, len(s.errs))
	for k, n := range s.errs {
		out = append(out, ErrorCount{k[0], k[1], n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Switch != out[j].Switch {
			return out[i].Switch < out[j].Switch
		}
		return out[i].Field < out[j].Field
	})
	return out
}

var errDesc = prometheus.NewDesc("netloom_eth_errors_total",
	"Errors reading Ethernet switches over SNMP (no answer, bad credentials, malformed or inconsistent IF-MIB or LLDP-MIB data), by switch and MIB object.",
	[]string{"switch", "field"}, nil)

// Describe implements prometheus.Collector.
func (s *Source) Describe(ch chan<- *prometheus.Desc) { ch <- errDesc }

// Collect implements prometheus.Collector.
func (s *Source) Collect(ch chan<- prometheus.Metric) {
	for _, e := range s.Errors() {
		ch <- prometheus.MustNewConstMetric(errDesc, prometheus.CounterValue, float64(e.Count), e.Switch, e.Field)
	}
}

// parallel runs f(i) for i < n, at most limit at once.
func parallel(ctx context.Context, n, limit int, f func(i int)) {
	sem := make(chan struct{}, max(1, limit))
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}(i)
	}
	wg.Wait()
}

// discoverColumns are the table columns discovery walks on every switch,
// all in one GetBulk walk.
var discoverColumns = []string{
	oidIfDescr, oidIfType, oidIfSpeed, oidIfPhysAddress, oidIfOperStatus,
	oidIfName, oidIfHighSpeed, oidIfAlias,
	oidLldpLocPortIDSubtype, oidLldpLocPortID, oidLldpLocPortDesc,
	oidLldpRemChassisIDSubtype, oidLldpRemChassisID, oidLldpRemPortIDSubtype, oidLldpRemPortID,
	oidLldpRemPortDesc, oidLldpRemSysName, oidLldpRemManAddrIfSubtype,
}

// readView reads what discovery needs from switch i. Malformed rows are
// returned as errors beside the view; a switch that cannot be read at all
// is an error alone.
func (s *Source) readSwitch(ctx context.Context, i int) (*view, []error) {
	sc := &s.cfg.Switches[i]
	sess, err := dial(ctx, &s.cfg, sc)
	if err != nil {
		return nil, []error{err}
	}
	defer sess.close()
	return readView(sess, sc)
}

// readView reads one switch's view over a session.
func readView(sess *session, sc *SwitchConfig) (*view, []error) {
	sc0, err := sess.get([]string{oidSysName, oidLldpLocChassisIDSubtype, oidLldpLocChassisID, oidLldpLocSysName})
	if err != nil {
		return nil, []error{err}
	}
	cols, err := sess.walk(discoverColumns)
	if err != nil {
		return nil, []error{err}
	}
	host, _, _ := sc.hostPort()
	v := &view{cfg: sc, host: host, SysName: asText(sc0[oidSysName]), LocSysName: asText(sc0[oidLldpLocSysName])}
	v.LocChassisSubtype, _ = asInt(sc0[oidLldpLocChassisIDSubtype])
	if b, ok := asBytes(sc0[oidLldpLocChassisID]); ok {
		v.LocChassis = append([]byte(nil), b...)
	}
	sess.label = v.name()
	var errs []error
	pick := func(oids ...string) map[string]*column {
		m := map[string]*column{}
		for _, o := range oids {
			m[o] = cols[o]
		}
		return m
	}
	var es []error
	v.Ifaces, es = decodeIfaces(pick(oidIfDescr, oidIfType, oidIfSpeed, oidIfPhysAddress, oidIfOperStatus, oidIfName, oidIfHighSpeed, oidIfAlias))
	errs = append(errs, tag(v.name(), es)...)
	v.LocPorts, es = decodeLocPorts(pick(oidLldpLocPortIDSubtype, oidLldpLocPortID, oidLldpLocPortDesc))
	errs = append(errs, tag(v.name(), es)...)
	v.Remotes, es = decodeRemotes(pick(oidLldpRemChassisIDSubtype, oidLldpRemChassisID, oidLldpRemPortIDSubtype, oidLldpRemPortID,
		oidLldpRemPortDesc, oidLldpRemSysName, oidLldpRemManAddrIfSubtype))
	errs = append(errs, tag(v.name(), es)...)
	if len(v.Ifaces) == 0 {
		errs = append(errs, errf(v.name(), "ifTable", "the agent serves no interfaces"))
	}
	if len(v.LocChassis) == 0 && len(v.LocPorts) == 0 {
		errs = append(errs, errf(v.name(), "lldpLocChassisId", "the agent serves no LLDP-MIB (is an LLDP agent running, attached to snmpd?): no links can be seen from this switch"))
	}
	return v, errs
}

// tag names the switch in decoding errors.
func tag(sw string, es []error) []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = &Error{Switch: sw, Field: "decode", Msg: e.Error()}
	}
	return out
}

// Discover reads every switch (in parallel, Config.Parallel at once) and
// builds the fabric LLDP shows. A switch that cannot be read is an error,
// counted and logged, and the others are still read; where it was read
// before, its last view stands in (so its links do not flap down with its
// agent). Discover fails only when no switch can be read.
func (s *Source) Discover(ctx context.Context) (*fabric.Topology, error) {
	n := len(s.cfg.Switches)
	views := make([]*view, n)
	errs := make([][]error, n)
	parallel(ctx, n, s.cfg.Parallel, func(i int) { views[i], errs[i] = s.readSwitch(ctx, i) })
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("eth discover: %w", err)
	}
	var all []error
	var got []*view
	var failed []error
	about := map[*view][]error{} // errors about a view, by its own name
	s.mu.Lock()
	for i := range views {
		all = append(all, errs[i]...)
		if views[i] != nil {
			s.last[i] = views[i]
			got = append(got, views[i])
			about[views[i]] = errs[i]
			continue
		}
		failed = append(failed, errs[i]...)
		if old := s.last[i]; old != nil {
			e := errf(old.name(), "snmp", "not read this discovery; its view from the last one stands in")
			all = append(all, e)
			got = append(got, old)
			about[old] = []error{e}
		}
	}
	s.mu.Unlock()
	if len(got) == 0 {
		s.record(all)
		return nil, fmt.Errorf("eth discover: no switch could be read: %w", errors.Join(firstN(failed, 5)...))
	}
	t, lay, berrs := build(got)
	if lay != nil {
		// Errors read before the switches were named name them as the
		// topology does (a shared sysName names no one switch).
		for _, l := range lay.switches {
			retag(about[l.view], l.view, l.name.Name)
		}
	}
	all = append(all, berrs...)
	s.record(all)
	if t == nil {
		return nil, fmt.Errorf("eth discover: %w", errors.Join(berrs...))
	}
	s.mu.Lock()
	s.noteNames(lay)
	s.lay = lay
	for g, l := range lay.switches {
		if st := s.sw[g]; st == nil {
			s.sw[g] = &swState{ports: map[int]*portState{}}
		}
		s.sw[g].cfgSlot = s.slotOf(l.view)
	}
	s.mu.Unlock()
	return t, nil
}

func (s *Source) slotOf(v *view) int {
	for i := range s.cfg.Switches {
		if &s.cfg.Switches[i] == v.cfg {
			return i
		}
	}
	return -1
}

func firstN(errs []error, n int) []error {
	if len(errs) > n {
		return append(errs[:n:n], fmt.Errorf("… and %d more", len(errs)-n))
	}
	return errs
}

// noteNames logs each switch whose name is not simply its sysName (one
// that several switches share, or none), and why it got the one it has,
// when that is new. Called with s.mu held.
func (s *Source) noteNames(lay *layout) {
	seen := make(map[fabric.GUID]SwitchName, len(lay.switches))
	for g, l := range lay.switches {
		n := l.name
		seen[g] = n
		if n.Name == n.SysName || s.named[g] == n {
			continue
		}
		s.log.Info("ethernet switch named", "switch", n.Name, "guid", g, "sysName", n.SysName, "why", n.Why)
	}
	s.named = seen
}

// SwitchNames lists the polled switches of the last discovered topology,
// by name: each switch's name there, distinct from every other's, its
// sysName, and why that name (docs/ethernet.md).
func (s *Source) SwitchNames() []SwitchName {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lay == nil {
		return nil
	}
	out := make([]SwitchName, 0, len(s.lay.switches))
	for _, l := range s.lay.switches {
		out = append(out, l.name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// PortNames maps the ports of the last discovered topology to interface
// names: a switch port's ifName, a host port's LLDP port ID as its switch
// sees it (lldpd advertises the interface name).
func (s *Source) PortNames() map[fabric.PortRef]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lay == nil {
		return nil
	}
	return maps.Clone(s.lay.names)
}

// ForwardingTables projects the shortest-path model onto one table per
// switch (see forwardingTables); fabric.Routes routes the fabric's
// Ethernet switches by the model itself, equal-cost paths included.
func (s *Source) ForwardingTables(ctx context.Context, t *fabric.Topology) (fabric.ForwardingTables, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return forwardingTables(t), nil
}

// ResetCounters is not possible: IF-MIB counters are read-only. They never
// need it either: 64-bit counters do not saturate, and 32-bit ones are
// unwrapped into 64-bit values.
func (s *Source) ResetCounters(context.Context, *fabric.Topology, []fabric.PortRef) error {
	return errors.New("eth: IF-MIB counters cannot be cleared over SNMP, and need not be (64-bit, or 32-bit unwrapped); set reset_threshold to 0")
}

// Close releases nothing: sessions live for one discovery or sweep.
func (s *Source) Close() error { return nil }

// current returns the layout, discovering once when there is none or
// when t names switches it does not know (a topology read from a store).
func (s *Source) current(ctx context.Context, t *fabric.Topology, ports []fabric.PortRef) *layout {
	s.mu.Lock()
	lay := s.lay
	s.mu.Unlock()
	if lay != nil {
		known := true
		for _, p := range ports {
			if _, ok := lay.switches[p.GUID]; !ok {
				if n, inT := t.Node(p.GUID); inT && n.Type == fabric.Switch {
					known = false
					break
				}
			}
		}
		if known {
			return lay
		}
	}
	if _, err := s.Discover(ctx); err != nil {
		return lay
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lay
}

// Sweep reads the counters of the given switch ports: per switch one
// stream (sysUpTime, then one GetBulk walk of the IF-MIB counter columns),
// switches in parallel, opt.Parallel at once. Host ports are not polled
// (hosts are LLDP neighbours, not SNMP agents): they read as errors.
func (s *Source) Sweep(ctx context.Context, t *fabric.Topology, ports []fabric.PortRef, opt fabric.SweepOptions) ([]fabric.PortReading, error) {
	opt = opt.WithDefaults()
	out := make([]fabric.PortReading, len(ports))
	lay := s.current(ctx, t, ports)
	bySwitch := map[fabric.GUID][]int{}
	var order []fabric.GUID
	for i, p := range ports {
		out[i].Port = p
		if lay == nil {
			out[i].Err = errors.New("eth: the fabric has not been discovered (no switch answered)")
			continue
		}
		l, ok := lay.switches[p.GUID]
		if !ok {
			out[i].Err = fmt.Errorf("eth: %s is not a polled switch (hosts are LLDP neighbours, not SNMP agents: the switch port facing a host counts its traffic)", p.GUID)
			continue
		}
		if _, ok := l.portIf[p.Port]; !ok {
			out[i].Err = fmt.Errorf("eth: switch %s has no port %d", l.name.Name, p.Port)
			continue
		}
		if _, seen := bySwitch[p.GUID]; !seen {
			order = append(order, p.GUID)
		}
		bySwitch[p.GUID] = append(bySwitch[p.GUID], i)
	}
	var mu sync.Mutex
	var all []error
	parallel(ctx, len(order), opt.Parallel, func(k int) {
		g := order[k]
		errs := s.sweepSwitch(ctx, g, lay.switches[g], bySwitch[g], out)
		if len(errs) > 0 {
			mu.Lock()
			all = append(all, errs...)
			mu.Unlock()
		}
	})
	s.record(all)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("eth sweep: %w", err)
	}
	return out, nil
}

// sweepSwitch reads one switch's counters into out[idx...].
func (s *Source) sweepSwitch(ctx context.Context, g fabric.GUID, l *swLayout, idx []int, out []fabric.PortReading) []error {
	s.mu.Lock()
	st := s.sw[g]
	if st == nil {
		st = &swState{ports: map[int]*portState{}}
		s.sw[g] = st
	}
	s.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	fail := func(err error) []error {
		for _, i := range idx {
			out[i].Err = err
		}
		return []error{err}
	}
	sess, err := dial(ctx, &s.cfg, l.view.cfg)
	if err != nil {
		return fail(err)
	}
	defer sess.close()
	sess.label = l.name.Name
	return sweepFrom(sess, st, l, idx, out)
}

// sweepFrom reads one switch's counters over a session into out[idx...],
// unwrapping into st.
func sweepFrom(sess *session, st *swState, l *swLayout, idx []int, out []fabric.PortReading) []error {
	fail := func(err error) []error {
		for _, i := range idx {
			out[i].Err = err
		}
		return []error{err}
	}
	up, upAt, err := sess.upTime()
	if err != nil {
		return fail(err)
	}
	var rows map[int]*rawCounters
	var errs []error
	var which map[string]portCounter
	for attempt := 0; attempt < 2; attempt++ {
		which = hcColumns
		if st.hc < 0 {
			which = c32Columns
		}
		cols, err := sess.walk(columnsOf(which))
		if err != nil {
			return fail(err)
		}
		var es []error
		rows, es = decodeCounters(cols, which)
		errs = tag(l.name.Name, es)
		if st.hc != 0 {
			break
		}
		st.hc = -1
		for _, r := range rows {
			if r.have[pcInOctets] && r.wide[pcInOctets] {
				st.hc = 1
				break
			}
		}
		if st.hc == 1 {
			break
		}
	}
	now := time.Now()
	reboot := st.have && rebooted(st.upTime, st.upAt, up, upAt)
	stale := st.have && !reboot && sameTable(st.table, rows)
	st.have, st.upTime, st.upAt = true, up, upAt
	st.table = make(map[int]rawCounters, len(rows))
	for ifi, r := range rows {
		st.table[ifi] = *r
	}
	table := "ifXTable"
	if st.hc < 0 {
		table = "ifTable"
	}
	for _, i := range idx {
		port := out[i].Port.Port
		ifi, ok := l.portIf[port]
		if !ok {
			out[i].Err = errf(l.name.Name, table, "no port %d", port)
			errs = append(errs, out[i].Err)
			continue
		}
		r := rows[ifi]
		if r == nil || !r.have[pcInOctets] || !r.have[pcOutOctets] {
			out[i].Err = errf(l.name.Name, table, "no counters for port %d (ifIndex %d, %s) in the answer", port, ifi, l.view.Ifaces[ifi].Name)
			errs = append(errs, out[i].Err)
			continue
		}
		ps := st.ports[ifi]
		if ps == nil {
			ps = &portState{}
			st.ports[ifi] = ps
		}
		out[i].Time = now
		out[i].Counters = unwrap(ps, r, reboot)
		out[i].Stale = stale
	}
	return errs
}

// sameTable reports whether an answer's counters of every interface equal
// the previous answer's: nothing counted anywhere on the switch, not even
// the request on its management interface, so the agent served its cache.
// (Were the switch truly silent, skipping the reading loses nothing: the
// next interval spans both.)
func sameTable(prev map[int]rawCounters, rows map[int]*rawCounters) bool {
	if len(prev) == 0 || len(prev) != len(rows) {
		return false
	}
	for ifi, r := range rows {
		if p, ok := prev[ifi]; !ok || p != *r {
			return false
		}
	}
	return true
}

func columnsOf(m map[string]portCounter) []string {
	out := make([]string, 0, len(m))
	for o := range m {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

// rebooted tells a restarted agent from sysUpTime (hundredths of a second,
// wrapping at 2^32, every 497 days): the new value is far from the old one
// advanced by the time between the reads.
func rebooted(old uint64, oldAt time.Time, cur uint64, curAt time.Time) bool {
	elapsed := curAt.Sub(oldAt).Seconds() * 100
	if elapsed < 0 {
		elapsed = 0
	}
	want := (old + uint64(elapsed)) % (1 << 32)
	diff := int64(cur) - int64(want)
	if diff < 0 {
		diff = -diff
	}
	if d2 := int64(1<<32) - diff; d2 < diff {
		diff = d2 // across the wrap
	}
	slack := max(int64(elapsed)/4, 1000) // 10 s, or a quarter of the interval
	return diff > slack
}

// unwrap turns one interface's raw IF-MIB counters into a reading: 32-bit
// counters (Counter32: the error counters, and all of them on an agent
// without ifHC*) that went down are taken as wrapped and unwrapped into
// 64 bits. After a reboot (sysUpTime went back) or an
// ifCounterDiscontinuityTime change the unwrapping starts again from the
// raw values, which then go back, and fabric.Diff counts the interval from
// zero (PortSample.Reset): a reboot never reads as a negative or huge rate.
// 64-bit counters are passed as they are; if they went back, Diff sees it.
func unwrap(ps *portState, r *rawCounters, reboot bool) fabric.Counters {
	reset := reboot || (ps.have && r.have[pcDiscont] && r.v[pcDiscont] != ps.raw[pcDiscont])
	var v [numPC]uint64
	for pc := portCounter(0); pc < numPC; pc++ {
		raw := r.v[pc]
		if reset || !ps.have {
			ps.high[pc] = 0
		} else if !r.wide[pc] && pc != pcDiscont && raw < ps.raw[pc] {
			ps.high[pc] += 1 << 32
		}
		ps.raw[pc] = raw
		v[pc] = ps.high[pc] + raw
	}
	ps.have = true
	var c fabric.Counters
	c.Extended = true // 64-bit values: they never saturate
	c.V[fabric.RcvData] = v[pcInOctets]
	c.V[fabric.XmitData] = v[pcOutOctets]
	c.V[fabric.UnicastRcvPkts] = v[pcInUcast]
	c.V[fabric.UnicastXmitPkts] = v[pcOutUcast]
	c.V[fabric.MulticastRcvPkts] = v[pcInMcast] + v[pcInBcast]
	c.V[fabric.MulticastXmitPkts] = v[pcOutMcast] + v[pcOutBcast]
	c.V[fabric.RcvPkts] = v[pcInUcast] + v[pcInMcast] + v[pcInBcast]
	c.V[fabric.XmitPkts] = v[pcOutUcast] + v[pcOutMcast] + v[pcOutBcast]
	c.V[fabric.RcvErrors] = v[pcInErrors]
	c.V[fabric.RcvSwitchRelayErrors] = v[pcInDiscards]
	c.V[fabric.XmitDiscards] = v[pcOutDiscards]
	c.V[fabric.XmitConstraintErrors] = v[pcOutErrors]
	return c
}
