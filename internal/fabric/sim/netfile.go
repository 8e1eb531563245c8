package sim

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/netloom/netloom/internal/fabric"
)

// netID is the node id WriteNetfile gives a node: "S-", "H-" or "R-" and
// the node GUID in 16 hex digits, as ibnetdiscover writes it.
func netID(n *fabric.Node) string {
	p := "H-"
	switch n.Type {
	case fabric.Switch:
		p = "S-"
	case fabric.Router:
		p = "R-"
	}
	return fmt.Sprintf("%s%016x", p, uint64(n.GUID))
}

func quoteDesc(s string) string {
	return `"` + strings.NewReplacer(`"`, `'`, "\n", " ", "\r", " ").Replace(s) + `"`
}

// WriteNetfile writes t in the ibnetdiscover/ibsim net-file format: CAs
// first (ibsim attaches its clients to the first node), then switches,
// each in LID order. Comments carry descriptions, LIDs and link width and
// speed, so ParseNetfile reads back the same topology.
func WriteNetfile(w io.Writer, t *fabric.Topology) error {
	order := make([]*fabric.Node, 0, len(t.Nodes))
	for i := range t.Nodes {
		order = append(order, &t.Nodes[i])
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if (a.Type == fabric.Switch) != (b.Type == fabric.Switch) {
			return b.Type == fabric.Switch
		}
		if (a.LID == 0) != (b.LID == 0) {
			return b.LID == 0
		}
		if a.LID != b.LID {
			return a.LID < b.LID
		}
		return a.GUID < b.GUID
	})
	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, "#\n# Topology file: written by netloom (%d nodes, %d links)\n#\n", len(t.Nodes), len(t.Links))
	for _, n := range order {
		bw.WriteString("\n")
		switch n.Type {
		case fabric.Switch:
			fmt.Fprintf(bw, "switchguid=0x%x\n", uint64(n.GUID))
			fmt.Fprintf(bw, "Switch\t%d %q\t\t# %s enhanced port 0 lid %d lmc 0\n", n.Ports, netID(n), quoteDesc(n.Description), n.LID)
		case fabric.Router:
			fmt.Fprintf(bw, "rtguid=0x%x\n", uint64(n.GUID))
			fmt.Fprintf(bw, "Rt\t%d %q\t\t# %s\n", n.Ports, netID(n), quoteDesc(n.Description))
		default:
			fmt.Fprintf(bw, "caguid=0x%x\n", uint64(n.GUID))
			fmt.Fprintf(bw, "Hca\t%d %q\t\t# %s\n", n.Ports, netID(n), quoteDesc(n.Description))
		}
		for p := 1; p <= n.Ports; p++ {
			me := fabric.PortRef{GUID: n.GUID, Port: p}
			l, ok := t.LinkAt(me)
			if !ok {
				continue
			}
			peer := l.A
			if peer == me {
				peer = l.B
			}
			pn, ok := t.Node(peer.GUID)
			if !ok {
				return fmt.Errorf("writing net file: link %s names unknown node %s", l.ID(), peer.GUID)
			}
			fmt.Fprintf(bw, "[%d]", p)
			if n.Type != fabric.Switch {
				fmt.Fprintf(bw, "(%x)", uint64(portGUID(n, p)))
			}
			fmt.Fprintf(bw, "\t%q[%d]", netID(pn), peer.Port)
			if pn.Type != fabric.Switch {
				fmt.Fprintf(bw, "(%x)", uint64(portGUID(pn, peer.Port)))
			}
			bw.WriteString("\t\t# ")
			if n.Type != fabric.Switch {
				fmt.Fprintf(bw, "lid %d lmc 0 ", n.PortLID(p))
			}
			fmt.Fprintf(bw, "%s lid %d %s%s\n", quoteDesc(pn.Description), pn.PortLID(peer.Port), strings.ToLower(l.Width), l.Speed)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing net file: %w", err)
	}
	return nil
}

