// Package alert evaluates alert rules over the fabric after each sweep
// (error counters, flapping and degraded links, congestion, utilization,
// unreachable ports, fabric changes, a daemon falling behind), names the
// running jobs whose routes cross what an alert is about, and delivers
// alerts to Prometheus Alertmanager and JSON webhooks.
package alert

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/netloom/netloom/internal/fabric"
)

// Kind is what a rule watches.
type Kind string

// Rule kinds (docs/alerts.md).
const (
	// CounterIncrease: a port counter rose by at least Threshold within Window.
	CounterIncrease Kind = "counter_increase"
	// CounterTotal: a port counter's reading is at least Threshold.
	CounterTotal Kind = "counter_total"
	// LinkFlap: at least Threshold link down/up events of one link within Window.
	LinkFlap Kind = "link_flap"
	// LinkDegraded: a link is up at a lower width or speed than expected.
	LinkDegraded Kind = "link_degraded"
	// Congestion: a port's XmitWait was at least Threshold (a fraction) of
	// the sweep interval, for Window.
	Congestion Kind = "congestion"
	// Utilization: a link direction carried at least Threshold (a fraction)
	// of its capacity, for Window.
	Utilization Kind = "utilization"
	// PortUnreachable: a port's counters could not be read, for Window.
	PortUnreachable Kind = "port_unreachable"
	// FabricChanged: a node or link came or went, a LID or the routes
	// changed; the alert stays firing for Window after the change.
	FabricChanged Kind = "fabric_changed"
	// DaemonBehind: the daemon dropped data or its queues filled, for Window.
	DaemonBehind Kind = "daemon_behind"
	// ErrorTrend: a link direction's symbol error rate rises and its bit
	// error rate is expected to reach Threshold (a BER, e.g. 1e-12) within
	// Window, or has reached it while rising (internal/health); the rise
	// is fitted over the last Window of sweeps.
	ErrorTrend Kind = "error_trend"
)

var kinds = []Kind{CounterIncrease, CounterTotal, LinkFlap, LinkDegraded, Congestion, Utilization, PortUnreachable, FabricChanged, DaemonBehind, ErrorTrend}

// Severities, as Alertmanager routes usually match them.
var severities = []string{"info", "warning", "critical"}

// Rule is one alert rule.
type Rule struct {
	Name     string           `json:"name"`
	Kind     Kind             `json:"kind"`
	Counters []fabric.Counter `json:"-"`
	// Threshold: a count (counter_increase, counter_total, link_flap), a
	// fraction (congestion, utilization) or a bit error rate
	// (error_trend); unused by the other kinds.
	Threshold float64 `json:"threshold"`
	// Window: the counting window (counter_increase, link_flap), how long
	// a condition must hold before firing (link_degraded, congestion,
	// utilization, port_unreachable, daemon_behind), or how long a fabric
	// change keeps firing (fabric_changed), or both the history fitted
	// and how far ahead a crossing is alerted on (error_trend).
	Window   time.Duration `json:"window_seconds"`
	Severity string        `json:"severity"`
	Disabled bool          `json:"disabled,omitempty"`
	// Width and Speed are the link_degraded rule's expected link, e.g. 4X
	// and EDR; empty: the best of each end's other active links.
	Width string `json:"width,omitempty"`
	Speed string `json:"speed,omitempty"`
	// Line is the config line the rule was set on (0: a default).
	Line int `json:"line,omitempty"`
}

// CounterNames lists the rule's counters by name.
func (r *Rule) CounterNames() []string {
	out := make([]string, len(r.Counters))
	for i, c := range r.Counters {
		out[i] = fabric.CounterNames[c]
	}
	return out
}

func counters(names ...string) []fabric.Counter {
	out := make([]fabric.Counter, len(names))
	for i, n := range names {
		c, ok := fabric.CounterByName(n)
		if !ok {
			panic("alert: unknown counter " + n)
		}
		out[i] = c
	}
	return out
}

