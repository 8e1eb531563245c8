package codec

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/store"
)

func sample(wait float64) store.ProcessSample {
	return store.ProcessSample{Span: 5 * time.Second, CPUUser: 4.5, CPUSystem: 0.25, MPI: 3.125, Wait: wait, VmRSS: 1 << 30, VmSize: 1 << 32,
		IORead: 7, Traffic: store.Classes{P2P: store.Traffic{Bytes: 1e9, Msgs: 1e4}}, InterNode: store.Traffic{Bytes: 5e8, Msgs: 99}}
}

// TestProcessSampleWaits round-trips per-interval samples with and without
// NETLOOM_WAITS' wait seconds, reads a row written before them (no wait at
// the end), refuses cut rows, and sums waits in rollups.
func TestProcessSampleWaits(t *testing.T) {
	for _, x := range []store.ProcessSample{sample(0), sample(2.75)} {
		b := EncodeProcessSample(nil, &x)
		got, err := DecodeProcessSample(b)
		if err != nil || !reflect.DeepEqual(got, x) {
			t.Fatalf("round trip: %+v, %v; want %+v", got, err, x)
		}
		noWait := x
		noWait.Wait = 0
		old := len(EncodeProcessSample(nil, &noWait)) // a row from before the waits
		for cut := 1; cut < len(b); cut++ {
			if _, err := DecodeProcessSample(b[:cut]); err == nil && cut != old {
				t.Fatalf("a row cut to %d of %d bytes decoded", cut, len(b))
			}
		}
		if _, err := DecodeProcessSample(append(b, 1, 2)); err == nil {
			t.Fatal("a row with bytes after it decoded")
		}
	}
	var a ProcessRollup
	for _, w := range []float64{1.5, 0, 2.25} {
		x := sample(w)
		a.AddRaw(int64(len(a.sums())), &x)
	}
	back, err := DecodeProcessRollup(EncodeProcessRollup(nil, &a), a.Time)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Sample("j", 0, time.Minute); got.Wait != 3.75 || got.MPI != 3*3.125 {
		t.Errorf("rollup of three samples: wait %v s, MPI %v s; want 3.75 and 9.375", got.Wait, got.MPI)
	}
	var none ProcessRollup
	x := sample(0)
	none.AddRaw(1, &x)
	if back, err := DecodeProcessRollup(EncodeProcessRollup(nil, &none), 1); err != nil || back.Sample("j", 0, time.Minute).Wait != 0 {
		t.Errorf("a rollup without waits: %v", err)
	}
}

// FuzzDecodeSample feeds rows that no daemon wrote to the per-interval
// sample and rollup decoders: no panic, and what decodes re-encodes to a
// row that decodes the same.
func FuzzDecodeSample(f *testing.F) {
	for _, w := range []float64{0, 2.75} {
		x := sample(w)
		f.Add(EncodeProcessSample(nil, &x))
		var a ProcessRollup
		a.AddRaw(1, &x)
		f.Add(EncodeProcessRollup(nil, &a))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if x, err := DecodeProcessSample(b); err == nil {
			e := EncodeProcessSample(nil, &x)
			if y, err := DecodeProcessSample(e); err != nil || !bytes.Equal(EncodeProcessSample(nil, &y), e) {
				t.Errorf("sample re-encoded: %+v, %v; was %+v", y, err, x)
			}
		}
		if a, err := DecodeProcessRollup(b, 1); err == nil {
			if _, err := DecodeProcessRollup(EncodeProcessRollup(nil, &a), 1); err != nil {
				t.Errorf("rollup re-encoded: %v", err)
			}
		}
	})
}