func portGUID(n *fabric.Node, p int) fabric.GUID {
	if p < len(n.PortGUIDs) && n.PortGUIDs[p] != 0 {
		return n.PortGUIDs[p]
	}
	return n.GUID + fabric.GUID(p)
}

// ParseError is a malformed net file: which file, which line, what.
type ParseError struct {
	File string
	Line int // 0 when the problem is the file as a whole
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// maxLineLen bounds one net-file line.
const maxLineLen = 64 << 10

type pNode struct {
	id, desc string
	typ      fabric.NodeType
	ports    int
	guid     fabric.GUID
	hasGUID  bool
	lid      fabric.LID // switch
	portLID  []fabric.LID
	portGUID []fabric.GUID
	line     int
	seen     map[int]int // port -> line of its port line
}

type pPort struct {
	node          int
	port          int
	remote        string
	rport         int
	rportGUID     fabric.GUID
	width, speed  string
	lid, remoteLD fabric.LID
	line          int
}

type netParser struct {
	file  string
	nodes []*pNode
	byID  map[string]int
	ports []pPort
	// GUID announced by a switchguid=/caguid=/rtguid= line for the next header.
	nextGUID    fabric.GUID
	hasNextGUID bool
}

func (p *netParser) errf(line int, format string, a ...any) error {
	return &ParseError{File: p.file, Line: line, Msg: fmt.Sprintf(format, a...)}
}

// ParseNetfile reads an ibnetdiscover or ibsim net file (name is used in
// errors). Malformed input gets a *ParseError with the line number. Nodes
// whose ids carry no GUID ("Switch1") get synthetic GUIDs; links without a
// width or speed are 4X SDR, as ibsim makes them; LIDs the file does not
// give are assigned, CAs first, in file order.
func ParseNetfile(r io.Reader, name string) (*fabric.Topology, error) {
	p := &netParser{file: name, byID: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineLen)
	line := 0
	for sc.Scan() {
		line++
		if err := p.line(line, sc.Text()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		if err == bufio.ErrTooLong {
			return nil, p.errf(line+1, "line longer than %d bytes", maxLineLen)
		}
		return nil, &ParseError{File: name, Msg: "reading: " + err.Error()}
	}
	if len(p.nodes) == 0 {
		return nil, &ParseError{File: name, Msg: "no nodes (want Switch, Ca or Hca records)"}
	}
	return p.build()
}

func (p *netParser) line(n int, s string) error {
	s = strings.TrimSpace(s)
	if s == "" || s[0] == '#' {
		return nil
	}
	if s[0] == '[' {
		return p.portLine(n, s)
	}
	word := s
	if i := strings.IndexAny(s, " \t="); i >= 0 {
		word = s[:i]
	}
	switch word {
	case "Switch", "Ca", "Hca", "Rt":
		return p.header(n, word, s[len(word):])
	case "vendid", "devid", "sysimgguid", "caguid", "switchguid", "rtguid":
		if !strings.HasPrefix(s, word+"=") {
			return p.errf(n, "%s: want %s=VALUE", word, word)
		}
		v := s[len(word)+1:]
		if i := strings.IndexByte(v, '('); i >= 0 {
			v = v[:i]
		}
		g, err := fabric.ParseGUID(strings.TrimSpace(v))
		if err != nil {
			return p.errf(n, "%s: %v", word, err)
		}
		if word == "caguid" || word == "switchguid" || word == "rtguid" {
			p.nextGUID, p.hasNextGUID = g, true
		}
		return nil
	case "include", "do":
		return p.errf(n, "ibsim %q directives are not supported", word)
	}
	return p.errf(n, "unexpected %q: want a Switch/Ca/Hca header, a [port] line, key=value or a # comment", clip(s))
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// splitComment splits at the first # outside double quotes.
func splitComment(s string) (body, comment string) {
	in := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			in = !in
		case '#':
			if !in {
				return s[:i], s[i+1:]
			}
		}
	}
	return s, ""
}

// quoted reads a "..." string at the start of s (after blanks).
func quoted(s string) (val, rest string, ok bool) {
	s = strings.TrimLeft(s, " \t")
	if len(s) == 0 || s[0] != '"' {
		return "", s, false
	}
	i := strings.IndexByte(s[1:], '"')
	if i < 0 {
		return "", s, false
	}
	return s[1 : 1+i], s[2+i:], true
}

func (p *netParser) header(n int, kind, rest string) error {
	body, comment := splitComment(rest)
	f := strings.Fields(body)
	if len(f) < 2 {
		return p.errf(n, "%s header: want %s PORTS \"id\"", kind, kind)
	}
	ports, err := strconv.Atoi(f[0])
	if err != nil || ports < 1 || ports > 254 {
		return p.errf(n, "%s header: port count %q: want 1..254", kind, f[0])
	}
	id, after, ok := quoted(strings.TrimLeft(body, " \t")[len(f[0]):])
	if !ok || id == "" {
		return p.errf(n, "%s header: want a quoted node id after the port count", kind)
	}
	if strings.TrimSpace(after) != "" {
		// ibnetdiscover's older form puts "enhanced port 0 lid N" before the
		// comment; read it like the comment.
		comment = after + " " + comment
	}
	if prev, dup := p.byID[id]; dup {
		return p.errf(n, "node %q is defined twice (first on line %d)", id, p.nodes[prev].line)
	}
	nd := &pNode{id: id, ports: ports, line: n, seen: map[int]int{}}
	switch kind {
	case "Switch":
		nd.typ = fabric.Switch
	case "Rt":
		nd.typ = fabric.Router
	default:
		nd.typ = fabric.CA
	}
	if nd.typ != fabric.Switch {
		nd.portLID = make([]fabric.LID, ports+1)
		nd.portGUID = make([]fabric.GUID, ports+1)
	}
	if p.hasNextGUID {
		nd.guid, nd.hasGUID = p.nextGUID, true
		p.hasNextGUID = false
	} else if len(id) > 2 && (id[:2] == "S-" || id[:2] == "H-" || id[:2] == "R-") {
		if g, err := fabric.ParseGUID(id[2:]); err == nil {
			nd.guid, nd.hasGUID = g, true
		}
	}
	c := parseComment(comment)
	if c.err != "" {
		return p.errf(n, "%s header comment: %s", kind, c.err)
	}
	nd.desc = c.desc
	if nd.desc == "" {
		nd.desc = id
	}
	if nd.typ == fabric.Switch {
		nd.lid = c.selfLID
	}
	p.byID[id] = len(p.nodes)
	p.nodes = append(p.nodes, nd)
	return nil
}

type commentInfo struct {
	desc         string // first quoted string
	selfLID      fabric.LID
	remoteLID    fabric.LID
	width, speed string
	err          string
}

// parseComment reads the ibnetdiscover comment forms:
//
//	"desc" base port 0 lid 3 lmc 0     (switch header)
//	"remote desc" lid 1 4xSDR          (switch port line)
//	lid 4 lmc 0 "remote desc" lid 2 4xSDR   (CA port line)
//
// A "lid N" before the first quoted string is the node's own, after it the
// remote's.
func parseComment(s string) commentInfo {
	var c commentInfo
	afterQuote := false
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return c
		}
		if s[0] == '"' {
			v, rest, ok := quoted(s)
			if !ok {
				c.err = "unterminated quoted string"
				return c
			}
			if !afterQuote {
				c.desc = v
			}
			afterQuote = true
			s = rest
			continue
		}
		tok := s
		if i := strings.IndexAny(s, " \t"); i >= 0 {
			tok = s[:i]
		}
		s = s[len(tok):]
		switch {
		case tok == "lid":
			s = strings.TrimLeft(s, " \t")
			num := s
			if i := strings.IndexAny(s, " \t"); i >= 0 {
				num = s[:i]
			}
			v, err := strconv.ParseUint(num, 10, 16)
			if err != nil || v > fabric.MaxUnicastLID {
				c.err = fmt.Sprintf("lid %q: want 0..%d", num, fabric.MaxUnicastLID)
				return c
			}
			s = s[len(num):]
			if afterQuote {
				c.remoteLID = fabric.LID(v)
			} else {
				c.selfLID = fabric.LID(v)
			}
		default:
			if w, sp, ok := widthSpeed(tok); ok {
				c.width, c.speed = w, sp
			}
		}
	}
}