// DefaultRules are the rules in force unless the config changes them
// (those with Disabled set are known by name but off). Every default on
// error counters fires on their increase while the daemon watches, never
// on a reading: a reading counts since the counters were last cleared.
func DefaultRules() []Rule {
	return []Rule{
		{Name: "port_errors", Kind: CounterIncrease, Threshold: 10, Window: 5 * time.Minute, Severity: "warning",
			Counters: counters("symbol_errors", "link_integrity_errors", "rcv_errors", "rcv_remote_phys_errors", "excessive_buffer_overrun_errors")},
		{Name: "link_recovers", Kind: CounterIncrease, Threshold: 1, Window: 5 * time.Minute, Severity: "warning",
			Counters: counters("link_recovers", "link_downed")},
		{Name: "port_discards", Kind: CounterIncrease, Threshold: 100, Window: 5 * time.Minute, Severity: "warning",
			Counters: counters("xmit_discards", "rcv_switch_relay_errors", "xmit_constraint_errors", "rcv_constraint_errors", "vl15_dropped")},
		// Errors that come too slowly for port_errors' 5 minutes, counted
		// from when the daemon started watching: a link going bad over hours.
		{Name: "port_errors_slow", Kind: CounterIncrease, Threshold: 100, Window: 24 * time.Hour, Severity: "info",
			Counters: counters("symbol_errors", "link_integrity_errors", "rcv_errors", "rcv_remote_phys_errors", "excessive_buffer_overrun_errors")},
		// Off by default: a counter's reading is what it counted since it
		// was last cleared, months ago on a fabric nobody clears, so this
		// rule fires on day one on ports that are fine now. A site that
		// clears its counters can turn it on (docs/alerts.md).
		{Name: "port_errors_total", Kind: CounterTotal, Threshold: 10000, Severity: "info", Disabled: true,
			Counters: counters("symbol_errors", "link_recovers", "link_downed", "rcv_errors", "link_integrity_errors", "excessive_buffer_overrun_errors", "xmit_discards")},
		{Name: "link_flapping", Kind: LinkFlap, Threshold: 3, Window: 15 * time.Minute, Severity: "critical"},
		{Name: "link_degraded", Kind: LinkDegraded, Severity: "warning"},
		{Name: "port_congestion", Kind: Congestion, Threshold: 0.1, Window: time.Minute, Severity: "warning"},
		{Name: "link_utilization", Kind: Utilization, Threshold: 0.9, Window: 5 * time.Minute, Severity: "info"},
		{Name: "port_unreachable", Kind: PortUnreachable, Window: time.Minute, Severity: "warning"},
		{Name: "fabric_changed", Kind: FabricChanged, Window: 15 * time.Minute, Severity: "info"},
		{Name: "daemon_behind", Kind: DaemonBehind, Window: time.Minute, Severity: "warning"},
		// A link whose errors rise: fired on the prediction (the fitted
		// BER reaches the specification's 1e-12 within 6 hours), never on
		// a total (docs/health.md).
		{Name: "link_errors_rising", Kind: ErrorTrend, Threshold: 1e-12, Window: 6 * time.Hour, Severity: "warning"},
	}
}

// Config is the `alerting:` section of the daemon's config file.
type Config struct {
	// Alertmanagers are Alertmanager base URLs (the v2 API is used).
	Alertmanagers []string `json:"alertmanagers"`
	// Webhooks receive every change as generic JSON.
	Webhooks []string `json:"webhooks"`
	// ResendInterval: firing alerts are sent again this often (default 1m),
	// so Alertmanager keeps them while the daemon lives.
	ResendInterval time.Duration `json:"resend_interval_seconds"`
	// ExternalURL is how users reach the daemon's UI, for alerts' links
	// (default: none; links are relative).
	ExternalURL string `json:"external_url"`
	// Keep is how long resolved alerts stay listed (default 24h).
	Keep time.Duration `json:"keep_seconds"`
	// Rules are the default rules with the config's changes applied.
	Rules []Rule `json:"rules"`
	set   bool   // Rules were merged from a config (UnmarshalYAML)
}

// Defaults.
const (
	DefaultResendInterval = time.Minute
	DefaultKeep           = 24 * time.Hour
)

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.ResendInterval == 0 {
		c.ResendInterval = DefaultResendInterval
	}
	if c.Keep == 0 {
		c.Keep = DefaultKeep
	}
	if !c.set && c.Rules == nil {
		c.Rules = DefaultRules()
	}
	return c
}

// Enabled lists the rules that are not disabled.
func (c Config) Enabled() []Rule {
	var out []Rule
	for _, r := range c.Rules {
		if !r.Disabled {
			out = append(out, r)
		}
	}
	return out
}

// lineError names the config line of a bad value.
func lineError(n *yaml.Node, format string, a ...any) error {
	return fmt.Errorf("line %d: alerting: %s", n.Line, fmt.Sprintf(format, a...))
}

