#!/bin/sh
# Builds what the GPU check (test/gpu/run.sh) takes to a GPU machine where
# nothing can be installed: the agent libraries (MPI and NCCL), protobuf-c's
# library beside them and the check's Go tests compiled (netloom itself needs
# the fabric libraries: `netloom report` reads the profiles run.sh brings back),
# all in bin/gpu (git-ignored; under 64 MiB).
#   test/gpu/prepare.sh && <copy or carry bin/gpu> && test/gpu/run.sh OUT
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
make -s -C agent >/dev/null
out=bin/gpu
rm -rf "$out"
mkdir -p "$out/lib"
cp bin/lib/libnetloom-ompi.so "$out/lib/"
[ -f bin/lib/libnetloom-nccl.so ] && cp bin/lib/libnetloom-nccl.so "$out/lib/"
cp -L "$(ldconfig -p | awk '/libprotobuf-c.so.1 / && /x86-64/ {print $NF; exit}')" "$out/lib/libprotobuf-c.so.1"
go test -c -o "$out/gpucheck" ./test/gpu
du -sh "$out"
