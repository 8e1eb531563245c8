#!/bin/sh
# Names each rank's fabric host: NETLOOM_NODE=n<base + rank / ppn>.
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
NETLOOM_NODE="n$((${NL_NODE_BASE:-1} + r / ${NL_PPN:-2}))"
export NETLOOM_NODE
exec "$@"