// fields walks a mapping node's keys, refusing unknown ones.
func fields(n *yaml.Node, where string, known []string, f func(key string, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return lineError(n, "%s: want a mapping", where)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(known, k.Value) {
			return lineError(k, "%s: unknown field %q (known: %s)", where, k.Value, strings.Join(known, ", "))
		}
		if seen[k.Value] {
			return lineError(k, "%s: %s given twice", where, k.Value)
		}
		seen[k.Value] = true
		if err := f(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

func decodeScalar(v *yaml.Node, where string, out any) error {
	if v.Kind != yaml.ScalarNode {
		return lineError(v, "%s: want a single value", where)
	}
	if err := v.Decode(out); err != nil {
		return lineError(v, "%s: %q: %v", where, v.Value, strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n  "))
	}
	return nil
}

func decodeDuration(v *yaml.Node, where string, out *time.Duration) error {
	var s string
	if err := decodeScalar(v, where, &s); err != nil {
		return err
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return lineError(v, "%s: %q: want a duration such as 30s or 5m", where, s)
	}
	*out = d
	return nil
}

func decodeURLs(v *yaml.Node, where string) ([]string, error) {
	var list []string
	if v.Kind != yaml.SequenceNode {
		return nil, lineError(v, "%s: want a list of URLs", where)
	}
	for i, e := range v.Content {
		var s string
		w := fmt.Sprintf("%s[%d]", where, i)
		if err := decodeScalar(e, w, &s); err != nil {
			return nil, err
		}
		if err := checkURL(s); err != nil {
			return nil, lineError(e, "%s: %v", w, err)
		}
		list = append(list, strings.TrimRight(s, "/"))
	}
	return list, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: want an http:// or https:// URL", s)
	}
	return nil
}

// UnmarshalYAML reads the alerting section; every bad value is an error
// naming its line.
func (c *Config) UnmarshalYAML(n *yaml.Node) error {
	*c = Config{}
	err := fields(n, "alerting", []string{"alertmanagers", "webhooks", "resend_interval", "external_url", "keep", "rules"},
		func(k string, v *yaml.Node) error {
			var err error
			switch k {
			case "alertmanagers":
				c.Alertmanagers, err = decodeURLs(v, k)
			case "webhooks":
				c.Webhooks, err = decodeURLs(v, k)
			case "resend_interval":
				if err = decodeDuration(v, k, &c.ResendInterval); err == nil && c.ResendInterval < time.Second {
					err = lineError(v, "resend_interval %s: must be at least 1s", c.ResendInterval)
				}
			case "keep":
				err = decodeDuration(v, k, &c.Keep)
			case "external_url":
				if err = decodeScalar(v, k, &c.ExternalURL); err == nil {
					if e := checkURL(c.ExternalURL); e != nil {
						err = lineError(v, "external_url: %v", e)
					}
					c.ExternalURL = strings.TrimRight(c.ExternalURL, "/")
				}
			case "rules":
				c.Rules, err = decodeRules(v)
				c.set = true
			}
			return err
		})
	return err
}

// decodeRules applies the config's rules to the defaults: a rule named as
// a default changes it; any other name is a new rule and needs a kind.
func decodeRules(n *yaml.Node) ([]Rule, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, lineError(n, "rules: want a list of rules")
	}
	rules := DefaultRules()
	seen := map[string]int{}
	for i, rn := range n.Content {
		where := fmt.Sprintf("rules[%d]", i)
		var name string
		if rn.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(rn.Content); j += 2 {
				if rn.Content[j].Value == "name" {
					if err := decodeScalar(rn.Content[j+1], where+".name", &name); err != nil {
						return nil, err
					}
				}
			}
		}
		if name == "" {
			return nil, lineError(rn, "%s: every rule needs a name", where)
		}
		if !validName(name) {
			return nil, lineError(rn, "%s: name %q: use letters, digits and _ only", where, name)
		}
		if l, dup := seen[name]; dup {
			return nil, lineError(rn, "%s: rule %q is already set on line %d", where, name, l)
		}
		seen[name] = rn.Line
		where = fmt.Sprintf("rule %q", name)
		idx := slices.IndexFunc(rules, func(r Rule) bool { return r.Name == name })
		r := Rule{Name: name, Severity: "warning"}
		if idx >= 0 {
			r = rules[idx]
		}
		r.Line = rn.Line
		var kindNode, thresholdNode, countersNode *yaml.Node
		err := fields(rn, where, []string{"name", "kind", "counters", "threshold", "window", "severity", "disabled", "width", "speed"},
			func(k string, v *yaml.Node) error {
				switch k {
				case "kind":
					kindNode = v
					var s string
					if err := decodeScalar(v, where+".kind", &s); err != nil {
						return err
					}
					if !slices.Contains(kinds, Kind(s)) {
						return lineError(v, "%s: kind %q: want one of %s", where, s, kindList())
					}
					if idx >= 0 && Kind(s) != r.Kind {
						return lineError(v, "%s: the default rule's kind is %s; give a new rule another name", where, r.Kind)
					}
					r.Kind = Kind(s)
				case "counters":
					countersNode = v
					if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
						return lineError(v, "%s: counters: want a list of counter names", where)
					}
					r.Counters = nil
					for _, e := range v.Content {
						var s string
						if err := decodeScalar(e, where+".counters", &s); err != nil {
							return err
						}
						c, ok := fabric.CounterByName(s)
						if !ok {
							return lineError(e, "%s: unknown counter %q (known: %s)", where, s, strings.Join(fabric.CounterNames[:], ", "))
						}
						r.Counters = append(r.Counters, c)
					}
				case "threshold":
					thresholdNode = v
					return decodeScalar(v, where+".threshold", &r.Threshold)
				case "window":
					return decodeDuration(v, where+".window", &r.Window)
				case "severity":
					if err := decodeScalar(v, where+".severity", &r.Severity); err != nil {
						return err
					}
					if !slices.Contains(severities, r.Severity) {
						return lineError(v, "%s: severity %q: want one of %s", where, r.Severity, strings.Join(severities, ", "))
					}
				case "disabled":
					return decodeScalar(v, where+".disabled", &r.Disabled)
				case "width":
					return decodeScalar(v, where+".width", &r.Width)
				case "speed":
					return decodeScalar(v, where+".speed", &r.Speed)
				}
				return nil
			})
		if err != nil {
			return nil, err
		}
		if r.Kind == "" {
			return nil, lineError(rn, "%s: a new rule needs a kind (one of %s)", where, kindList())
		}
		at := func(n *yaml.Node) *yaml.Node {
			if n != nil {
				return n
			}
			if kindNode != nil {
				return kindNode
			}
			return rn
		}
		if err := r.check(); err != nil {
			bad := rn
			switch {
			case strings.Contains(err.Error(), "threshold"):
				bad = at(thresholdNode)
			case strings.Contains(err.Error(), "counter"):
				bad = at(countersNode)
			}
			return nil, lineError(bad, "%s: %v", where, err)
		}
		if idx >= 0 {
			rules[idx] = r
		} else {
			rules = append(rules, r)
		}
	}
	return rules, nil
}

