package slurm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/netloom/netloom/internal/sched"
)

// Users resolves between user names and uids. Slurm's squeue reports both,
// sacct only the name; nil means no lookup.
type Users interface {
	Name(uid uint32) (string, bool)
	UID(name string) (uint32, bool)
}

// document is the envelope shared by `squeue --json` and `sacct --json`
// in every OpenAPI plugin version (v0.0.38 in 22.05 to v0.0.41 in 24.05).
type document struct {
	Meta   json.RawMessage              `json:"meta"`
	Errors []json.RawMessage            `json:"errors"`
	Jobs   []map[string]json.RawMessage `json:"jobs"`
}

func decodeDocument(data []byte, what string) (*document, error) {
	var doc document
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: not the expected JSON object: %w (output starts %q)", what, err, head(data, 80))
	}
	if len(doc.Errors) > 0 {
		msgs := make([]string, 0, len(doc.Errors))
		for _, e := range doc.Errors {
			msgs = append(msgs, errorText(e))
		}
		return nil, fmt.Errorf("%s reported errors: %s", what, strings.Join(msgs, "; "))
	}
	if doc.Jobs == nil {
		return nil, fmt.Errorf("%s: no \"jobs\" field (output starts %q)", what, head(data, 80))
	}
	return &doc, nil
}

// errorText renders one entry of "errors": {"error": "...", "description":
// "...", "error_number"/"error_code": N} depending on the version.
func errorText(raw json.RawMessage) string {
	var e map[string]any
	if json.Unmarshal(raw, &e) != nil {
		return string(head(raw, 200))
	}
	var parts []string
	for _, k := range []string{"description", "error", "source"} {
		if s, ok := e[k].(string); ok && s != "" {
			parts = append(parts, s)
		}
	}
	for _, k := range []string{"error_number", "error_code"} {
		if n, ok := e[k].(float64); ok && n != 0 {
			parts = append(parts, fmt.Sprintf("code %g", n))
		}
	}
	if len(parts) == 0 {
		return string(head(raw, 200))
	}
	return strings.Join(parts, ": ")
}

