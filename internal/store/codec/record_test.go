package codec

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/netloom/netloom/internal/store"
)

// TestRowsBeforeRecordgen reads rows that the codec wrote before its
// per-field code was generated from agent.proto (testdata, written by
// the code at fe688e3: bigProcess(3) with a GPU section, and sample(0),
// sample(2.75) and rollups of two of each): each decodes to what was
// written, and encodes again to the same bytes.
func TestRowsBeforeRecordgen(t *testing.T) {
	f, err := os.Open("testdata/rows_before_recordgen.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := bigProcess(3)
	p.GPU = gpuSection()
	samples := []store.ProcessSample{sample(0), sample(2.75)}
	var n, ns, nr int
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		kind, hx, _ := strings.Cut(sc.Text(), " ")
		row, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatal(err)
		}
		var again []byte
		switch kind {
		case "process":
			got, err := DecodeProcess(row)
			if err != nil || got.ProcessUsage != p.ProcessUsage || got.Node != p.Node || got.PID != p.PID || got.GPU == nil {
				t.Fatalf("process row: %v; usage %+v, want %+v", err, got.ProcessUsage, p.ProcessUsage)
			}
			again = EncodeProcess(nil, &got)
		case "sample":
			got, err := DecodeProcessSample(row)
			if err != nil || !reflect.DeepEqual(got, samples[ns]) {
				t.Fatalf("sample row %d: %+v, %v; want %+v", ns, got, err, samples[ns])
			}
			again = EncodeProcessSample(nil, &got)
			ns++
		case "rollup":
			got, err := DecodeProcessRollup(row, 2e9)
			var want ProcessRollup
			want.AddRaw(1e9, &samples[nr])
			want.AddRaw(2e9, &samples[nr])
			if err != nil || got.Sample("j", 0, 0) != want.Sample("j", 0, 0) {
				t.Fatalf("rollup row %d: %+v, %v; want %+v", nr, got, err, want)
			}
			again = EncodeProcessRollup(nil, &got)
			nr++
		}
		if !bytes.Equal(again, row) {
			t.Fatalf("%s row %d encodes again as\n%x, not\n%x", kind, n, again, row)
		}
	}
	if n != 5 {
		t.Fatalf("%d rows, want 5", n)
	}
}

// TestTailUndeclaredRefused: a sample or rollup whose tail holds a field
// the declaration does not (a newer daemon's row, or corruption) is an
// error naming the field, not silently dropped.
func TestTailUndeclaredRefused(t *testing.T) {
	x := sample(2.75)
	tail := protowire.AppendVarint(protowire.AppendTag(nil, 40, protowire.VarintType), 7)
	if _, err := DecodeProcessSample(append(EncodeProcessSample(nil, &x), tail...)); err == nil || !strings.Contains(err.Error(), "field 40") {
		t.Errorf("sample: %v", err)
	}
	var a ProcessRollup
	a.AddRaw(1, &x)
	if _, err := DecodeProcessRollup(append(EncodeProcessRollup(nil, &a), tail...), 1); err == nil || !strings.Contains(err.Error(), "field 40") {
		t.Errorf("rollup: %v", err)
	}
}