// widthSpeed splits "4xSDR" into "4X", "SDR".
func widthSpeed(tok string) (string, string, bool) {
	i := strings.IndexAny(tok, "xX")
	if i <= 0 || i == len(tok)-1 {
		return "", "", false
	}
	w := strings.ToUpper(tok[:i+1])
	sp := strings.ToUpper(tok[i+1:])
	if lanes(w) == 0 || !knownSpeed(sp) {
		return "", "", false
	}
	return w, sp, true
}

// bracketNum reads "[N]" at the start of s.
func bracketNum(s string) (int, string, bool) {
	if len(s) < 3 || s[0] != '[' {
		return 0, s, false
	}
	j := strings.IndexByte(s, ']')
	if j < 0 {
		return 0, s, false
	}
	v, err := strconv.Atoi(s[1:j])
	if err != nil {
		return 0, s, false
	}
	return v, s[j+1:], true
}

// parenGUID reads an optional "(hex)" at the start of s.
func parenGUID(s string) (fabric.GUID, string, bool, error) {
	if len(s) == 0 || s[0] != '(' {
		return 0, s, false, nil
	}
	j := strings.IndexByte(s, ')')
	if j < 0 {
		return 0, s, false, fmt.Errorf("unterminated (port GUID)")
	}
	g, err := fabric.ParseGUID(s[1:j])
	if err != nil {
		return 0, s, false, err
	}
	return g, s[j+1:], true, nil
}

