// Package recordgen generates, from the annotations of agent.proto's
// Process message, the code that carries a rank's per-process record from
// the wire to the page: the daemon's Go types and decoding, the tracker's
// copies, deltas and checks, the store's row codec, the load generator's
// fields and the web's TypeScript types (docs/architecture.md, "How to add
// a field").
package recordgen

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/emicklei/proto"
)

// Field is one annotated field of the Process message.
type Field struct {
	Name  string // proto name: "vm_hwm"
	Num   int    // field number
	Type  string // proto type: double, uint64, uint32, int32, string, Traffic
	Kind  string // ident, counter, gauge or skip
	Go    string // the store's Go name: "VmHWM"
	PB    string // protoc-gen-go's name: "VmHwm"
	JSON  string // the API's name: "vm_hwm"
	Label string // what the page calls it
	Unit  string // bytes, seconds, ...
	Load  string // the load generator's value, a Go expression of elapsed (seconds)
	Check string // what a decrease is reported as ("" with nocheck)

	Sample   bool // a delta (counter) or end value (gauge) in every process sample
	Clamp    bool // a negative delta is 0 (floats)
	Tolerant bool // compared with the tracker's time tolerance (timeBack)
	Intern   bool // a string the tracker interns
	Doc      string
}

// Record is the annotated Process message.
type Record struct {
	// Frozen is the highest field number whose storage in process rows,
	// samples and rollups was laid out before the generator: those keep
	// their positions; later fields are stored in each row's tail.
	Frozen  int
	Fields  []Field
	Message string
}

// Usage is the counters and gauges, in field order.
func (r *Record) Usage() []Field {
	return slices.DeleteFunc(slices.Clone(r.Fields), func(f Field) bool { return f.Kind != "counter" && f.Kind != "gauge" })
}

var scalarTypes = map[string]bool{"double": true, "uint64": true, "uint32": true, "int32": true, "int64": true, "string": true, "Traffic": true}

// Parse reads a proto file and the annotations of its Process message.
// An annotation is a comment line, or the end of a field's trailing
// comment, starting with @KIND: @ident, @counter, @gauge or @skip,
// then key=value or key="quoted value" settings and bare flags.
func Parse(r io.Reader) (*Record, error) {
	def, err := proto.NewParser(r).Parse()
	if err != nil {
		return nil, err
	}
	rec := &Record{Message: "Process"}
	var found bool
	var perr error
	proto.Walk(def, proto.WithMessage(func(m *proto.Message) {
		if m.Name != rec.Message || perr != nil {
			return
		}
		found = true
		a, _, err := annotation(m.Comment, map[string]bool{"record": true})
		if err != nil || a == nil || a.kind != "record" {
			perr = fmt.Errorf("message %s: want a @record annotation (%v)", m.Name, err)
			return
		}
		if rec.Frozen, err = strconv.Atoi(a.keys["frozen"]); err != nil {
			perr = fmt.Errorf("message %s: @record frozen=N: %v", m.Name, err)
			return
		}
		for _, e := range m.Elements {
			nf, ok := e.(*proto.NormalField)
			if !ok {
				continue
			}
			f, err := field(nf)
			if err != nil {
				perr = fmt.Errorf("%s.%s (field %d): %w", m.Name, nf.Name, nf.Sequence, err)
				return
			}
			if f.Kind == "ident" && f.Num > rec.Frozen {
				perr = fmt.Errorf("%s.%s (field %d): an identity field after frozen=%d is not generated: the store keeps identities by hand", m.Name, f.Name, f.Num, rec.Frozen)
				return
			}
			rec.Fields = append(rec.Fields, f)
		}
	}))
	if perr != nil {
		return nil, perr
	}
	if !found {
		return nil, fmt.Errorf("no message %s", rec.Message)
	}
	return rec, nil
}

type note struct {
	kind  string
	keys  map[string]string
	flags map[string]bool
}

var fieldKinds = map[string]bool{"ident": true, "counter": true, "gauge": true, "skip": true}

// annotation finds the @KIND line of a comment (KIND one of kinds); doc is
// the comment's other text.
func annotation(c *proto.Comment, kinds map[string]bool) (a *note, doc string, err error) {
	if c == nil {
		return nil, "", nil
	}
	var docs []string
	for _, line := range c.Lines {
		line = strings.TrimSpace(line)
		at := strings.Index(line, "@")
		if at >= 0 && !kinds[strings.SplitN(line[at+1:]+" ", " ", 2)[0]] {
			at = -1
		}
		if at < 0 || (at > 0 && line[at-1] != ' ') {
			docs = append(docs, line)
			continue
		}
		if a != nil {
			return nil, "", fmt.Errorf("two annotations")
		}
		if d := strings.TrimSpace(line[:at]); d != "" {
			docs = append(docs, d)
		}
		if a, err = parseNote(line[at+1:]); err != nil {
			return nil, "", err
		}
	}
	return a, strings.Join(docs, " "), nil
}