// ParseSqueue decodes the output of `squeue --json`. users (may be nil)
// fills in a user name missing from the output.
func ParseSqueue(data []byte, users Users) ([]sched.Job, error) {
	doc, err := decodeDocument(data, "squeue --json")
	if err != nil {
		return nil, err
	}
	jobs := make([]sched.Job, 0, len(doc.Jobs))
	for i, raw := range doc.Jobs {
		j, err := squeueJob(fields{m: raw}, users)
		if err != nil {
			return nil, fmt.Errorf("squeue --json: jobs[%d]%s: %w", i, idHint(raw), err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// newJob reads the fields squeue and sacct share: the job id (required),
// name and partition.
func newJob(f fields, source string) (sched.Job, error) {
	j := sched.Job{Source: source}
	id, ok, err := f.uint("job_id")
	if err != nil {
		return j, err
	}
	if !ok {
		return j, fmt.Errorf("field job_id: missing")
	}
	j.ID = strconv.FormatUint(id, 10)
	if j.Name, _, err = f.str("name"); err != nil {
		return j, err
	}
	j.Partition, _, err = f.str("partition")
	return j, err
}

func squeueJob(f fields, users Users) (sched.Job, error) {
	j, err := newJob(f, "squeue")
	if err != nil {
		return j, err
	}
	if j.ArrayID, err = arrayID(f, "array_job_id", "array_task_id"); err != nil {
		return j, err
	}
	states, err := f.states("job_state")
	if err != nil {
		return j, err
	}
	j.State, j.RawState = mapState(states)
	uid, uidOK, err := f.uint("user_id")
	if err != nil {
		return j, err
	}
	if uidOK && uid > math.MaxUint32 {
		return j, fmt.Errorf("field user_id: %d is not a uid", uid)
	}
	name, _, err := f.str("user_name")
	if err != nil {
		return j, err
	}
	if err := setUser(&j, name, uint32(uid), uidOK, users); err != nil {
		return j, err
	}
	if err := setNodes(&j, f, "nodes"); err != nil {
		return j, err
	}
	cpus, _, err := f.uint("cpus")
	if err != nil {
		return j, err
	}
	j.CPUs = int(min(cpus, math.MaxInt32))
	submit, start, end, err := f.times("submit_time", "start_time", "end_time")
	if err != nil {
		return j, err
	}
	setTimes(&j, submit, start, end)
	if j.ExitCode, err = exitCode(f, "exit_code"); err != nil {
		return j, err
	}
	return j, nil
}

// ParseSacct decodes the output of `sacct --json`. users (may be nil)
// resolves the uid, which sacct does not report. A job sacct lists more
// than once (requeued) is reported once, as its last record.
func ParseSacct(data []byte, users Users) ([]sched.Job, error) {
	doc, err := decodeDocument(data, "sacct --json")
	if err != nil {
		return nil, err
	}
	jobs := make([]sched.Job, 0, len(doc.Jobs))
	at := map[string]int{}
	for i, raw := range doc.Jobs {
		j, err := sacctJob(fields{m: raw}, users)
		if err != nil {
			return nil, fmt.Errorf("sacct --json: jobs[%d]%s: %w", i, idHint(raw), err)
		}
		if k, dup := at[j.ID]; dup {
			jobs[k] = j
			continue
		}
		at[j.ID] = len(jobs)
		jobs = append(jobs, j)
	}
	return jobs, nil
}

func sacctJob(f fields, users Users) (sched.Job, error) {
	j, err := newJob(f, "sacct")
	if err != nil {
		return j, err
	}
	if arr, ok, err := f.object("array"); err != nil {
		return j, err
	} else if ok {
		if j.ArrayID, err = arrayID(arr, "job_id", "task_id"); err != nil {
			return j, err
		}
	}
	state, ok, err := f.object("state")
	if err != nil {
		return j, err
	}
	if !ok {
		return j, fmt.Errorf("field state: missing")
	}
	states, err := state.states("current")
	if err != nil {
		return j, err
	}
	j.State, j.RawState = mapState(states)
	name, _, err := f.str("user")
	if err != nil {
		return j, err
	}
	if err := setUser(&j, name, 0, false, users); err != nil {
		return j, err
	}
	if err := setNodes(&j, f, "nodes"); err != nil {
		return j, err
	}
	if req, ok, err := f.object("required"); err != nil {
		return j, err
	} else if ok {
		cpus, _, err := req.uint("CPUs")
		if err != nil {
			return j, err
		}
		j.CPUs = int(min(cpus, math.MaxInt32))
	}
	tm, ok, err := f.object("time")
	if err != nil {
		return j, err
	}
	if ok {
		submit, start, end, err := tm.times("submission", "start", "end")
		if err != nil {
			return j, err
		}
		setTimes(&j, submit, start, end)
	}
	if j.ExitCode, err = exitCode(f, "exit_code"); err != nil {
		return j, err
	}
	return j, nil
}

func setUser(j *sched.Job, name string, uid uint32, uidOK bool, users Users) error {
	switch {
	case uidOK:
		j.UID, j.UIDKnown = uid, true
		j.User = name
		if j.User == "" && users != nil {
			j.User, _ = users.Name(uid)
		}
	case name != "":
		j.User = name
		if users != nil {
			j.UID, j.UIDKnown = users.UID(name)
		}
	default:
		return fmt.Errorf("fields user_id and user_name: both missing")
	}
	return nil
}

func setNodes(j *sched.Job, f fields, key string) error {
	list, _, err := f.str(key)
	if err != nil {
		return err
	}
	// sacct says "None assigned" for jobs that never got nodes.
	if list == "None assigned" || list == "(null)" {
		list = ""
	}
	if j.Nodes, err = sched.ExpandHostlist(list); err != nil {
		return fmt.Errorf("field %s: %w", f.name(key), err)
	}
	return nil
}

// setTimes keeps only the times that mean what Job says: Slurm puts the
// expected start on pending jobs and the time limit's end on running ones.
func setTimes(j *sched.Job, submit, start, end time.Time) {
	j.Submit = submit
	if j.State != sched.StatePending {
		j.Start = start
	}
	if j.State.Finished() || j.State == sched.StateCompleting {
		j.End = end
	}
}

// arrayID is "JOB_TASK" when both are set and the job id is not 0.
func arrayID(f fields, jobKey, taskKey string) (string, error) {
	aj, ajOK, err := f.uint(jobKey)
	if err != nil {
		return "", err
	}
	at, atOK, err := f.uint(taskKey)
	if err != nil {
		return "", err
	}
	if !ajOK || !atOK || aj == 0 {
		return "", nil
	}
	return fmt.Sprintf("%d_%d", aj, at), nil
}

// exitCode reads a job's exit code: a raw wait status (22.05), a plain or
// {set,number} number, or {"status":..., "return_code":..., "signal":
// {"id":...}} (23.02 and later). A signal gives 128+signal, as shells do.
func exitCode(f fields, key string) (int, error) {
	raw, ok := f.m[key]
	if !ok || isNull(raw) {
		return 0, nil
	}
	if obj, isObj := asObject(raw); isObj {
		o := fields{path: f.name(key) + ".", m: obj}
		if _, has := obj["return_code"]; has {
			rc, _, err := o.uint("return_code")
			if err != nil {
				return 0, err
			}
			if sig, ok, err := o.object("signal"); err != nil {
				return 0, err
			} else if ok {
				id, set, err := sig.uint("id")
				if err != nil {
					return 0, err
				}
				if set && id > 0 {
					return 128 + int(min(id, 127)), nil
				}
			}
			return int(min(rc, 255)), nil
		}
	}
	st, _, err := f.uint(key)
	if err != nil {
		return 0, err
	}
	if sig := st & 0x7f; sig != 0 {
		return 128 + int(sig), nil
	}
	return int((st >> 8) & 0xff), nil
}

// mapState turns Slurm's job state (a word, or a list of a base state and
// flags in 23.02 and later) into Netloom's state and Slurm's base word.
func mapState(words []string) (sched.State, string) {
	base := words[0]
	for _, w := range words {
		if w == "COMPLETING" {
			return sched.StateCompleting, base
		}
	}
	switch base {
	case "PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD":
		return sched.StatePending, base
	case "RUNNING", "CONFIGURING", "RESIZING", "SIGNALING":
		return sched.StateRunning, base
	case "SUSPENDED", "STOPPED":
		return sched.StateSuspended, base
	case "COMPLETING", "STAGE_OUT":
		return sched.StateCompleting, base
	case "COMPLETED":
		return sched.StateCompleted, base
	case "CANCELLED", "REVOKED":
		return sched.StateCancelled, base
	case "FAILED", "BOOT_FAIL", "SPECIAL_EXIT":
		return sched.StateFailed, base
	case "TIMEOUT", "DEADLINE":
		return sched.StateTimeout, base
	case "NODE_FAIL":
		return sched.StateNodeFail, base
	case "PREEMPTED":
		return sched.StatePreempted, base
	case "OUT_OF_MEMORY":
		return sched.StateOutOfMemory, base
	}
	return sched.StateUnknown, base
}

// fields is one JSON object's members, decoded on demand so that an error
// names the member by its path ("state.current").
type fields struct {
	path string // "" for a job, "time." for its time object
	m    map[string]json.RawMessage
}

func (f fields) name(key string) string { return f.path + key }

func (f fields) str(key string) (string, bool, error) {
	raw, ok := f.m[key]
	if !ok || isNull(raw) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, fmt.Errorf("field %s: want a string, got %s", f.name(key), head(raw, 40))
	}
	return s, true, nil
}

func (f fields) object(key string) (fields, bool, error) {
	raw, ok := f.m[key]
	if !ok || isNull(raw) {
		return fields{}, false, nil
	}
	obj, isObj := asObject(raw)
	if !isObj {
		return fields{}, false, fmt.Errorf("field %s: want an object, got %s", f.name(key), head(raw, 40))
	}
	return fields{path: f.name(key) + ".", m: obj}, true, nil
}

// uint reads a non-negative integer: a JSON number, null (unset), or the
// {"set": bool, "infinite": bool, "number": N} form of 23.02 and later
// (unset unless set and not infinite).
func (f fields) uint(key string) (uint64, bool, error) {
	raw, ok := f.m[key]
	if !ok || isNull(raw) {
		return 0, false, nil
	}
	bad := func() (uint64, bool, error) {
		return 0, false, fmt.Errorf("field %s: want a non-negative integer, null or {set,infinite,number}, got %s", f.name(key), head(raw, 60))
	}
	if obj, isObj := asObject(raw); isObj {
		var set, inf bool
		if v, ok := obj["set"]; ok && json.Unmarshal(v, &set) != nil {
			return bad()
		}
		if v, ok := obj["infinite"]; ok && json.Unmarshal(v, &inf) != nil {
			return bad()
		}
		num, ok := obj["number"]
		if !ok {
			return bad()
		}
		n, err := parseUint(num)
		if err != nil {
			return bad()
		}
		if !set || inf {
			return 0, false, nil
		}
		return n, true, nil
	}
	n, err := parseUint(raw)
	if err != nil {
		return bad()
	}
	return n, true, nil
}

// times reads three Unix-second timestamps; 0 and unset are zero times.
func (f fields) times(keys ...string) (a, b, c time.Time, err error) {
	var out [3]time.Time
	for i, k := range keys {
		n, ok, err := f.uint(k)
		if err != nil {
			return a, b, c, err
		}
		// Past year 9999 is no time Slurm means (it uses such values
		// for "never").
		if ok && n > 0 && n < 253402300800 {
			out[i] = time.Unix(int64(n), 0).UTC()
		}
	}
	return out[0], out[1], out[2], nil
}

// states reads a job state: "RUNNING" (22.05) or ["RUNNING", flags...].
func (f fields) states(key string) ([]string, error) {
	raw, ok := f.m[key]
	if !ok || isNull(raw) {
		return nil, fmt.Errorf("field %s: missing", f.name(key))
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, fmt.Errorf("field %s: empty", f.name(key))
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil || len(many) == 0 || many[0] == "" {
		return nil, fmt.Errorf("field %s: want a state word or a non-empty list of them, got %s", f.name(key), head(raw, 60))
	}
	return many, nil
}

func parseUint(raw json.RawMessage) (uint64, error) {
	s := string(bytes.TrimSpace(raw))
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return n, nil
	}
	// Slurm prints some counts as floats ("billable_tres": 3.0); accept
	// integral ones.
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v != math.Trunc(v) || v > 1<<63 || strings.ContainsAny(s, "\"") {
		return 0, fmt.Errorf("not a non-negative integer: %s", s)
	}
	return uint64(v), nil
}

func asObject(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(t, &obj) != nil {
		return nil, false
	}
	return obj, true
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// idHint names a job in an error when its job_id is readable.
func idHint(raw map[string]json.RawMessage) string {
	if id, ok, err := (fields{m: raw}).uint("job_id"); err == nil && ok {
		return fmt.Sprintf(" (job %d)", id)
	}
	return ""
}

func head(b []byte, n int) []byte {
	if len(b) > n {
		return append(append([]byte{}, b[:n]...), "..."...)
	}
	return b
}
