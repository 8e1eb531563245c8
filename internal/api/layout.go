package api

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// Layout is the network map's drawing of one topology version: the fat
// tree by levels (hosts at level 0, then breadth-first up), each switch
// level ordered by barycentric sweeps to reduce crossings, hosts in a small
// grid under their leaf. It is columnar so that Stampede (7,305 nodes,
// 16,893 links) fits in a few hundred kilobytes: node i is GUID[i], X[i],
// Y[i]…; link j joins nodes Edges[2j] and Edges[2j+1] at ports Ports[2j]
// and Ports[2j+1]. Node i and link j are the topology's Nodes[i] and
// Links[j], which is also the order of the live stream's arrays.
type Layout struct {
	Version int64     `json:"version"`
	Levels  int       `json:"levels"` // number of levels, hosts included
	GUID    []string  `json:"guid"`
	Name    []string  `json:"name"`
	Type    []uint8   `json:"type"` // 1 switch, 2 CA, 3 router
	LID     []uint16  `json:"lid"`
	Level   []uint8   `json:"level"`
	X       []float32 `json:"x"`
	Y       []float32 `json:"y"`
	// Group is, for a host, the index of the leaf switch it hangs from
	// (the UI collapses a leaf's hosts into one mark until zoomed), else -1.
	Group []int32 `json:"group"`
	Edges []int32 `json:"edges"`
	Ports []uint8 `json:"ports"`
	// PortNames are the ports' names where the fabric gives them
	// (Ethernet: "swp1"), PortNames[2j] and [2j+1] for link j's ends, ""
	// where a port has only its number; absent when no port has a name.
	PortNames []string  `json:"port_names,omitempty"`
	Capacity  []float32 `json:"capacity"` // bytes/s one direction, per link
	// Fabrics names the fabrics of a view of several (docs/postgres.md)
	// and Fabric[i] is node i's index in it; both absent with one fabric.
	Fabrics []string `json:"fabrics,omitempty"`
	Fabric  []uint16 `json:"fabric,omitempty"`
	// Millis is how long the layout took to compute.
	Millis float64 `json:"compute_ms"`
}

// layoutCache keeps the layouts of the last few topology versions, each
// computed once, JSON- and gzip-encoded once.
type layoutCache struct {
	mu      sync.Mutex
	entries map[int64]*layoutEntry
	order   []int64
}

type layoutEntry struct {
	once   sync.Once
	layout *Layout
	raw    []byte // JSON
	gz     []byte // gzip of raw
	err    error
}

const layoutCacheSize = 4

func (c *layoutCache) get(version int64, topo *fabric.Topology) (*layoutEntry, error) {
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[int64]*layoutEntry{}
	}
	e, ok := c.entries[version]
	if !ok {
		e = &layoutEntry{}
		c.entries[version] = e
		c.order = append(c.order, version)
		if len(c.order) > layoutCacheSize {
			delete(c.entries, c.order[0])
			c.order = c.order[1:]
		}
	}
	c.mu.Unlock()
	e.once.Do(func() {
		start := time.Now()
		l := ComputeLayout(topo)
		l.Version = version
		l.Millis = float64(time.Since(start).Microseconds()) / 1000
		e.layout = l
		if e.raw, e.err = json.Marshal(l); e.err != nil {
			e.err = fmt.Errorf("layout of version %d: encoding: %w", version, e.err)
			return
		}
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
		_, _ = zw.Write(e.raw)
		if err := zw.Close(); err != nil {
			e.err = fmt.Errorf("layout of version %d: compressing: %w", version, err)
			return
		}
		e.gz = b.Bytes()
	})
	return e, e.err
}