func kindList() string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

func validName(s string) bool {
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// check reports what makes a rule impossible.
func (r *Rule) check() error {
	switch r.Kind {
	case CounterIncrease, CounterTotal:
		if len(r.Counters) == 0 {
			return fmt.Errorf("%s needs counters", r.Kind)
		}
		if r.Threshold < 1 {
			return fmt.Errorf("threshold %g: a %s rule counts events; want at least 1", r.Threshold, r.Kind)
		}
		if r.Kind == CounterIncrease && r.Window <= 0 {
			return fmt.Errorf("window: a counter_increase rule needs a window")
		}
	case LinkFlap:
		if r.Threshold < 1 {
			return fmt.Errorf("threshold %g: want at least 1 down/up event", r.Threshold)
		}
		if r.Window <= 0 {
			return fmt.Errorf("window: a link_flap rule needs a window")
		}
	case ErrorTrend:
		if !(r.Threshold > 0 && r.Threshold <= 1e-3) {
			return fmt.Errorf("threshold %g: an error_trend rule's threshold is a bit error rate; want one in (0, 1e-3], e.g. 1e-12", r.Threshold)
		}
		if r.Window < time.Minute {
			return fmt.Errorf("window %s: an error_trend rule fits the last window of sweeps; want at least 1m", r.Window)
		}
	case Congestion, Utilization:
		if r.Threshold <= 0 || r.Threshold > 1 {
			return fmt.Errorf("threshold %g: want a fraction in (0, 1]", r.Threshold)
		}
	case LinkDegraded:
		if r.Width != "" || r.Speed != "" {
			if fabric.LinkCapacity(r.Width, r.Speed) == 0 {
				return fmt.Errorf("width %q and speed %q: want both, e.g. 4X and EDR", r.Width, r.Speed)
			}
		}
	}
	if len(r.Counters) > 0 && r.Kind != CounterIncrease && r.Kind != CounterTotal {
		return fmt.Errorf("counters: a %s rule takes no counters", r.Kind)
	}
	return nil
}
