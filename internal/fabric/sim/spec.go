// Package sim provides simulated fabrics: generated fat trees (generic and
// the TACC Stampede layout), fabrics loaded from ibnetdiscover/ibsim net
// files, their forwarding tables, and a fabric.Source whose counters move
// like real traffic.
package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// SpecHelp documents the simulated-fabric spec grammar; the CLI prints it.
const SpecHelp = `Simulated fabric specs (optionally prefixed with "sim:"):

  fat-tree:hosts=N[,radix=K][,levels=2|3][,width=4X][,speed=EDR][,seed=S]
      A folded-Clos fat tree of N hosts built from K-port switches (default
      K=36). Each leaf gives half its ports to hosts and half to uplinks.
      levels defaults to the fewest that fit: 2 levels hold up to K*K/2
      hosts, 3 levels up to K*K*K/4; more hosts than that is an error.
      Switches are named l1-swI (leaves), l2-swI, l3-swI.
  stampede[:seed=S]
      TACC Stampede as in the scalable-INAM paper: 6,541 hosts, 764
      switches of 36 ports (27,504 switch ports), 16,893 links: 332 leaf
      switches (leafI) and 8 core chassis, each of 36 line chips
      (coreC-lineL) and 18 spine chips (coreC-spineS).
  10x-stampede[:seed=S]
      Ten times the hosts (65,410) in a 3-level fat tree of 64-port
      switches. It needs more LIDs than one subnet has, so it has no
      forwarding tables; it is meant for load generation (sweeps).
  file:PATH
      A fabric read from an ibnetdiscover or ibsim net file. LIDs missing
      from the file are assigned; routes are up/down (fat tree) when the
      fabric is a tree, shortest-path (minhop) otherwise.

Generated fabrics (all but file) also take prefix=P: hosts are named P1..PN
instead of n1..nN, switches P-NAME, and every GUID is moved by a number
derived from P, so that fabrics of one site (several collectors on one
database) differ in both.

Hosts are named n1..nN (node description "nK HCA-1"), one port each.
width is 1X, 4X, 8X or 12X; speed is SDR, DDR, QDR, FDR10, FDR, EDR, HDR,
NDR or XDR (default 4X EDR). seed sets the synthetic counters (default 1).
Error counters read zero except on a few ports of bad links (about 1 in
500), which count an error every 5 minutes to 2 hours and stop at their
PortCounters field's maximum, as real ports do.`

// Kinds of simulated fabric.
const (
	KindFatTree     = "fat-tree"
	KindStampede    = "stampede"
	KindStampede10x = "10x-stampede"
	KindFile        = "file"
)

// Spec describes a simulated fabric. Build one with ParseSpec or by hand;
// zero fields take defaults in Generate.
type Spec struct {
	Kind   string
	Hosts  int    // fat-tree
	Radix  int    // fat-tree, default 36
	Levels int    // fat-tree: 0 = fewest that fit, else 2 or 3
	Width  string // default "4X"
	Speed  string // default "EDR"
	Seed   int64  // synthetic counters, default 1
	Path   string // file
	// Prefix renames hosts and switches and moves GUIDs (generated
	// fabrics; see SpecHelp).
	Prefix string
}

// ParseSpec parses a spec string; see SpecHelp.
func ParseSpec(s string) (Spec, error) {
	orig := s
	s = strings.TrimPrefix(strings.TrimSpace(s), "sim:")
	kind, rest, hasArgs := strings.Cut(s, ":")
	sp := Spec{Kind: kind}
	switch kind {
	case KindFile:
		if rest == "" {
			return Spec{}, fmt.Errorf("sim spec %q: file needs a path (file:PATH)", orig)
		}
		sp.Path = rest
		return sp, nil
	case KindFatTree, KindStampede, KindStampede10x:
	default:
		return Spec{}, fmt.Errorf("sim spec %q: unknown kind %q (want fat-tree, stampede, 10x-stampede or file)", orig, kind)
	}
	if hasArgs && rest != "" {
		for _, kv := range strings.Split(rest, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || v == "" {
				return Spec{}, fmt.Errorf("sim spec %q: option %q: want key=value", orig, kv)
			}
			if err := sp.set(k, v); err != nil {
				return Spec{}, fmt.Errorf("sim spec %q: %w", orig, err)
			}
		}
	}
	if kind == KindFatTree && sp.Hosts <= 0 {
		return Spec{}, fmt.Errorf("sim spec %q: fat-tree needs hosts=N with N > 0", orig)
	}
	if err := sp.validate(); err != nil {
		return Spec{}, fmt.Errorf("sim spec %q: %w", orig, err)
	}
	return sp, nil
}

