// Command gen writes the agent's MPI wrappers from one list of MPI function
// signatures (agent/mpi.list), so that the 200-odd wrappers are never written
// by hand. For each function it emits a C wrapper (MPI_X calling PMPI_X) and,
// with -fortran, the Fortran entry points (mpi_x_, mpi_x__, mpi_x, MPI_X) that
// call the MPI library's pmpi_x_ and account for the call the same way; with
// -f08, the `use mpi_f08` entry points (mpi_x_f08_) that call the library's
// own mpi_x_f08_ (the next definition, found with dlsym(RTLD_NEXT)): of every
// function (-f08 all: Open MPI, whose f08 bindings reach PMPI_X through
// ompi_x_f or pmpi_x_) or of the functions without a choice buffer only
// (-f08 nochoice: MPICH, whose mpi_x_f08ts_ bindings of choice-buffer
// functions call the C MPI_X, seen by the C wrappers, and whose mpi_x_f08_
// bindings of the others call PMPI_X).
//
// Usage: go run ./agent/gen -list agent/mpi.list -out DIR [-fortran] [-f08 all|nochoice]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// param is one parameter of an MPI function.
type param struct {
	typ   string // C type, with "[]" turned into "*"
	name  string
	array bool // declared as name[]
}

// function is one line of the list.
type function struct {
	line      int
	ret       string
	name      string
	params    []param
	variadic  bool
	pre, post string
	trace     string // @trace: recorded in the replay trace after the call (NETLOOM_TRACE)
	tracePre  string // @tracepre: what the trace needs before the call (request handles)
	fpost     string
	hasFpost  bool
	// @ftrace, @ftracepre: the trace's clauses in the mpif.h/use mpi
	// wrappers, where the C ones cannot be rebuilt from the Fortran
	// arguments (request arrays, 1-based indices)
	ftrace, ftracePre string
	noFortran         bool
	handwritten       bool
	// @bufs SEND, RECV: the buffers the call sends from and receives into
	// (NULL for none), whose kinds are probed when the process has CUDA
	// (src/gpu.h): the C wrappers name them before their @post accounting
	bufs string
}

var protoRE = regexp.MustCompile(`^(\w+)\s+(MPI_\w+)\s*\((.*)\)$`)

// parseList reads the list: one prototype per line, then " @" clauses.
func parseList(r io.Reader) ([]function, error) {
	var fns []function
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, " @")
		m := protoRE.FindStringSubmatch(strings.TrimSpace(parts[0]))
		if m == nil {
			return nil, fmt.Errorf("line %d: not a prototype: %q", n, parts[0])
		}
		fn := function{line: n, ret: m[1], name: m[2]}
		if err := fn.parseParams(m[3]); err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", n, fn.name, err)
		}
		for _, c := range parts[1:] {
			key, val, _ := strings.Cut(strings.TrimSpace(c), " ")
			switch key {
			case "pre":
				fn.pre = val
			case "post":
				fn.post = val
			case "trace":
				fn.trace = val
			case "tracepre":
				fn.tracePre = val
			case "fpost":
				fn.fpost, fn.hasFpost = val, true
			case "ftrace":
				fn.ftrace = val
			case "ftracepre":
				fn.ftracePre = val
			case "bufs":
				fn.bufs = val
			case "nofortran":
				fn.noFortran = true
			case "handwritten":
				fn.handwritten, fn.noFortran = true, true
			default:
				return nil, fmt.Errorf("line %d: %s: unknown clause @%s", n, fn.name, key)
			}
		}
		fns = append(fns, fn)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for _, f := range fns {
		if l, dup := seen[f.name]; dup {
			return nil, fmt.Errorf("line %d: %s already listed on line %d", f.line, f.name, l)
		}
		seen[f.name] = f.line
	}
	return fns, nil
}

var identRE = regexp.MustCompile(`[A-Za-z_]\w*$`)

func (f *function) parseParams(s string) error {
	s = strings.TrimSpace(s)
	if s == "void" || s == "" {
		return nil
	}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "..." {
			f.variadic = true
			continue
		}
		arr := strings.HasSuffix(p, "[]")
		p = strings.TrimSuffix(p, "[]")
		name := identRE.FindString(p)
		if name == "" {
			return fmt.Errorf("parameter %q has no name", p)
		}
		typ := strings.TrimSpace(strings.TrimSuffix(p, name))
		if arr {
			typ += " *"
		}
		f.params = append(f.params, param{typ: typ, name: name, array: arr})
	}
	return nil
}