// layout serves GET /api/v1/fabric/layout?at=. The answer for one version
// never changes, so it carries an ETag and may be cached by the browser.
func (s *Server) layout(w http.ResponseWriter, r *http.Request) {
	v, err := s.viewAt(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	e, err := s.layouts.get(v.version, v.topo)
	if err != nil {
		s.fail(w, err)
		return
	}
	etag := `"layout-` + strconv.FormatInt(v.version, 10) + `-` + strconv.Itoa(len(e.raw)) + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("Vary", "Accept-Encoding")
	h.Set("Content-Type", "application/json")
	h.Set("Server-Timing", fmt.Sprintf("layout;dur=%.3f", e.layout.Millis))
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := e.raw
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		h.Set("Content-Encoding", "gzip")
		body = e.gz
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// ComputeLayout lays out a topology as a layered drawing in a
// 1000-unit-wide box, y growing upwards from the hosts.
func ComputeLayout(t *fabric.Topology) *Layout {
	n := len(t.Nodes)
	l := &Layout{
		GUID: make([]string, n), Name: make([]string, n), Type: make([]uint8, n), LID: make([]uint16, n),
		Level: make([]uint8, n), X: make([]float32, n), Y: make([]float32, n), Group: make([]int32, n),
		Edges: make([]int32, 2*len(t.Links)), Ports: make([]uint8, 2*len(t.Links)), Capacity: make([]float32, len(t.Links)),
	}
	index := make(map[fabric.GUID]int32, n)
	for i := range t.Nodes {
		nd := &t.Nodes[i]
		index[nd.GUID] = int32(i)
		l.GUID[i] = nd.GUID.String()
		l.Name[i] = nd.Name()
		l.Type[i] = uint8(nd.Type)
		l.LID[i] = uint16(nd.LID)
		l.Group[i] = -1
	}
	if names := t.Fabrics(); len(names) > 0 {
		l.Fabrics, l.Fabric = names, make([]uint16, n)
		for i := range t.Nodes {
			l.Fabric[i] = uint16(slices.Index(names, t.Nodes[i].Fabric))
		}
	}
	adj := make([][]int32, n)
	for j, lk := range t.Links {
		a, b := index[lk.A.GUID], index[lk.B.GUID]
		l.Edges[2*j], l.Edges[2*j+1] = a, b
		l.Ports[2*j], l.Ports[2*j+1] = uint8(lk.A.Port), uint8(lk.B.Port)
		if lk.AName != "" || lk.BName != "" {
			if l.PortNames == nil {
				l.PortNames = make([]string, 2*len(t.Links))
			}
			l.PortNames[2*j], l.PortNames[2*j+1] = lk.AName, lk.BName
		}
		l.Capacity[j] = float32(lk.Capacity())
		if a != b {
			adj[a] = append(adj[a], b)
			adj[b] = append(adj[b], a)
		}
	}

	// Levels: breadth-first from every host; nodes no host reaches (a
	// switch-only island) start again from level 1.
	level := make([]int, n)
	for i := range level {
		level[i] = -1
	}
	var queue []int32
	for i := range t.Nodes {
		if t.Nodes[i].Type != fabric.Switch {
			level[i] = 0
			queue = append(queue, int32(i))
		}
	}
	bfs := func() {
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for _, v := range adj[u] {
				if level[v] < 0 {
					level[v] = level[u] + 1
					queue = append(queue, v)
				}
			}
		}
	}
	bfs()
	for i := range level {
		if level[i] < 0 {
			level[i] = 1
			queue = append(queue, int32(i))
			bfs()
		}
	}
	maxLevel := 0
	for i, lv := range level {
		if lv > 255 {
			lv = 255
			level[i] = lv
		}
		l.Level[i] = uint8(lv)
		if lv > maxLevel {
			maxLevel = lv
		}
	}
	l.Levels = maxLevel + 1

	// Hosts hang from their first switch neighbour on level 1.
	groups := make(map[int32][]int32)
	var orphans []int32
	for i := range t.Nodes {
		if level[i] != 0 {
			continue
		}
		parent := int32(-1)
		for _, v := range adj[i] {
			if level[v] == 1 && (parent < 0 || v < parent) {
				parent = v
			}
		}
		l.Group[i] = parent
		if parent < 0 {
			orphans = append(orphans, int32(i))
		} else {
			groups[parent] = append(groups[parent], int32(i))
		}
	}

	// Switch levels 1..max, first in natural name order, then barycentric
	// sweeps up and down: each node moves to the mean position of its
	// neighbours on the adjacent level.
	rows := make([][]int32, l.Levels)
	for i := range t.Nodes {
		if level[i] > 0 {
			rows[level[i]] = append(rows[level[i]], int32(i))
		}
	}
	for _, row := range rows[1:] {
		sort.SliceStable(row, func(a, b int) bool { return naturalLess(l.Name[row[a]], l.Name[row[b]]) })
	}
	pos := make([]float64, n) // position within its row, 0..1
	place := func(row []int32) {
		for k, v := range row {
			pos[v] = (float64(k) + 0.5) / float64(len(row))
		}
	}
	for _, row := range rows[1:] {
		place(row)
	}
	bary := make([]float64, n)
	order := func(lv, ref int) {
		row := rows[lv]
		for _, v := range row {
			sum, cnt := 0.0, 0
			for _, u := range adj[v] {
				if level[u] == ref {
					sum += pos[u]
					cnt++
				}
			}
			if cnt > 0 {
				bary[v] = sum / float64(cnt)
			} else {
				bary[v] = pos[v]
			}
		}
		sort.SliceStable(row, func(a, b int) bool { return bary[row[a]] < bary[row[b]] })
		place(row)
	}
	for iter := 0; iter < 4; iter++ {
		for lv := 2; lv < l.Levels; lv++ {
			order(lv, lv-1)
		}
		for lv := l.Levels - 2; lv >= 1; lv-- {
			order(lv, lv+1)
		}
	}

	// Coordinates: levels evenly spread over the width; hosts in a grid of
	// up to 4 columns under their leaf.
	const width = 1000.0
	leaves := len(rows[min(1, l.Levels-1)])
	if leaves == 0 {
		leaves = 1
	}
	slot := width / float64(leaves)
	cols := 4
	cell := slot / float64(cols+1)
	maxRows := 1
	for _, g := range groups {
		maxRows = max(maxRows, (len(g)+cols-1)/cols)
	}
	hostBand := float64(maxRows) * cell
	// Switch levels are far apart so their links spread out; hosts sit
	// close under their leaf.
	gap := max(width*0.12, hostBand*1.5)
	leafY := hostBand + max(gap*0.3, 2*cell)
	for lv := 1; lv < l.Levels; lv++ {
		for _, v := range rows[lv] {
			l.X[v] = float32(pos[v] * width)
			l.Y[v] = float32(leafY + gap*float64(lv-1))
		}
	}
	for leaf, hosts := range groups {
		sort.SliceStable(hosts, func(a, b int) bool { return naturalLess(l.Name[hosts[a]], l.Name[hosts[b]]) })
		c := min(cols, len(hosts))
		for k, h := range hosts {
			col, row := k%cols, k/cols
			l.X[h] = float32(float64(l.X[leaf]) + (float64(col)-float64(c-1)/2)*cell)
			l.Y[h] = float32(hostBand - float64(row)*cell)
		}
	}
	for k, h := range orphans {
		l.X[h] = float32((float64(k) + 0.5) / float64(len(orphans)) * width)
		l.Y[h] = float32(hostBand)
	}
	return l
}

// naturalLess orders names with embedded numbers numerically: leaf2 <
// leaf10.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := isDigit(a[0]), isDigit(b[0])
		if da && db {
			i, j := 0, 0
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na, nb := strings.TrimLeft(a[:i], "0"), strings.TrimLeft(b[:j], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[i:], b[j:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
