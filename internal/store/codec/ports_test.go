package codec

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/fabric"
)

// randomSwitch makes one switch's samples with a mix of typical and
// extreme values.
func randomSwitch(rng *rand.Rand, g fabric.GUID, t time.Time, extreme bool) []fabric.PortSample {
	var out []fabric.PortSample
	for p := 0; p <= MaxPort; p++ {
		if rng.IntN(4) != 0 && p > 0 {
			continue
		}
		s := fabric.PortSample{Port: fabric.PortRef{GUID: g, Port: p}, Time: t, Span: 30 * time.Second}
		bytes := uint64(rng.ExpFloat64() * 1e9)
		s.Delta[fabric.XmitData] = bytes &^ 3
		s.Delta[fabric.RcvData] = uint64(rng.ExpFloat64()*1e9) &^ 3
		s.Delta[fabric.XmitPkts] = bytes / 2048
		s.Delta[fabric.MulticastXmitPkts] = uint64(rng.IntN(5))
		s.Delta[fabric.UnicastXmitPkts] = s.Delta[fabric.XmitPkts] - s.Delta[fabric.MulticastXmitPkts]
		if rng.IntN(10) == 0 {
			s.Delta[fabric.SymbolErrors] = uint64(rng.IntN(100))
		}
		if extreme {
			for c := range s.Delta {
				switch rng.IntN(4) {
				case 0:
					s.Delta[c] = rng.Uint64()
				case 1:
					s.Delta[c] = math.MaxUint64
				}
			}
			s.Span = time.Duration(rng.Int64())
			s.Reset = rng.IntN(2) == 0
			s.Saturated = rng.IntN(3) == 0
		} else if rng.IntN(20) == 0 {
			s.Span += time.Duration(rng.IntN(1e6))
		}
		out = append(out, s)
	}
	return out
}

func TestCodecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var enc Encoder
	var dec Decoder
	at := time.Unix(1700000000, 123456789).UTC()
	for i := 0; i < 500; i++ {
		in := randomSwitch(rng, fabric.GUID(rng.Uint64()|1), at, i%2 == 1)
		blob, err := enc.EncodeSwitch(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := dec.DecodeSwitch(nil, blob, in[0].Port.GUID, at, nil)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("case %d: round trip differs\n in: %+v\nout: %+v", i, in[0], out[0])
		}
		var even []fabric.PortSample
		for _, s := range in {
			if s.Port.Port%2 == 0 {
				even = append(even, s)
			}
		}
		got, err := dec.DecodeSwitch(nil, blob, in[0].Port.GUID, at, func(p int) bool { return p%2 == 0 })
		if err != nil || !reflect.DeepEqual(even, got) && len(even)+len(got) > 0 {
			t.Fatalf("case %d: filtered decode differs (%v)", i, err)
		}
	}
}

func TestCodecRejects(t *testing.T) {
	var enc Encoder
	g := fabric.GUID(7)
	at := time.Unix(1, 0)
	if _, err := enc.EncodeSwitch(nil, []fabric.PortSample{{Port: fabric.PortRef{GUID: g, Port: 300}, Time: at}}); err == nil {
		t.Error("port 300 accepted")
	}
	dup := []fabric.PortSample{{Port: fabric.PortRef{GUID: g, Port: 3}}, {Port: fabric.PortRef{GUID: g, Port: 3}}}
	if _, err := enc.EncodeSwitch(nil, dup); err == nil {
		t.Error("duplicate port accepted")
	}
}

func FuzzDecode(f *testing.F) {
	var enc Encoder
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 8; i++ {
		b, err := enc.EncodeSwitch(nil, randomSwitch(rng, 5, time.Unix(9, 0), i%2 == 0))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{formatRaw})
	f.Add([]byte{0x81, 0xff, 0x00})
	f.Add([]byte{formatRaw, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, blob []byte) {
		var dec Decoder
		out, err := dec.DecodeSwitch(nil, blob, 5, time.Unix(9, 0), nil)
		if err != nil {
			return
		}
		// Whatever decodes must survive a round trip unchanged.
		var enc Encoder
		again, err := enc.EncodeSwitch(nil, append([]fabric.PortSample(nil), out...))
		if err != nil {
			t.Fatalf("re-encode of decoded samples: %v", err)
		}
		back, err := dec.DecodeSwitch(nil, again, 5, time.Unix(9, 0), nil)
		if err != nil {
			t.Fatalf("decode of re-encoded samples: %v", err)
		}
		if !reflect.DeepEqual(out, back) {
			t.Fatalf("round trip differs")
		}
	})
}