func (f *function) args() string {
	names := make([]string, len(f.params))
	for i, p := range f.params {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

func (f *function) decl(prefix string) string {
	ps := make([]string, len(f.params))
	for i, p := range f.params {
		ps[i] = cParam(p.typ, p.name)
	}
	if len(ps) == 0 {
		ps = []string{"void"}
	}
	return fmt.Sprintf("%s %s%s(%s)", f.ret, prefix, strings.TrimPrefix(f.name, "MPI_"), strings.Join(ps, ", "))
}

func cParam(typ, name string) string {
	if strings.HasSuffix(typ, "*") {
		return typ + name
	}
	return typ + " " + name
}

func writeHeader(w io.Writer, fns []function) {
	fmt.Fprintf(w, "/* Generated by agent/gen from mpi.list. Do not edit. */\n#ifndef NL_FNIDS_H\n#define NL_FNIDS_H\nenum nl_fn_id {\n")
	for _, f := range fns {
		fmt.Fprintf(w, "\tNL_FN_%s,\n", f.name)
	}
	fmt.Fprintf(w, "\tNL_NFUNCS\n};\n#endif\n")
}

// neverBlocks lists the functions that return without waiting for another
// process, besides the nonblocking MPI_I* forms: their durations are short and
// light-tailed, so timing one call in NETLOOM_TIME_SAMPLE estimates their
// total well. Every other function can wait (for a peer, a collective, a
// window epoch, the file system) and is timed at every call: a 1-in-N sample
// of heavy-tailed waits multiplies one long wait by N.
var neverBlocks = map[string]bool{
	"MPI_Pcontrol": true, "MPI_Send_init": true, "MPI_Bsend_init": true, "MPI_Ssend_init": true,
	"MPI_Rsend_init": true, "MPI_Recv_init": true, "MPI_Start": true, "MPI_Startall": true,
	"MPI_Request_free": true, "MPI_Test": true, "MPI_Testall": true, "MPI_Testany": true,
	"MPI_Testsome": true, "MPI_Cancel": true, "MPI_Type_free": true, "MPI_Put": true, "MPI_Get": true,
	"MPI_Accumulate": true, "MPI_Get_accumulate": true, "MPI_Fetch_and_op": true,
	"MPI_Compare_and_swap": true, "MPI_Rput": true, "MPI_Rget": true, "MPI_Raccumulate": true,
	"MPI_Rget_accumulate": true, "MPI_Win_sync": true, "MPI_Win_post": true, "MPI_Win_test": true,
}

// waitsBefore is what NETLOOM_WAITS times before a call, counted apart as
// the call's wait (agent/README.md, "Wait states"). Before the blocking
// collectives, a barrier on the same communicator (MPInside's method): the
// rank's wait for the last rank to arrive. Neighbourhood collectives are not
// among them: a barrier over the whole communicator is not their wait.
// Before a blocking receive, a probe for the message it will match: the time
// until the sender's message shows up, the late sender.
var waitsBefore = map[string]string{
	"MPI_Recv": "nl_wait_recv(F, source, tag, comm)",
}

// waitsInstead is what NETLOOM_WAITS calls in place of the PMPI call, for
// the C wrappers: MPI_Sendrecv as its send posted, a probe timed as the
// wait, its receive and the send's completion (a probe before the call
// would deadlock two ranks that exchange). fwaitsInstead is the same for
// the Fortran wrappers: a function with the binding's own arguments, called
// in place of the library's binding.
var (
	waitsInstead = map[string]string{
		"MPI_Sendrecv": "nl_sendrecv_waits(F, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, status)",
	}
	fwaitsInstead = map[string]string{"MPI_Sendrecv": "nl_fsendrecv_waits"}
)

func init() {
	for _, c := range []string{"MPI_Barrier", "MPI_Bcast", "MPI_Gather", "MPI_Gatherv", "MPI_Scatter",
		"MPI_Scatterv", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall", "MPI_Alltoallv", "MPI_Alltoallw",
		"MPI_Reduce", "MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block", "MPI_Scan", "MPI_Exscan"} {
		waitsBefore[c] = "nl_wait_before(F, comm)"
	}
}

// blocks tells whether a function can wait for another process (see neverBlocks).
func blocks(name string) bool {
	nonblocking := strings.HasPrefix(name, "MPI_I") && name != "MPI_Init" && name != "MPI_Init_thread" ||
		strings.HasPrefix(name, "MPI_File_i")
	return !nonblocking && !neverBlocks[name]
}

// writeTables writes fntab.c: every function's name and whether it can
// wait, the hot path's tables (hot.h), in a file of their own that depends
// on nothing above them.
func writeTables(w io.Writer, fns []function) {
	fmt.Fprintf(w, "/* Generated by agent/gen from mpi.list. Do not edit. */\n#include \"hot.h\"\n\n")
	fmt.Fprintf(w, "const char *const nl_fn_names[NL_NFUNCS] = {\n")
	for _, f := range fns {
		fmt.Fprintf(w, "\t\"%s\",\n", f.name)
	}
	fmt.Fprintf(w, "};\n\n")
	fmt.Fprintf(w, "/* 1: can wait for another process, timed at every call (gen: blocks) */\n")
	fmt.Fprintf(w, "const unsigned char nl_fn_blocks[NL_NFUNCS] = {\n")
	for _, f := range fns {
		b := 0
		if blocks(f.name) {
			b = 1
		}
		fmt.Fprintf(w, "\t%d, /* %s */\n", b, f.name)
	}
	fmt.Fprintf(w, "};\n\n")
}

func writeC(w io.Writer, fns []function, fortran bool, f08 string) error {
	fmt.Fprintf(w, "/* Generated by agent/gen from mpi.list. Do not edit. */\n#include \"nl.h\"\n\n")
	for _, f := range fns {
		if f.handwritten {
			continue
		}
		// The calls not timed (all but one in NETLOOM_TIME_SAMPLE) end in a
		// tail call of PMPI_X: no frame kept across the call. Possible when
		// nothing needs the result: no @post, or a send/receive whose bytes
		// are counted when posted (before the call).
		early := f.post != ""
		var stmts []string
		for _, st := range strings.Split(f.post, ";") { // every statement reads inputs only
			st = strings.TrimSpace(st)
			if !strings.HasPrefix(st, "nl_p2p(F, ") && !strings.HasPrefix(st, "nl_recvd(F, ") {
				early = false
			}
			stmts = append(stmts, st)
		}
		post := f.post // in the C wrappers: with the buffers' kinds, once CUDA is here
		if f.bufs != "" && f.post != "" {
			post = fmt.Sprintf("if (__builtin_expect(nl_gpu_on, 0))\n\t\t\tnl_gpu_bufs(F, %s);\n\t\t%s;\n\t\tif (__builtin_expect(nl_gpu_on, 0))\n\t\t\tnl_gpu_clear()", f.bufs, f.post)
		}
		if f.pre == "" && (f.post == "" || early) {
			// A fast path without any call (nl.h, nl_fast): the wrapper
			// keeps no frame and saves no register; anything else goes to
			// the full path below, renamed nl_full_X, by a tail call.
			writeFast(w, f, early, stmts)
		}
		if f.pre == "" && (f.post == "" || early) {
			fmt.Fprintf(w, "static __attribute__((noinline)) %s\n{\n", f.decl("nl_full_MPI_"))
		} else {
			fmt.Fprintf(w, "%s\n{\n", f.decl("MPI_"))
		}
		if f.pre != "" || f.post != "" || waitsInstead[f.name] != "" {
			fmt.Fprintf(w, "\tconst int F = NL_FN_%s;\n\t(void)F;\n", f.name)
		}
		if f.post == "" || early {
			fmt.Fprintf(w, "\tif (__builtin_expect(nl_untimed(NL_FN_%s), 1)) {\n", f.name)
			fmt.Fprintf(w, "\t\tnl_fn_count(NL_FN_%s);\n", f.name)
			if f.pre != "" {
				fmt.Fprintf(w, "\t\t%s;\n", f.pre)
			}
			if early {
				fmt.Fprintf(w, "\t\t%s;\n", post)
			}
			fmt.Fprintf(w, "\t\treturn P%s(%s);\n\t}\n", f.name, f.args())
		}
		// Tracing times every call, so a traced call always comes here. Its
		// entry is the call's timing start (one clock read fewer), except
		// where the wait before a collective is timed first: that wait is
		// the collective's in the trace.
		wb := waitsBefore[f.name]
		traceEnter := func(enter string) {
			fmt.Fprintf(w, "\tif (__builtin_expect(nl_tracing, 0)) {\n\t\t%s;\n", enter)
			if f.tracePre != "" {
				fmt.Fprintf(w, "\t\t%s;\n", f.tracePre)
			}
			fmt.Fprintf(w, "\t}\n")
		}
		if f.trace != "" && wb != "" {
			traceEnter("nl_trace_enter()")
		}
		if wb != "" {
			fmt.Fprintf(w, "\tif (__builtin_expect(nl_waits, 0)) {\n\t\tconst int F = NL_FN_%s;\n\t\t%s;\n\t}\n", f.name, wb)
		}
		fmt.Fprintf(w, "\tconst uint64_t nl_t0 = nl_begin(NL_FN_%s);\n", f.name)
		if f.trace != "" && wb == "" {
			traceEnter("nl_trace_enter_at(nl_t0)")
		}
		if f.pre != "" {
			fmt.Fprintf(w, "\t%s;\n", f.pre)
		}
		if wi := waitsInstead[f.name]; wi != "" {
			fmt.Fprintf(w, "\tint rc = __builtin_expect(nl_waits, 0) ? %s : P%s(%s);\n", wi, f.name, f.args())
		} else {
			fmt.Fprintf(w, "\tint rc = P%s(%s);\n", f.name, f.args())
		}
		fmt.Fprintf(w, "\tnl_fn_done(NL_FN_%s, nl_t0);\n", f.name)
		if f.post != "" {
			fmt.Fprintf(w, "\tif (rc == MPI_SUCCESS) {\n\t\t%s;\n\t}\n", post)
		}
		if f.trace != "" {
			fmt.Fprintf(w, "\tif (__builtin_expect(nl_tracing, 0)) {\n\t\tif (rc == MPI_SUCCESS) {\n\t\t\t%s;\n\t\t}\n\t\tnl_trace_exit();\n\t}\n", f.trace)
		}
		fmt.Fprintf(w, "\treturn rc;\n}\n\n")
	}
	if fortran {
		fmt.Fprintf(w, "/* Fortran entry points: the library's Fortran bindings call PMPI_ directly,\n * so they are interposed here and call the library's pmpi_x_ in turn. */\n\n")
		for _, f := range fns {
			if f.noFortran {
				continue
			}
			if err := writeFortran(w, f, mpifh); err != nil {
				return err
			}
		}
	}
	switch f08 {
	case "":
		return nil
	case "all", "nochoice":
	default:
		return fmt.Errorf("-f08 %q: want all or nochoice", f08)
	}
	fmt.Fprintf(w, "/* use mpi_f08 entry points (-f08 %s): the library's f08 bindings call PMPI_\n * (directly or through its Fortran layer), so they are interposed here and call\n * the library's mpi_x_f08_ in turn. */\n\n", f08)
	for _, f := range fns {
		if f.noFortran || (f08 == "nochoice" && f.choiceBuffer()) {
			continue
		}
		if err := writeFortran(w, f, mpiF08); err != nil {
			return err
		}
	}
	return nil
}

// writeFast writes the fast path of C wrapper f (declaring its full path,
// nl_full_X, first): when the call is untimed, the agent single-threaded and
// steady and every accounting statement's inputs cached (nl_fast, nl_p2p_ok,
// nl_recvd_ok: checks only), it counts (nl_fast_count, nl_p2p_do,
// nl_recvd_do) and tail-calls PMPI_X; else it tail-calls nl_full_X.
func writeFast(w io.Writer, f function, early bool, stmts []string) {
	fmt.Fprintf(w, "static %s;\n", f.decl("nl_full_MPI_"))
	fmt.Fprintf(w, "%s\n{\n", f.decl("MPI_"))
	fmt.Fprintf(w, "\tconst int F = NL_FN_%s;\n\tuint64_t nl_c;\n", f.name)
	conds := []string{"nl_fast(F, &nl_c)"}
	var dos []string
	if early {
		for i, st := range stmts {
			name, rest, _ := strings.Cut(st, "(")
			fmt.Fprintf(w, "\tstruct %s_x nl_x%d;\n", name, i)
			conds = append(conds, fmt.Sprintf("%s_ok(&nl_x%d, %s", name, i, strings.TrimPrefix(rest, "F, ")))
			dos = append(dos, fmt.Sprintf("%s_do(F, &nl_x%d)", name, i))
		}
	}
	fmt.Fprintf(w, "\tif (__builtin_expect(%s, 1)) {\n", strings.Join(conds, " && "))
	fmt.Fprintf(w, "\t\tnl_fast_count(F, nl_c);\n")
	for _, d := range dos {
		fmt.Fprintf(w, "\t\t%s;\n", d)
	}
	fmt.Fprintf(w, "\t\treturn P%s(%s);\n\t}\n", f.name, f.args())
	fmt.Fprintf(w, "\treturn nl_full_%s(%s);\n}\n\n", f.name, f.args())
}

// notChoice are void * parameters that are not choice buffers: Fortran
// passes them as TYPE(C_PTR) (MPI_Win_allocate's baseptr).
var notChoice = map[string]bool{"baseptr": true}

// choiceBuffer tells whether f has a choice buffer (a void * argument):
// MPICH's f08 binding of such a function passes it as a descriptor to a C
// routine that calls MPI_X.
func (f *function) choiceBuffer() bool {
	for _, p := range f.params {
		base := strings.TrimSpace(strings.TrimPrefix(p.typ, "const "))
		if base == "void *" && !notChoice[p.name] {
			return true
		}
	}
	return false
}

// binding is one family of Fortran entry points.
type binding struct {
	tag          string              // distinguishes the generated names
	sym, real    func(string) string // the entry point and the library routine it calls, from the lowercase name
	aliases      func(f function, lower string) []string
	optionalIerr bool // ierror may be absent (a NULL pointer)
}

var (
	// mpif.h and use mpi: mpi_x_ and its manglings call pmpi_x_.
	mpifh = binding{
		tag:  "f",
		sym:  func(l string) string { return "mpi_" + l + "_" },
		real: func(l string) string { return "pmpi_" + l + "_" },
		aliases: func(f function, l string) []string {
			return []string{"mpi_" + l + "__", "mpi_" + l, strings.ToUpper(f.name)}
		},
	}
	// use mpi_f08: mpi_x_f08_ calls the library's mpi_x_f08_; ierror is OPTIONAL.
	mpiF08 = binding{
		tag:          "f08",
		sym:          func(l string) string { return "mpi_" + l + "_f08_" },
		real:         func(l string) string { return "mpi_" + l + "_f08_" },
		aliases:      func(function, string) []string { return nil },
		optionalIerr: true,
	}
)

var handleF2C = map[string]string{
	"MPI_Comm": "Comm", "MPI_Datatype": "Type", "MPI_Win": "Win", "MPI_File": "File",
	"MPI_Op": "Op", "MPI_Info": "Info", "MPI_Group": "Group", "MPI_Message": "Message",
	"MPI_Request": "Request",
}

// fortranLocal returns the C declaration that rebuilds parameter p from the
// Fortran argument f_<name>, for use in an accounting clause.
func fortranLocal(p param) (string, error) {
	base := strings.TrimSpace(strings.TrimPrefix(p.typ, "const "))
	ptr := strings.HasSuffix(base, "*")
	base = strings.TrimSpace(strings.TrimSuffix(base, "*"))
	switch {
	case base == "void" && ptr:
		return fmt.Sprintf("const void *%s = nl_fbuf(f_%s);", p.name, p.name), nil
	case base == "int" && !ptr:
		return fmt.Sprintf("int %s = (int)*(const MPI_Fint *)f_%s;", p.name, p.name), nil
	case base == "int" && ptr:
		return fmt.Sprintf("const int *%s = (const int *)f_%s;", p.name, p.name), nil
	case (base == "MPI_Aint" || base == "MPI_Offset") && !ptr:
		return fmt.Sprintf("%s %s = *(const %s *)f_%s;", base, p.name, base, p.name), nil
	case base == "MPI_Status" && ptr && !p.array: // mpif.h and use mpi only: an INTEGER array
		return fmt.Sprintf("MPI_Status %s_c; const MPI_Status *%s = nl_fstatus(f_%s, &%s_c);", p.name, p.name, p.name, p.name), nil
	}
	if k, ok := handleF2C[base]; ok {
		if !ptr {
			return fmt.Sprintf("%s %s = PMPI_%s_f2c(*(const MPI_Fint *)f_%s);", base, p.name, k, p.name), nil
		}
		if !p.array {
			return fmt.Sprintf("%s %s_c = PMPI_%s_f2c(*(const MPI_Fint *)f_%s); %s *%s = &%s_c;",
				base, p.name, k, p.name, base, p.name, p.name), nil
		}
	}
	return "", fmt.Errorf("parameter %s (%s) cannot be rebuilt from Fortran; give an @fpost clause", p.name, p.typ)
}

var wordRE = regexp.MustCompile(`\b[A-Za-z_]\w*\b`)

// locals returns the conversions for the parameters expr uses.
func locals(f function, expr string) ([]string, error) {
	used := map[string]bool{}
	for _, w := range wordRE.FindAllString(expr, -1) {
		used[w] = true
	}
	var out []string
	for _, p := range f.params {
		if !used[p.name] {
			continue
		}
		l, err := fortranLocal(p)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", f.line, f.name, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// writeClause writes a Fortran wrapper's clause in a block of its own: the
// Fortran form fexpr as it is, else the C form expr with the parameters it
// uses rebuilt from the Fortran arguments. Nothing for an empty clause.
func writeClause(w io.Writer, f function, expr, fexpr, indent string) error {
	if fexpr != "" {
		fmt.Fprintf(w, "%s%s;\n", indent, fexpr)
		return nil
	}
	if expr == "" {
		return nil
	}
	ls, err := locals(f, expr)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s{\n", indent)
	for _, l := range ls {
		fmt.Fprintf(w, "%s\t%s\n", indent, l)
	}
	fmt.Fprintf(w, "%s\t%s;\n%s}\n", indent, expr, indent)
	return nil
}

// writeFortran writes one Fortran entry point of binding b: every argument a
// pointer, then ierror; handles converted with PMPI_X_f2c for the accounting,
// the arguments passed on untouched.
func writeFortran(w io.Writer, f function, b binding) error {
	lower := strings.ToLower(strings.TrimPrefix(f.name, "MPI_"))
	ps := make([]string, 0, len(f.params)+1)
	args := make([]string, 0, len(f.params)+1)
	for _, p := range f.params {
		ps = append(ps, "void *f_"+p.name)
		args = append(args, "f_"+p.name)
	}
	ps = append(ps, "MPI_Fint *ierr")
	ierr := "ierr"
	if b.optionalIerr {
		ierr = "&nl_ierr" // the call always gets one, so that the accounting can read it
	}
	args = append(args, ierr)
	sig := strings.Join(ps, ", ")
	typ := fmt.Sprintf("nl_%s_%s_t", b.tag, lower)
	ptr := fmt.Sprintf("nl_real_%s_%s", b.tag, lower)
	fmt.Fprintf(w, "typedef void (*%s)(%s);\n", typ, sig)
	fmt.Fprintf(w, "static %s %s;\n", typ, ptr)
	fmt.Fprintf(w, "void %s(%s)\n{\n", b.sym(lower), sig)
	fmt.Fprintf(w, "\t%s real = (%s)nl_fsym((void **)&%s, \"%s\");\n", typ, typ, ptr, b.real(lower))
	if b.optionalIerr {
		fmt.Fprintf(w, "\tMPI_Fint nl_ierr = MPI_SUCCESS;\n")
	}
	// The replay trace, as in the C wrappers, around the call. The f08
	// arguments convert as mpif.h's do: a TYPE(MPI_Comm) or TYPE(MPI_Request)
	// is its integer, and a TYPE(MPI_Status) is laid out as mpif.h's status
	// array in both libraries (Open MPI: source, tag, error, cancelled, a
	// size_t count; MPICH: two count words, source, tag, error), so
	// PMPI_Status_f2c reads it; MPI_STATUS_IGNORE is the same common block.
	traced := f.trace != ""
	wb := waitsBefore[f.name]
	traceEnter := func(enter string) error {
		fmt.Fprintf(w, "\tif (__builtin_expect(nl_tracing, 0)) {\n\t\t%s;\n", enter)
		if err := writeClause(w, f, f.tracePre, f.ftracePre, "\t\t"); err != nil {
			return err
		}
		fmt.Fprintf(w, "\t}\n")
		return nil
	}
	if traced && wb != "" {
		if err := traceEnter("nl_trace_enter()"); err != nil {
			return err
		}
	}
	if wb != "" {
		ls, err := locals(f, wb)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\tif (__builtin_expect(nl_waits, 0)) {\n\t\tconst int F = NL_FN_%s;\n", f.name)
		for _, l := range ls {
			fmt.Fprintf(w, "\t\t%s\n", l)
		}
		fmt.Fprintf(w, "\t\t%s;\n\t}\n", wb)
	}
	fmt.Fprintf(w, "\tconst uint64_t nl_t0 = nl_begin(NL_FN_%s);\n", f.name)
	if traced && wb == "" { // entered at the call's timing start, as the C wrappers
		if err := traceEnter("nl_trace_enter_at(nl_t0)"); err != nil {
			return err
		}
	}
	if f.pre != "" || f.post != "" || f.hasFpost {
		fmt.Fprintf(w, "\tconst int F = NL_FN_%s;\n\t(void)F;\n", f.name)
	}
	if err := writeClause(w, f, f.pre, "", "\t"); err != nil {
		return err
	}
	if wi := fwaitsInstead[f.name]; wi != "" {
		fmt.Fprintf(w, "\tif (__builtin_expect(nl_waits, 0))\n\t\t%s(%s);\n\telse\n\t\treal(%s);\n", wi, strings.Join(args, ", "), strings.Join(args, ", "))
	} else {
		fmt.Fprintf(w, "\treal(%s);\n", strings.Join(args, ", "))
	}
	fmt.Fprintf(w, "\tnl_fn_done(NL_FN_%s, nl_t0);\n", f.name)
	if b.optionalIerr {
		fmt.Fprintf(w, "\tif (ierr)\n\t\t*ierr = nl_ierr;\n")
	}
	rc := "*ierr"
	if b.optionalIerr {
		rc = "nl_ierr"
	}
	if traced {
		fmt.Fprintf(w, "\tif (__builtin_expect(nl_tracing, 0)) {\n\t\tif (%s == MPI_SUCCESS) {\n", rc)
		if err := writeClause(w, f, f.trace, f.ftrace, "\t\t\t"); err != nil {
			return err
		}
		fmt.Fprintf(w, "\t\t}\n\t\tnl_trace_exit();\n\t}\n")
	}
	post := f.post
	var ls []string
	if f.hasFpost {
		post = f.fpost
	} else if post != "" {
		var err error
		if ls, err = locals(f, post); err != nil {
			return err
		}
	}
	if post != "" {
		fmt.Fprintf(w, "\tif (%s == MPI_SUCCESS) {\n", rc)
		for _, l := range ls {
			fmt.Fprintf(w, "\t\t%s\n", l)
		}
		fmt.Fprintf(w, "\t\t%s;\n\t}\n", post)
	}
	fmt.Fprintf(w, "}\n")
	for _, alias := range b.aliases(f, lower) {
		fmt.Fprintf(w, "void %s(%s) __attribute__((alias(\"%s\")));\n", alias, sig, b.sym(lower))
	}
	fmt.Fprintf(w, "\n")
	return nil
}

func run() error {
	list := flag.String("list", "mpi.list", "the list of MPI function signatures")
	out := flag.String("out", ".", "directory for wrappers.c, fntab.c and fnids.h")
	fortran := flag.Bool("fortran", false, "also interpose the Fortran (mpif.h, use mpi) entry points")
	f08 := flag.String("f08", "", "also interpose the use mpi_f08 entry points: all, or nochoice (functions without a choice buffer)")
	flag.Parse()
	f, err := os.Open(*list)
	if err != nil {
		return err
	}
	defer f.Close()
	fns, err := parseList(f)
	if err != nil {
		return fmt.Errorf("%s: %w", *list, err)
	}
	var h, c, t bytes.Buffer
	writeHeader(&h, fns)
	writeTables(&t, fns)
	if err := writeC(&c, fns, *fortran, *f08); err != nil {
		return fmt.Errorf("%s: %w", *list, err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "fnids.h"), h.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "fntab.c"), t.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*out, "wrappers.c"), c.Bytes(), 0o644)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
