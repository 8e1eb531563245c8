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
	// Open MPI's monitoring: on for the physical traffic, unless the user
	// set it or asked for the application's view only.
	if getenv(p.Env, "OMPI_MCA_pml_monitoring_enable") != "1" {
		t.Errorf("Open MPI's monitoring not turned on: %q", p.Env)
	}
	for _, c := range []struct {
		env     []string
		logical bool
		want    string
	}{{append(env, "OMPI_MCA_pml_monitoring_enable=2"), false, "2"}, {env, true, ""}} {
		p, err := Prepare(context.Background(), Options{MPI: "ompi", Lib: lib, Env: c.env, Logical: c.logical}, []string{"mpirun", "./app"})
		if err != nil || getenv(p.Env, "OMPI_MCA_pml_monitoring_enable") != c.want {
			t.Errorf("logical %v, env %q: monitoring %q, want %q (%v)", c.logical, c.env, getenv(p.Env, "OMPI_MCA_pml_monitoring_enable"), c.want, err)
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
