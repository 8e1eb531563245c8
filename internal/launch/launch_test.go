package launch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ launcher, want string }{
		{"mpirun", OpenMPI}, {"mpiexec", OpenMPI}, {"mpirun.openmpi", OpenMPI}, {"mpirun.mpich", MPICH}, {"mpiexec.hydra", MPICH},
	} {
		if _, err := exec.LookPath(c.launcher); err != nil && !strings.Contains(c.launcher, ".") {
			t.Logf("%s not installed", c.launcher)
			continue
		}
		got, err := Detect(ctx, []string{c.launcher, "-np", "2", "true"}, os.Environ())
		if err != nil || got != c.want {
			t.Errorf("Detect(%s) = %q, %v; want %q", c.launcher, got, err, c.want)
		}
	}
	if _, err := Detect(ctx, []string{"true"}, os.Environ()); err == nil {
		t.Error("Detect(true) succeeded")
	}
}

func TestSrunProgram(t *testing.T) {
	for args, want := range map[string]string{
		"-n 4 --mpi=pmix ./app -x": "./app",
		"-N2 -n 4 -- ./app":        "./app",
		"--ntasks=4 ./app":         "./app",
		"-w n1 ./app":              "./app",
		"-n 4":                     "",
	} {
		got := srunProgram(strings.Fields(args))
		if got != want {
			t.Errorf("srunProgram(%q) = %q, want %q", args, got, want)
		}
	}
}