// skipExt skips ibnetdiscover's "[ext N]" extended-port annotation.
func skipExt(s string) string {
	if strings.HasPrefix(s, "[ext ") {
		if j := strings.IndexByte(s, ']'); j >= 0 {
			return s[j+1:]
		}
	}
	return s
}

func (p *netParser) portLine(n int, s string) error {
	if len(p.nodes) == 0 {
		return p.errf(n, "port line before any Switch/Ca/Hca header")
	}
	ni := len(p.nodes) - 1
	nd := p.nodes[ni]
	body, comment := splitComment(s)
	port, rest, ok := bracketNum(body)
	if !ok {
		return p.errf(n, "port line: want [PORT] \"remote-id\"[REMOTE-PORT]")
	}
	if port < 1 || port > nd.ports {
		return p.errf(n, "port %d: node %q has ports 1..%d", port, nd.id, nd.ports)
	}
	if prev, dup := nd.seen[port]; dup {
		return p.errf(n, "port %d of node %q is listed twice (first on line %d)", port, nd.id, prev)
	}
	nd.seen[port] = n
	rest = skipExt(rest)
	g, rest, hasG, err := parenGUID(rest)
	if err != nil {
		return p.errf(n, "port %d: %v", port, err)
	}
	if hasG && nd.typ != fabric.Switch {
		nd.portGUID[port] = g
	}
	remote, rest, ok := quoted(rest)
	if !ok || remote == "" {
		return p.errf(n, "port %d: want a quoted remote node id", port)
	}
	rport, rest, ok := bracketNum(strings.TrimLeft(rest, " \t"))
	if !ok {
		return p.errf(n, "port %d: want [REMOTE-PORT] after %q", port, remote)
	}
	if rport < 1 || rport > 254 {
		return p.errf(n, "port %d: remote port %d: want 1..254", port, rport)
	}
	rest = skipExt(rest)
	rg, rest, _, err := parenGUID(rest)
	if err != nil {
		return p.errf(n, "port %d: remote %v", port, err)
	}
	pp := pPort{node: ni, port: port, remote: remote, rport: rport, rportGUID: rg, line: n}
	for _, f := range strings.Fields(rest) {
		if w, ok := strings.CutPrefix(f, "w="); ok {
			pp.width = strings.ToUpper(w) + "X"
			if lanes(pp.width) == 0 {
				return p.errf(n, "port %d: link width %q: want w=1, 4, 8 or 12", port, f)
			}
			continue
		}
		if strings.HasPrefix(f, "s=") || strings.HasPrefix(f, "e=") {
			continue // ibsim speed/extended-speed hints
		}
		return p.errf(n, "port %d: unexpected %q after the remote port", port, clip(f))
	}
	c := parseComment(comment)
	if c.err != "" {
		return p.errf(n, "port %d comment: %s", port, c.err)
	}
	if c.width != "" {
		pp.width, pp.speed = c.width, c.speed
	}
	pp.lid, pp.remoteLD = c.selfLID, c.remoteLID
	p.ports = append(p.ports, pp)
	return nil
}

