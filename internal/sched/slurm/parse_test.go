package slurm

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netloom/netloom/internal/sched"
)

type fakeUsers map[string]uint32

func (f fakeUsers) Name(uid uint32) (string, bool) {
	for n, u := range f {
		if u == uid {
			return n, true
		}
	}
	return "", false
}

func (f fakeUsers) UID(name string) (uint32, bool) { u, ok := f[name]; return u, ok }

func unix(s int64) time.Time { return time.Unix(s, 0).UTC() }

func byID(t *testing.T, jobs []sched.Job) map[string]sched.Job {
	t.Helper()
	m := map[string]sched.Job{}
	for _, j := range jobs {
		if _, dup := m[j.ID]; dup {
			t.Fatalf("job %s reported twice", j.ID)
		}
		m[j.ID] = j
	}
	return m
}

// testdata/squeue-22.05.json is real output of Debian 12's Slurm 22.05.8.
func TestParseSqueue2205(t *testing.T) {
	data, err := os.ReadFile("testdata/squeue-22.05.json")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := ParseSqueue(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 11 {
		t.Fatalf("%d jobs, want 11", len(jobs))
	}
	m := byID(t, jobs)
	want := map[string]sched.Job{
		"3": {ID: "3", Name: "sleeper", User: "root", UIDKnown: true, Partition: "debug", State: sched.StateCompleted,
			RawState: "COMPLETED", Nodes: []string{"n1", "n2"}, CPUs: 2, Submit: unix(1795320613), Start: unix(1795320613),
			End: unix(1795320643), Source: "squeue"},
		"5": {ID: "5", Name: "alicebatch", User: "nlalice", UID: 1001, UIDKnown: true, Partition: "debug",
			State: sched.StateCompleted, RawState: "COMPLETED", Nodes: []string{"n1"}, CPUs: 1,
			Submit: unix(1795320624), Start: unix(1795320625), End: unix(1795320630), Source: "squeue"},
		"7": {ID: "7", Name: "failer", User: "root", UIDKnown: true, Partition: "debug", State: sched.StateFailed,
			RawState: "FAILED", Nodes: []string{"n1"}, CPUs: 1, Submit: unix(1795320644), Start: unix(1795320644),
			End: unix(1795320644), ExitCode: 1, Source: "squeue"},
		// Pending: Slurm's expected start and end are not kept.
		"8": {ID: "8", Name: "later", User: "root", UIDKnown: true, Partition: "debug", State: sched.StatePending,
			RawState: "PENDING", CPUs: 1, Submit: unix(1795320644), Source: "squeue"},
		"9": {ID: "9", Name: "tocancel", User: "root", UIDKnown: true, Partition: "debug", State: sched.StateCancelled,
			RawState: "CANCELLED", Nodes: []string{"n1"}, CPUs: 1, Submit: unix(1795320644), Start: unix(1795320646),
			End: unix(1795320646), ExitCode: 128 + 15, Source: "squeue"},
		// Running: end_time is the time limit's end, not kept.
		"11": {ID: "11", ArrayID: "10_1", Name: "arr", User: "root", UIDKnown: true, Partition: "debug",
			State: sched.StateRunning, RawState: "RUNNING", Nodes: []string{"n1"}, CPUs: 1, Submit: unix(1795320646),
			Start: unix(1795320646), Source: "squeue"},
	}
	for id, w := range want {
		if got := m[id]; !got.Equal(w) || got.Source != w.Source {
			t.Errorf("job %s:\n got %+v\nwant %+v", id, got, w)
		}
	}
	if got := m["1"].Nodes; strings.Join(got, ",") != "n1,n2,n3" {
		t.Errorf("job 1 nodes %v, want n1 n2 n3", got)
	}
	if got := m["10"].ArrayID; got != "10_2" {
		t.Errorf("job 10 array id %q, want 10_2", got)
	}
}

// testdata/squeue-23.11-shape.json has the shapes of data_parser v0.0.40:
// numbers as {set,infinite,number}, states as lists, exit codes as objects.
func TestParseSqueueNewerShapes(t *testing.T) {
	data, err := os.ReadFile("testdata/squeue-23.11-shape.json")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := ParseSqueue(data, fakeUsers{"nlbob": 1002})
	if err != nil {
		t.Fatal(err)
	}
	m := byID(t, jobs)
	want := map[string]sched.Job{
		"42": {ID: "42", ArrayID: "40_2", Name: "ring", User: "nlalice", UID: 1001, UIDKnown: true, Partition: "debug",
			State: sched.StateRunning, RawState: "RUNNING", Nodes: []string{"n1", "n2", "gpu08", "gpu09", "gpu10"}, CPUs: 5,
			Submit: unix(1700000000), Start: unix(1700000010)},
		"43": {ID: "43", Name: "killed", User: "root", UIDKnown: true, Partition: "debug", State: sched.StateCompleting,
			RawState: "COMPLETED", Nodes: []string{"n3"}, CPUs: 1, Submit: unix(1700000000), Start: unix(1700000001),
			End: unix(1700000002), ExitCode: 128 + 9},
		// No user_name: resolved from the uid.
		"44": {ID: "44", Name: "waiting", User: "nlbob", UID: 1002, UIDKnown: true, Partition: "debug",
			State: sched.StatePending, RawState: "PENDING", CPUs: 4, Submit: unix(1700000000)},
	}
	for id, w := range want {
		if got := m[id]; !got.Equal(w) {
			t.Errorf("job %s:\n got %+v\nwant %+v", id, got, w)
		}
	}
}

func TestParseSacct(t *testing.T) {
	data, err := os.ReadFile("testdata/sacct-22.05-shape.json")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := ParseSacct(data, fakeUsers{"nlalice": 1001, "root": 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Fatalf("%d jobs, want 2 (a requeued job once): %+v", len(jobs), jobs)
	}
	m := byID(t, jobs)
	want := map[string]sched.Job{
		"101": {ID: "101", Name: "old-ring", User: "nlalice", UID: 1001, UIDKnown: true, Partition: "debug",
			State: sched.StateCompleted, RawState: "COMPLETED", Nodes: []string{"n1", "n2", "n3"}, CPUs: 3,
			Submit: unix(1700000000), Start: unix(1700000100), End: unix(1700000105)},
		"102": {ID: "102", Name: "requeued", User: "root", UIDKnown: true, Partition: "debug",
			State: sched.StateFailed, RawState: "FAILED", Nodes: []string{"n2"}, CPUs: 1,
			Submit: unix(1700000000), Start: unix(1700000200), End: unix(1700000300), ExitCode: 2},
	}
	for id, w := range want {
		if got := m[id]; !got.Equal(w) || got.Source != "sacct" {
			t.Errorf("job %s:\n got %+v\nwant %+v", id, got, w)
		}
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`not json`, "not the expected JSON object"},
		{`{"meta":{}}`, `no "jobs" field`},
		{`{"jobs":[],"errors":[{"error":"Invalid user","error_number":2001}]}`, "reported errors: Invalid user: code 2001"},
		{`{"jobs":[{"name":"x","job_state":"RUNNING","user_id":0}]}`, "jobs[0]: field job_id: missing"},
		{`{"jobs":[{"job_id":"7","job_state":"RUNNING","user_id":0}]}`, "jobs[0]: field job_id: want a non-negative integer"},
		{`{"jobs":[{"job_id":7,"job_state":"RUNNING","user_id":0,"start_time":{"set":true,"number":"x"}}]}`, "jobs[0] (job 7): field start_time"},
		{`{"jobs":[{"job_id":7,"job_state":[],"user_id":0}]}`, "(job 7): field job_state: want a state word"},
		{`{"jobs":[{"job_id":7,"job_state":"RUNNING"}]}`, "(job 7): fields user_id and user_name: both missing"},
		{`{"jobs":[{"job_id":7,"job_state":"RUNNING","user_id":-1}]}`, "(job 7): field user_id"},
		{`{"jobs":[{"job_id":7,"job_state":"RUNNING","user_id":0,"nodes":"n[3-1]"}]}`, `(job 7): field nodes: hostlist "n[3-1]": range "3-1" in [3-1] runs backwards`},
		{`{"jobs":[{"job_id":7,"job_state":"RUNNING","user_id":0,"exit_code":{"return_code":{"set":true,"number":1},"signal":5}}]}`, "field exit_code.signal: want an object"},
	} {
		_, err := ParseSqueue([]byte(c.in), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSqueue(%s): error %v, want one containing %q", c.in, err, c.want)
		}
	}
	_, err := ParseSacct([]byte(`{"jobs":[{"job_id":1,"user":"root","state":{"current":5}}]}`), nil)
	if err == nil || !strings.Contains(err.Error(), "sacct --json: jobs[0] (job 1): field state.current") {
		t.Errorf("sacct bad state: error %v", err)
	}
}

func FuzzParseSqueue(f *testing.F) {
	for _, p := range []string{"testdata/squeue-22.05.json", "testdata/squeue-23.11-shape.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"jobs":[{"job_id":1,"job_state":"RUNNING","user_id":0,"nodes":"a[1-2]b[01-02],c"}]}`))
	f.Add([]byte(`{"jobs":[{"job_id":{"set":true,"number":1e3},"job_state":["PENDING"],"user_name":"x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := ParseSqueue(data, fakeUsers{"x": 5})
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.ID == "" || j.State == "" || j.RawState == "" {
				t.Fatalf("job without id or state: %+v", j)
			}
			if len(j.Nodes) > sched.MaxHostlist {
				t.Fatalf("%d nodes", len(j.Nodes))
			}
			if !j.End.IsZero() && !j.State.Finished() && j.State != sched.StateCompleting {
				t.Fatalf("end time on a %s job", j.State)
			}
		}
	})
}

func FuzzParseSacct(f *testing.F) {
	b, err := os.ReadFile("testdata/sacct-22.05-shape.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := ParseSacct(data, nil)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, j := range jobs {
			if j.ID == "" || seen[j.ID] {
				t.Fatalf("bad or duplicate id: %+v", j)
			}
			seen[j.ID] = true
		}
	})
}