func TestPrepare(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libnetloom-ompi.so")
	os.WriteFile(lib, nil, 0o644)
	mlib := filepath.Join(filepath.Dir(lib), "libnetloom-mpich.so")
	os.WriteFile(mlib, nil, 0o644)
	env := []string{"PATH=" + os.Getenv("PATH"), "LD_PRELOAD=/x.so", "NETLOOM_DAEMON=old:1"}
	p, err := Prepare(context.Background(), Options{Daemon: "h:8467", Output: "out", MPI: "ompi", Lib: lib, Env: env, JobID: "j1"},
		[]string{"mpirun", "-np", "4", "./app"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Argv[0] != "mpirun" || !slices.Contains(p.Argv, "LD_PRELOAD="+lib+":/x.so") || !slices.Contains(p.Argv, "NETLOOM_DAEMON") ||
		!slices.Contains(p.Argv, "NETLOOM_OUTPUT") || !slices.Equal(p.Argv[len(p.Argv)-3:], []string{"-np", "4", "./app"}) {
		t.Errorf("argv %q", p.Argv)
	}
	if getenv(p.Env, "NETLOOM_DAEMON") != "h:8467" || getenv(p.Env, "NETLOOM_JOB_ID") != "j1" || !filepath.IsAbs(getenv(p.Env, "NETLOOM_OUTPUT")) {
		t.Errorf("env %q", p.Env)
	}
	if n := strings.Count(strings.Join(p.Env, "\n"), "NETLOOM_DAEMON="); n != 1 {
		t.Errorf("NETLOOM_DAEMON set %d times", n)
	}
	// Open MPI's monitoring: off unless asked for (--physical), and then
	// as the user set it if they did.
	if getenv(p.Env, "OMPI_MCA_pml_monitoring_enable") != "" {
		t.Errorf("Open MPI's monitoring turned on by default: %q", p.Env)
	}
	for _, c := range []struct {
		env      []string
		physical bool
		want     string
	}{{append(env, "OMPI_MCA_pml_monitoring_enable=2"), true, "2"}, {env, true, "1"}, {env, false, ""}} {
		p, err := Prepare(context.Background(), Options{MPI: "ompi", Lib: lib, Env: c.env, Physical: c.physical}, []string{"mpirun", "./app"})
		if err != nil || getenv(p.Env, "OMPI_MCA_pml_monitoring_enable") != c.want {
			t.Errorf("physical %v, env %q: monitoring %q, want %q (%v)", c.physical, c.env, getenv(p.Env, "OMPI_MCA_pml_monitoring_enable"), c.want, err)
		}
	}
	p, err = Prepare(context.Background(), Options{MPI: "mpich", Lib: mlib, Env: env}, []string{"mpiexec.mpich", "-n", "2", "./app"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Argv[:4], []string{"mpiexec.mpich", "-genv", "LD_PRELOAD", mlib + ":/x.so"}) || p.JobID == "" ||
		getenv(p.Env, "OMPI_MCA_pml_monitoring_enable") != "" {
		t.Errorf("mpich argv %q job %q", p.Argv, p.JobID)
	}
	p, err = Prepare(context.Background(), Options{MPI: "ompi", Lib: lib, Env: append(env, "SLURM_JOB_ID=77")}, []string{"srun", "-n", "2", "./app"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Argv[1] != "--export=ALL,LD_PRELOAD="+lib+":/x.so" || p.JobID != "" {
		t.Errorf("srun argv %q job %q", p.Argv, p.JobID)
	}
	if _, err := Prepare(context.Background(), Options{MPI: "lam", Lib: lib, Env: env}, []string{"mpirun"}); err == nil {
		t.Error("unknown MPI accepted")
	}
	if _, err := Prepare(context.Background(), Options{MPI: "ompi", Lib: "/nonexistent.so", Env: env}, []string{"mpirun"}); err == nil {
		t.Error("missing library accepted")
	}
}

// TestPrepareNCCL: a torchrun job gets the NCCL plugin through the
// environment its workers inherit, nothing preloaded and its command line
// unchanged; an MPI job with --nccl gets it beside the MPI agent, passed
// to the ranks as the NETLOOM_* settings are.
func TestPrepareNCCL(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"libnetloom-ompi.so", "libnetloom-nccl.so"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "NETLOOM_LIB_DIR=" + dir}
	argv := []string{"torchrun", "--nproc-per-node", "2", "train.py"}
	if got, err := Detect(context.Background(), argv, env); err != nil || got != NCCL {
		t.Errorf("Detect(torchrun) = %q, %v", got, err)
	}
	if got, _ := Detect(context.Background(), []string{"python3", "-m", "torch.distributed.run", "x.py"}, env); got != NCCL {
		t.Errorf("Detect(python3 -m torch.distributed.run) = %q", got)
	}
	p, err := Prepare(context.Background(), Options{Output: "out", Env: env, JobID: "j2"}, argv)
	if err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(dir, "libnetloom-nccl.so")
	if p.MPI != NCCL || p.Lib != plugin || !slices.Equal(p.Argv, argv) {
		t.Errorf("plan %s %s %q", p.MPI, p.Lib, p.Argv)
	}
	if getenv(p.Env, "NCCL_PROFILER_PLUGIN") != plugin || getenv(p.Env, "NETLOOM_JOB_ID") != "j2" || getenv(p.Env, "LD_PRELOAD") != "" ||
		!filepath.IsAbs(getenv(p.Env, "NETLOOM_OUTPUT")) {
		t.Errorf("env %q", p.Env)
	}
	p, err = Prepare(context.Background(), Options{MPI: "ompi", NCCL: true, Env: env, JobID: "j3"}, []string{"mpirun", "-np", "2", "./app"})
	if err != nil {
		t.Fatal(err)
	}
	if getenv(p.Env, "NCCL_PROFILER_PLUGIN") != plugin || !slices.Contains(p.Argv, "NCCL_PROFILER_PLUGIN") ||
		!slices.Contains(p.Argv, "LD_PRELOAD="+filepath.Join(dir, "libnetloom-ompi.so")) {
		t.Errorf("--nccl: env %q argv %q", p.Env, p.Argv)
	}
	os.Remove(plugin)
	if _, err := Prepare(context.Background(), Options{MPI: "ompi", NCCL: true, Env: env}, []string{"mpirun", "./app"}); err == nil ||
		!strings.Contains(err.Error(), "libnetloom-nccl.so") {
		t.Errorf("--nccl without the plugin: %v", err)
	}
}
