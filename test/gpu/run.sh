#!/bin/sh
# The GPU check of issue 32, on a machine with one GPU, CUDA, a non-CUDA-aware
# Open MPI (mpicc, mpirun), NCCL with nccl.h, nvcc and PyTorch with NCCL
# (docs/gpu.md, "The GPU check"; nothing is installed there), run as
# root from the repository root with bin/gpu made by test/gpu/prepare.sh:
#   test/gpu/run.sh OUT
# 1. paths.cu, 3 ranks, without then with the agent: same output; the
#    profile's bytes per path and buffer kind (gpu_test.go, TestBufferPaths);
# 2. a CPU-only job under the agent: no GPU section (TestCPUOnly);
# 3. nccl_ops.py, one PyTorch NCCL rank with the NCCL plugin (TestNCCL);
# 4. the three profiles kept in OUT (profile-NAME.tgz, for netloom report);
# 5. bench/agent/gpu.sh: the agent's cost on host buffers in a CUDA process.
# Everything it made lands in OUT; the exit status is the checks'.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${1:?usage: test/gpu/run.sh OUT}
mkdir -p "$out"
bin=$root/bin/gpu
export LD_LIBRARY_PATH="$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
chk=$(mktemp -d)
status=0
step() { echo "== $*"; }
fail() { echo "FAIL: $*"; status=1; }
mpiinc=$(mpicc --showme:incdirs 2>/dev/null | awk '{print $1}')
mpilib=$(mpicc --showme:libdirs 2>/dev/null | awk '{print $1}')
agent="-x LD_PRELOAD=$bin/lib/libnetloom-ompi.so -x LD_LIBRARY_PATH -x NETLOOM_DAEMON=127.0.0.1:9"

step "machine"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mpirun --version | head -1
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' 2>&1 | tail -1

step "1. paths.cu: buffers of every kind, 3 ranks"
nvcc -O2 -o "$chk/paths.bin" test/gpu/paths.cu -I"$mpiinc" -L"$mpilib" -lmpi || fail "nvcc paths.cu"
mpirun --oversubscribe -np 3 "$chk/paths.bin" >"$chk/plain.out" 2>"$out/paths-plain.err" || fail "paths.cu without the agent"
mpirun --oversubscribe -np 3 $agent -x NETLOOM_JOB_ID=paths -x NETLOOM_OUTPUT="$chk/paths" "$chk/paths.bin" >"$chk/agent.out" 2>"$out/paths-agent.err" || fail "paths.cu with the agent"
sort "$chk/plain.out" >"$out/paths-plain.out"
sort "$chk/agent.out" >"$out/paths-agent.out"
cat "$out/paths-agent.out"
cmp -s "$out/paths-plain.out" "$out/paths-agent.out" || fail "the program's output differs with the agent"
cat "$out/paths-agent.err"

step "2. a CPU-only job"
cat >"$chk/ring.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	int r, n, x = 1, y = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	MPI_Sendrecv(&x, 1, MPI_INT, (r + 1) % n, 0, &y, 1, MPI_INT, (r + n - 1) % n, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	printf("rank %d got %d\n", r, y);
	MPI_Finalize();
	return 0;
}
C
mpicc -o "$chk/ring" "$chk/ring.c" || fail "mpicc ring.c"
mpirun --oversubscribe -np 2 $agent -x NETLOOM_JOB_ID=cpu -x NETLOOM_OUTPUT="$chk/cpu" "$chk/ring" || fail "ring with the agent"

step "3. NCCL from PyTorch, one rank, with libnetloom-nccl.so"
if [ -f "$bin/lib/libnetloom-nccl.so" ]; then
	NCCL_PROFILER_PLUGIN="$bin/lib/libnetloom-nccl.so" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,COLL NETLOOM_DEBUG=1 NETLOOM_JOB_ID=nccl \
		NETLOOM_OUTPUT="$chk/nccl" NETLOOM_DAEMON=127.0.0.1:9 RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 \
		timeout 300 python3 test/gpu/nccl_ops.py >"$out/nccl.out" 2>"$out/nccl.err" || fail "nccl_ops.py"
	grep -v 'NCCL INFO' "$out/nccl.out"
	# NCCL's own log (NCCL_DEBUG_SUBSYS=COLL: a line per call) and the plugin's, for TestNCCL
	[ -d "$chk/nccl" ] && cat "$out/nccl.out" "$out/nccl.err" >"$chk/nccl/log.txt"
	grep -i 'profil\|netloom' "$out/nccl.err" | head -20
else
	fail "no libnetloom-nccl.so in $bin/lib"
fi

step "4. the checks"
NETLOOM_GPU_CHECK="$chk" "$bin/gpucheck" -test.v -test.count=1 2>&1 | tee "$out/gpucheck.out" | tail -60
grep -q '^--- FAIL' "$out/gpucheck.out" && fail "gpu checks"
grep -q '^--- SKIP' "$out/gpucheck.out" && fail "a gpu check skipped on the GPU machine"
for p in paths cpu nccl; do
	[ -d "$chk/$p" ] || continue
	tar -C "$chk" -czf "$out/profile-$p.tgz" "$p"
done

step "5. bench/agent/gpu.sh"
if [ "${GPU_BENCH:-1}" = 1 ]; then
	NETLOOM_AGENT_LIB="$bin/lib/libnetloom-ompi.so" bench/agent/gpu.sh "${GPU_BENCH_ITERS:-200000}" "${GPU_BENCH_ROUNDS:-5}" 2>&1 | tee "$out/bench-gpu.txt"
fi
rm -rf "$chk"
echo "== status $status"
exit $status
