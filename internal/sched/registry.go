package sched

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Factory builds a scheduler from the options of its spec.
type Factory func(opts Options) (Scheduler, error)

// Registry maps scheduler names to factories. It is an explicit value, not
// package state: package schedulers builds the default one, and tests can
// build their own.
type Registry struct {
	factories map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{factories: map[string]Factory{}} }

// Register adds a scheduler under name (lower-case letters, digits, '_'
// or '-'). Registering a name twice is an error.
func (r *Registry) Register(name string, f Factory) error {
	if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		return fmt.Errorf("sched: register %q: name must be lower-case letters, digits, '_' or '-'", name)
	}
	if f == nil {
		return fmt.Errorf("sched: register %q: nil factory", name)
	}
	if _, dup := r.factories[name]; dup {
		return fmt.Errorf("sched: register %q: already registered", name)
	}
	r.factories[name] = f
	return nil
}

// Names lists the registered schedulers, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New builds the scheduler a spec names. A spec is NAME or
// NAME:KEY=VALUE,KEY=VALUE, e.g. "slurm:sacct=off,timeout=20s".
func (r *Registry) New(spec string) (Scheduler, error) {
	name, opts, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	f, ok := r.factories[name]
	if !ok {
		return nil, fmt.Errorf("scheduler %q: unknown (have %s)", spec, strings.Join(r.Names(), ", "))
	}
	s, err := f(opts)
	if err != nil {
		return nil, fmt.Errorf("scheduler %q: %w", spec, err)
	}
	return s, nil
}

// ParseSpec splits NAME:KEY=VALUE,... into the name and its options.
func ParseSpec(spec string) (string, Options, error) {
	name, rest, _ := strings.Cut(strings.TrimSpace(spec), ":")
	if name == "" {
		return "", nil, fmt.Errorf("scheduler %q: empty name", spec)
	}
	opts := Options{}
	if rest == "" {
		return name, opts, nil
	}
	for _, kv := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return "", nil, fmt.Errorf("scheduler %q: option %q: want KEY=VALUE", spec, kv)
		}
		if _, dup := opts[k]; dup {
			return "", nil, fmt.Errorf("scheduler %q: option %q given twice", spec, k)
		}
		opts[k] = strings.TrimSpace(v)
	}
	return name, opts, nil
}

// Options are a scheduler's KEY=VALUE settings.
type Options map[string]string

// Check reports the first option not among known.
func (o Options) Check(known ...string) error {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			if len(known) == 0 {
				return fmt.Errorf("unknown option %q (this scheduler takes none)", k)
			}
			return fmt.Errorf("unknown option %q (known: %s)", k, strings.Join(known, ", "))
		}
	}
	return nil
}

// String returns the option's value, or def when unset.
func (o Options) String(key, def string) string {
	if v, ok := o[key]; ok {
		return v
	}
	return def
}

// Duration parses the option as a positive Go duration, or returns def.
func (o Options) Duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := o[key]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("option %s=%q: want a positive duration such as 30s", key, v)
	}
	return d, nil
}

// Bool parses the option as a boolean, or returns def.
func (o Options) Bool(key string, def bool) (bool, error) {
	v, ok := o[key]
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("option %s=%q: want true or false", key, v)
	}
	return b, nil
}