func (sp *Spec) set(k, v string) error {
	atoi := func() (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("option %s=%q: not an integer", k, v)
		}
		return n, nil
	}
	var err error
	generic := sp.Kind == KindFatTree
	switch k {
	case "hosts":
		if !generic {
			return fmt.Errorf("option hosts: only fat-tree takes it")
		}
		sp.Hosts, err = atoi()
	case "radix":
		if !generic {
			return fmt.Errorf("option radix: only fat-tree takes it")
		}
		sp.Radix, err = atoi()
	case "levels":
		if !generic {
			return fmt.Errorf("option levels: only fat-tree takes it")
		}
		sp.Levels, err = atoi()
	case "width":
		if !generic {
			return fmt.Errorf("option width: only fat-tree takes it")
		}
		sp.Width = strings.ToUpper(v)
	case "speed":
		if !generic {
			return fmt.Errorf("option speed: only fat-tree takes it")
		}
		sp.Speed = strings.ToUpper(v)
	case "prefix":
		if sp.Kind == KindFile {
			return fmt.Errorf("option prefix: only generated fabrics take it")
		}
		for _, r := range v {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') || len(v) > 16 {
				return fmt.Errorf("option prefix=%q: want up to 16 letters, digits or '-'", v)
			}
		}
		sp.Prefix = v
	case "seed":
		var n int64
		n, err = strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("option seed=%q: not an integer", v)
		}
		sp.Seed = n
	default:
		return fmt.Errorf("unknown option %q", k)
	}
	return err
}

func (sp Spec) validate() error {
	if sp.Kind != KindFatTree {
		return nil
	}
	if sp.Radix != 0 && (sp.Radix < 4 || sp.Radix > 254 || sp.Radix%2 != 0) {
		return fmt.Errorf("radix %d: want an even number 4..254", sp.Radix)
	}
	if sp.Levels != 0 && sp.Levels != 2 && sp.Levels != 3 {
		return fmt.Errorf("levels %d: want 2 or 3", sp.Levels)
	}
	if sp.Width != "" && lanes(sp.Width) == 0 {
		return fmt.Errorf("width %q: want 1X, 4X, 8X or 12X", sp.Width)
	}
	if sp.Speed != "" && !knownSpeed(sp.Speed) {
		return fmt.Errorf("speed %q: want SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR or XDR", sp.Speed)
	}
	return nil
}

func lanes(w string) int {
	switch strings.ToUpper(w) {
	case "1X":
		return 1
	case "4X":
		return 4
	case "8X":
		return 8
	case "12X":
		return 12
	}
	return 0
}

func knownSpeed(s string) bool {
	switch strings.ToUpper(s) {
	case "SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR":
		return true
	}
	return false
}

// String is the canonical spec text, which ParseSpec reads back.
func (sp Spec) String() string {
	if sp.Kind == KindFile {
		return "file:" + sp.Path
	}
	var opts []string
	if sp.Kind == KindFatTree {
		opts = append(opts, "hosts="+strconv.Itoa(sp.Hosts))
		if sp.Radix != 0 {
			opts = append(opts, "radix="+strconv.Itoa(sp.Radix))
		}
		if sp.Levels != 0 {
			opts = append(opts, "levels="+strconv.Itoa(sp.Levels))
		}
		if sp.Width != "" {
			opts = append(opts, "width="+sp.Width)
		}
		if sp.Speed != "" {
			opts = append(opts, "speed="+sp.Speed)
		}
	}
	if sp.Seed != 0 {
		opts = append(opts, "seed="+strconv.FormatInt(sp.Seed, 10))
	}
	if sp.Prefix != "" {
		opts = append(opts, "prefix="+sp.Prefix)
	}
	if len(opts) == 0 {
		return sp.Kind
	}
	return sp.Kind + ":" + strings.Join(opts, ",")
}