func (p *netParser) build() (*fabric.Topology, error) {
	// GUIDs: given ones first, synthetic ones after, all unique.
	byGUID := map[fabric.GUID]int{}
	for i, nd := range p.nodes {
		if !nd.hasGUID {
			continue
		}
		if j, dup := byGUID[nd.guid]; dup {
			return nil, p.errf(nd.line, "node %q has GUID %s, as does %q (line %d)", nd.id, nd.guid, p.nodes[j].id, p.nodes[j].line)
		}
		byGUID[nd.guid] = i
	}
	next := fabric.GUID(0x0000f00000000001)
	for i, nd := range p.nodes {
		if nd.hasGUID {
			continue
		}
		for {
			if _, used := byGUID[next]; !used {
				break
			}
			next++
		}
		nd.guid = next
		byGUID[next] = i
	}
	type end struct {
		node, port int
	}
	peerOf := map[end]end{}
	lineOf := map[end]int{}
	linkIdx := map[end]int{}
	var links []fabric.Link
	for _, pp := range p.ports {
		ri, ok := p.byID[pp.remote]
		if !ok {
			return nil, p.errf(pp.line, "port %d links to unknown node %q", pp.port, pp.remote)
		}
		rn := p.nodes[ri]
		if pp.rport > rn.ports {
			return nil, p.errf(pp.line, "port %d links to port %d of %q, which has ports 1..%d", pp.port, pp.rport, pp.remote, rn.ports)
		}
		a, b := end{pp.node, pp.port}, end{ri, pp.rport}
		if a == b {
			return nil, p.errf(pp.line, "port %d links to itself", pp.port)
		}
		if pp.rportGUID != 0 && rn.typ != fabric.Switch && rn.portGUID[pp.rport] == 0 {
			rn.portGUID[pp.rport] = pp.rportGUID
		}
		if pp.lid != 0 {
			nd := p.nodes[pp.node]
			if nd.typ != fabric.Switch {
				nd.portLID[pp.port] = pp.lid
			}
		}
		if pp.remoteLD != 0 {
			if rn.typ == fabric.Switch {
				if rn.lid == 0 {
					rn.lid = pp.remoteLD
				}
			} else if rn.portLID[pp.rport] == 0 {
				rn.portLID[pp.rport] = pp.remoteLD
			}
		}
		if pa, ok := peerOf[a]; ok {
			if pa != b {
				return nil, p.errf(pp.line, "port %d of %q links to %q[%d], but line %d links it to %q[%d]",
					pp.port, p.nodes[pp.node].id, pp.remote, pp.rport, lineOf[a], p.nodes[pa.node].id, pa.port)
			}
			// The other end's line already made this link; fill gaps.
			l := &links[linkIdx[a]]
			if pp.width != "" && l.Width == "" {
				l.Width, l.Speed = pp.width, pp.speed
			}
			continue
		}
		if pb, ok := peerOf[b]; ok {
			return nil, p.errf(pp.line, "port %d of %q links to %q[%d], which line %d links to %q[%d]",
				pp.port, p.nodes[pp.node].id, pp.remote, pp.rport, lineOf[b], p.nodes[pb.node].id, pb.port)
		}
		peerOf[a], peerOf[b] = b, a
		lineOf[a], lineOf[b] = pp.line, pp.line
		linkIdx[a], linkIdx[b] = len(links), len(links)
		links = append(links, fabric.NewLink(
			fabric.PortRef{GUID: p.nodes[pp.node].guid, Port: pp.port},
			fabric.PortRef{GUID: rn.guid, Port: pp.rport},
			pp.width, pp.speed, "Active"))
	}
	for i := range links {
		if links[i].Width == "" {
			links[i].Width = "4X"
		}
		if links[i].Speed == "" {
			links[i].Speed = "SDR"
		}
	}
	if err := p.assignLIDs(func(ni, port int) bool { _, ok := peerOf[end{ni, port}]; return ok }); err != nil {
		return nil, err
	}
	nodes := make([]fabric.Node, len(p.nodes))
	for i, nd := range p.nodes {
		n := fabric.Node{GUID: nd.guid, Type: nd.typ, Description: nd.desc, Ports: nd.ports, LID: nd.lid}
		if nd.typ != fabric.Switch {
			n.LID = 0
			n.PortLIDs = nd.portLID
			n.PortGUIDs = nd.portGUID
			for port := 1; port <= nd.ports; port++ {
				if n.PortGUIDs[port] == 0 {
					n.PortGUIDs[port] = nd.guid + fabric.GUID(port)
				}
				if n.LID == 0 && n.PortLIDs[port] != 0 {
					n.LID = n.PortLIDs[port]
				}
			}
		}
		nodes[i] = n
	}
	t, err := fabric.NewTopology(nodes, links)
	if err != nil {
		return nil, &ParseError{File: p.file, Msg: err.Error()}
	}
	return t, nil
}

