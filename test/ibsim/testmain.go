package ibsim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// childVar marks the re-executed test binary and tells it where the
// fabric is: "DIR|SOCKNAME".
const childVar = "NETLOOM_IBSIM_FABRIC"

// TestMain runs a package's tests against a simulated fabric. Code that
// talks to the fabric through libibumad (cgo) needs umad2sim preloaded
// from process start, so the parent starts the fabric and re-executes the
// test binary as a child with the preload environment; the child runs the
// tests and the parent returns its exit status. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(ibsim.TestMain(m, "testdata/fattree.net", ibsim.Options{})) }
//
// When ibsim or OpenSM are missing the tests run without a fabric and
// Attached skips them with the reason. Fuzzing (-test.fuzz, and the
// fuzzer's workers) runs without one too: fuzz targets decode bytes, and
// each worker preloaded with umad2sim would be one of ibsim's 10 clients.
func TestMain(m *testing.M, netfile string, opt Options) int {
	if os.Getenv(childVar) != "" {
		code := m.Run()
		RemoveSysTree()
		return code
	}
	if Missing() != "" || fuzzing() {
		return m.Run()
	}
	f, err := Start(context.Background(), netfile, opt)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Stop()
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = baseEnv(append(f.Env(), childVar+"="+f.Dir+"|"+f.SockName)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if exit.ExitCode() < 0 {
			fmt.Fprintf(os.Stderr, "ibsim: test child %s: %v\n", os.Args[0], err)
			return 1
		}
		return exit.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "ibsim: run test child %s: %v\n", os.Args[0], err)
		return 1
	}
}

// RemoveSysTree removes the ./sys-PID tree umad2sim builds in the working
// directory of a preloaded process. umad2sim removes it from an exit
// handler, which Go programs never run, so such a process calls this
// before exiting.
func RemoveSysTree() {
	_ = os.RemoveAll(fmt.Sprintf("sys-%d", os.Getpid()))
}

// Attach returns the fabric a TestMain parent started for this process.
// The result has no processes of its own; Stop does nothing to them.
func Attach() (*Fabric, error) {
	v := os.Getenv(childVar)
	if v == "" {
		return nil, errNotChild
	}
	dir, sock, ok := strings.Cut(v, "|")
	if !ok || dir == "" || sock == "" {
		return nil, fmt.Errorf("ibsim attach: %s=%q: want DIR|SOCKNAME", childVar, v)
	}
	return &Fabric{Dir: dir, SockName: sock, FIFO: filepath.Join(dir, "console")}, nil
}

// Attached returns the fabric for a test run under TestMain, skipping the
// test when the simulator is not installed.
func Attached(t testing.TB) *Fabric {
	t.Helper()
	if m := Missing(); m != "" {
		t.Skipf("no simulated fabric: %s", m)
	}
	f, err := Attach()
	if err != nil {
		t.Fatalf("ibsim: %v (call ibsim.TestMain from the package's TestMain)", err)
	}
	return f
}

// fuzzing tells whether this test binary runs a fuzz target or is one of
// the fuzzer's workers.
func fuzzing() bool {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.fuzz=") || strings.HasPrefix(a, "-test.fuzzworker") {
			return true
		}
	}
	return false
}
