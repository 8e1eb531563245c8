#!/bin/sh
# Runs one demo rank as if on fabric host n<1 + rank/2>, so the job's ranks
# map onto the simulated fabric's hosts (two ranks per host).
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
NETLOOM_NODE="n$((1 + r / 2))"
export NETLOOM_NODE
exec "$@"