// assignLIDs checks the LIDs the file gave for duplicates and assigns the
// missing ones (linked CA ports, then switches, in file order).
func (p *netParser) assignLIDs(linked func(node, port int) bool) error {
	used := map[fabric.LID]int{} // -> node index
	claim := func(l fabric.LID, ni int) error {
		if j, dup := used[l]; dup && j != ni {
			return p.errf(p.nodes[ni].line, "LID %d of %q is also the LID of %q (line %d)", l, p.nodes[ni].id, p.nodes[j].id, p.nodes[j].line)
		}
		used[l] = ni
		return nil
	}
	for i, nd := range p.nodes {
		if nd.typ == fabric.Switch {
			if nd.lid != 0 {
				if err := claim(nd.lid, i); err != nil {
					return err
				}
			}
			continue
		}
		for _, l := range nd.portLID {
			if l != 0 {
				if err := claim(l, i); err != nil {
					return err
				}
			}
		}
	}
	next := fabric.LID(1)
	alloc := func(ni int) (fabric.LID, error) {
		for ; next <= fabric.MaxUnicastLID; next++ {
			if _, taken := used[next]; !taken {
				used[next] = ni
				return next, nil
			}
		}
		return 0, &ParseError{File: p.file, Msg: fmt.Sprintf("more endpoints than the %d unicast LIDs of a subnet", fabric.MaxUnicastLID)}
	}
	var err error
	for i, nd := range p.nodes {
		if nd.typ == fabric.Switch {
			continue
		}
		for port := 1; port <= nd.ports; port++ {
			if nd.portLID[port] == 0 && linked(i, port) {
				if nd.portLID[port], err = alloc(i); err != nil {
					return err
				}
			}
		}
	}
	for i, nd := range p.nodes {
		if nd.typ == fabric.Switch && nd.lid == 0 {
			if nd.lid, err = alloc(i); err != nil {
				return err
			}
		}
	}
	return nil
}
