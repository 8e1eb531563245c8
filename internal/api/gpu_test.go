package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/netloom/netloom/internal/auth"
	"github.com/netloom/netloom/internal/gpupath"
	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/sqlite"
)

// GET /jobs/{job}/gpu: the job's buffer paths and NCCL operations, for its
// owner and administrators only; pairs bounded by ?pairs=.
func TestJobGPU(t *testing.T) {
	dev := store.BufferKinds{Device: store.Traffic{Bytes: 4096, Msgs: 2}}
	job := &store.Job{JobSummary: store.JobSummary{ID: "g1", User: "alice", Ranks: 2}, Processes: []store.Process{
		{Rank: 0, Node: "n1", GPU: &store.GPU{Probed: true, Peers: []store.GPUPeer{{Peer: 1, SentFrom: dev}},
			NCCLOps: []store.NCCLOp{{Comm: 0xfedcba9876543210, CommSize: 2, Name: "AllReduce", Algorithm: "RING", Protocol: "LL", Calls: 4, Bytes: 4 << 20, TimeNS: 9e6}}}},
		{Rank: 1, Node: "n2", GPU: &store.GPU{Probed: true, Peers: []store.GPUPeer{{Peer: 0, ReceivedInto: dev}},
			NCCLOps: []store.NCCLOp{{Comm: 0xfedcba9876543210, CommRank: 1, CommSize: 2, Name: "AllReduce", Algorithm: "RING", Protocol: "LL", Calls: 4, Bytes: 4 << 20, TimeNS: 1e6}}}},
	}}
	// Bob's job is stored (finished), alice's live.
	other := &store.Job{JobSummary: store.JobSummary{ID: "g2", User: "bob", Ranks: 1, State: store.JobFinished}, Processes: []store.Process{{Rank: 0}}}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "netloom.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SaveJob(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	s := New(Options{Store: st})
	s.ServeJobs(func() *ingest.Live { return &ingest.Live{Jobs: map[string]*store.Job{"g1": job}} })
	get := func(who *auth.Principal, path string, v any) int {
		t.Helper()
		r := httptest.NewRequest("GET", path, nil)
		r = r.WithContext(auth.WithPrincipal(r.Context(), who))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if v != nil && w.Code == http.StatusOK {
			if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		return w.Code
	}
	alice := &auth.Principal{Name: "alice", Method: "password"}
	var got struct {
		Job string          `json:"job"`
		GPU gpupath.Summary `json:"gpu"`
	}
	if code := get(alice, "/api/v1/jobs/g1/gpu", &got); code != 200 {
		t.Fatalf("alice's job: %d", code)
	}
	b, n := got.GPU.Buffers, got.GPU.NCCL
	if got.Job != "g1" || b.Source != gpupath.Source || b.ProbedRanks != 2 || len(b.PathTotals) != 1 || b.PathTotals[0].Path != gpupath.DD ||
		b.PathTotals[0].Traffic != dev.Device || !b.PathTotals[0].Exact || len(b.Paths) != 1 || b.Paths[0].Locality != gpupath.InterNode {
		t.Errorf("buffers: %+v", b)
	}
	if len(n.Ops) != 1 || n.Ops[0].Calls != 8 || n.Ops[0].Bytes != 8<<20 || n.Ops[0].TimeNS != 10e6 || n.Ops[0].Comm != 0xfedcba9876543210 ||
		n.PeersFrom != gpupath.PeersNone || n.LinkAttribution != gpupath.LinksNotAttributed || n.Source != gpupath.NCCLSource {
		t.Errorf("nccl: %+v", n)
	}
	if code := get(alice, "/api/v1/jobs/g1/gpu?pairs=0", &got); code != 200 || len(got.GPU.Buffers.Pairs) != 0 || got.GPU.Buffers.PairsTotal != 1 {
		t.Errorf("pairs=0: %d, %+v", code, got.GPU.Buffers)
	}
	for path, want := range map[string]int{
		"/api/v1/jobs/g2/gpu":             404, // bob's: hidden from alice
		"/api/v1/jobs/nope/gpu":           404,
		"/api/v1/jobs/g1/gpu?pairs=10001": 400,
		"/api/v1/jobs/g1/gpu?pairs=x":     400,
	} {
		if code := get(alice, path, nil); code != want {
			t.Errorf("%s as alice: %d, want %d", path, code, want)
		}
	}
	if code := get(&auth.Principal{Name: "root", Admin: true, Method: "password"}, "/api/v1/jobs/g2/gpu", &got); code != 200 ||
		got.GPU.Buffers.NotProbed != gpupath.NoCUDA || len(got.GPU.NCCL.Ops) != 0 {
		t.Errorf("bob's job as an administrator: %d, %+v", code, got.GPU)
	}
}