func parseNote(s string) (*note, error) {
	n := &note{keys: map[string]string{}, flags: map[string]bool{}}
	for i := 0; ; {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i == len(s) {
			break
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '=' {
			j++
		}
		word := s[i:j]
		if n.kind == "" {
			n.kind, i = word, j
			continue
		}
		if j == len(s) || s[j] == ' ' {
			n.flags[word], i = true, j
			continue
		}
		j++ // '='
		if j < len(s) && s[j] == '"' {
			v, err := strconv.QuotedPrefix(s[j:])
			if err != nil {
				return nil, fmt.Errorf("%s: %v", word, err)
			}
			n.keys[word], _ = strconv.Unquote(v)
			i = j + len(v)
			continue
		}
		k := j
		for k < len(s) && s[k] != ' ' {
			k++
		}
		n.keys[word], i = s[j:k], k
	}
	return n, nil
}

var knownKeys = map[string]bool{"go": true, "json": true, "label": true, "unit": true, "load": true, "check": true}
var knownFlags = map[string]bool{"sample": true, "clamp": true, "tolerant": true, "intern": true, "nocheck": true}

func field(nf *proto.NormalField) (Field, error) {
	a, doc, err := annotation(nf.Comment, fieldKinds)
	if err != nil {
		return Field{}, err
	}
	b, doc2, err := annotation(nf.InlineComment, fieldKinds)
	if err != nil {
		return Field{}, err
	}
	if a != nil && b != nil {
		return Field{}, fmt.Errorf("two annotations")
	}
	if a == nil {
		a = b
	}
	if a == nil {
		return Field{}, fmt.Errorf("no annotation (@ident, @counter, @gauge or @skip)")
	}
	f := Field{Name: nf.Name, Num: nf.Sequence, Type: nf.Type, Kind: a.kind, PB: goCamel(nf.Name), JSON: nf.Name,
		Doc: strings.TrimSpace(strings.Join([]string{doc, doc2}, " "))}
	f.Go = f.PB
	switch f.Kind {
	case "skip":
		return f, nil
	case "ident", "counter", "gauge":
	default:
		return f, fmt.Errorf("unknown annotation @%s", f.Kind)
	}
	if nf.Repeated || !scalarTypes[f.Type] {
		return f, fmt.Errorf("type %s: only scalars and Traffic are generated", f.Type)
	}
	if f.Kind != "ident" && (f.Type == "string" || f.Type == "uint32" || f.Type == "int32") {
		return f, fmt.Errorf("a %s is a double, uint64, int64 or Traffic, not %s", f.Kind, f.Type)
	}
	for k, v := range a.keys {
		if !knownKeys[k] {
			return f, fmt.Errorf("unknown setting %s", k)
		}
		switch k {
		case "go":
			f.Go = v
		case "json":
			f.JSON = v
		case "label":
			f.Label = v
		case "unit":
			f.Unit = v
		case "load":
			f.Load = v
		case "check":
			f.Check = v
		}
	}
	for k := range a.flags {
		if !knownFlags[k] {
			return f, fmt.Errorf("unknown flag %s", k)
		}
	}
	f.Sample, f.Clamp, f.Tolerant, f.Intern = a.flags["sample"], a.flags["clamp"], a.flags["tolerant"], a.flags["intern"]
	if f.Kind == "counter" && f.Check == "" && !a.flags["nocheck"] {
		f.Check = f.Name
	}
	if f.Kind != "counter" && (f.Check != "" || f.Clamp || f.Tolerant) {
		return f, fmt.Errorf("check, clamp and tolerant are for counters")
	}
	if f.Kind == "gauge" && f.Type == "Traffic" {
		return f, fmt.Errorf("a gauge is a number, not Traffic")
	}
	if (f.Clamp || f.Tolerant) && f.Type != "double" {
		return f, fmt.Errorf("clamp and tolerant are for doubles")
	}
	if f.Intern && f.Type != "string" {
		return f, fmt.Errorf("intern is for strings")
	}
	if f.Label == "" {
		f.Label = f.Doc
	}
	return f, nil
}

// goCamel is protoc-gen-go's name of a field: "vm_hwm" -> "VmHwm".
func goCamel(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
		}
		up = false
		b.WriteRune(r)
	}
	return b.String()
}
