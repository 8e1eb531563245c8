package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/netloom/netloom/internal/fabric/sim"
	"github.com/netloom/netloom/internal/ingest"
	"github.com/netloom/netloom/internal/ingest/agentpb"
	"github.com/netloom/netloom/internal/store"
	"github.com/netloom/netloom/internal/store/sqlite"
)

// TestAgentAuthMungeNeedsMunged: agent_auth munge does not start without
// a munged, and says so; auto starts without one.
func TestAgentAuthMungeNeedsMunged(t *testing.T) {
	t.Setenv(MungeSocketEnv, filepath.Join(t.TempDir(), "no-munged.sock"))
	for _, mode := range []string{"munge", "auto"} {
		t.Run(mode, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "netloom.db")
			st, err := sqlite.Open(context.Background(), db, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			sp, _ := sim.ParseSpec("fat-tree:hosts=8,radix=8")
			src, err := sim.NewSource(context.Background(), sp, sim.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Listen: "127.0.0.1:0", DB: db, Fabric: "sim", AgentListen: "127.0.0.1:0", AgentAddressFile: "-", AgentAuth: mode}
			cfg.Auth.Anonymous = "admin"
			d := New(cfg, src, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			started := make(chan struct{})
			go func() { done <- d.Run(ctx, func(net.Addr) { close(started) }) }()
			select {
			case err := <-done:
				if mode != "munge" || err == nil || !strings.Contains(err.Error(), "munged") || !strings.Contains(err.Error(), MungeSocketEnv) {
					t.Errorf("%s: Run: %v", mode, err)
				}
			case <-started:
				if mode == "munge" {
					t.Error("agent_auth munge started without munged")
				}
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("daemon neither started nor failed")
			}
		})
	}
}

// TestSchedulerOwnsJob: a verified datagram for a job the scheduler says
// is another user's is job_mismatch; the owner's, by name or uid, is not.
func TestSchedulerOwnsJob(t *testing.T) {
	d := &Daemon{}
	d.publish(func(p *published) {
		p.sched = &schedView{Name: "slurm", Jobs: map[string]store.SchedInfo{
			"42": {ID: "42", User: "alice", UID: 1001},
			"43": {ID: "43"},
		}}
	})
	item := func(job, user string, uid uint32, verified bool) ingest.Item {
		return ingest.Item{D: ingest.FromProto(&agentpb.Datagram{JobId: job}), Verified: verified, User: user, UID: uid}
	}
	for _, c := range []struct {
		it       ingest.Item
		mismatch bool
	}{
		{item("42", "alice", 1001, true), false},
		{item("42", "1001", 1001, true), false}, // no name for the uid here
		{item("42", "bob", 1002, true), true},
		{item("42", "bob", 1002, false), false}, // unverified: nothing to compare
		{item("43", "bob", 1002, true), false},  // the scheduler names no owner
		{item("44", "bob", 1002, true), false},  // not a scheduler job
	} {
		err := d.schedMismatch(c.it)
		if (err != nil) != c.mismatch {
			t.Errorf("job %s by %s (verified %v): %v", c.it.D.JobId, c.it.User, c.it.Verified, err)
		}
		if err != nil && !strings.Contains(err.Error(), ingest.ReasonJobMismatch) {
			t.Errorf("error %v", err)
		}
	}
}

// TestAgentAuthAutoRefuses: agent_auth auto without munged refuses every
// agent datagram (unauthenticated) and says so in /api/v1/status; only
// agent_auth none accepts them, and says that.
func TestAgentAuthAutoRefuses(t *testing.T) {
	t.Setenv(MungeSocketEnv, filepath.Join(t.TempDir(), "no-munged.sock"))
	for _, mode := range []string{"", "auto", "none"} {
		t.Run("mode="+mode, func(t *testing.T) {
			s := startDaemon(t, filepath.Join(t.TempDir(), "netloom.db"), "fat-tree:hosts=8,radix=8", func(c *Config) {
				c.AgentListen, c.AgentAddressFile, c.AgentAuth = "127.0.0.1:0", "-", mode
			})
			var st struct {
				AgentAuth struct{ Mode, Reason string } `json:"agent_auth"`
			}
			if s.get("/api/v1/status", &st) != 200 {
				t.Fatal("status")
			}
			want := "refusing"
			if mode == "none" {
				want = "none"
			}
			if st.AgentAuth.Mode != want || (want == "refusing" && !strings.Contains(st.AgentAuth.Reason, "agent_auth: none")) {
				t.Errorf("status agent_auth %+v, want mode %s", st.AgentAuth, want)
			}
			conn, err := net.Dial("udp", s.d.AgentAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			b, _ := proto.Marshal(ringSnapshot("forged", 0, 1, 1, time.Now().Add(-time.Second), false))
			conn.Write(b)
			var list struct{ Total int }
			if want == "refusing" {
				s.waitFor("the datagram refused", func() bool { return s.dropCount(ingest.ReasonUnauthenticated) == 1 })
				if s.get("/api/v1/jobs?state=all", &list) != 200 || list.Total != 0 {
					t.Errorf("%d jobs", list.Total)
				}
				return
			}
			s.waitFor("the job", func() bool { return s.get("/api/v1/jobs?state=all", &list) == 200 && list.Total == 1 })
		})
	}
}
