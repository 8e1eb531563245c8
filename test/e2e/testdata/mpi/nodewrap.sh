#!/bin/sh
# Runs one MPI rank with the Netloom agent preloaded ($NL_TEST_LIB, when set)
# on a fake node: NETLOOM_NODE=node<rank / $NL_TEST_PPN>, so that ranks on one
# machine look spread over several nodes.
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
NETLOOM_NODE="node$((r / ${NL_TEST_PPN:-2}))"
export NETLOOM_NODE
if [ -n "$NL_TEST_LIB" ]; then
	LD_PRELOAD="$NL_TEST_LIB${LD_PRELOAD:+:$LD_PRELOAD}"
	export LD_PRELOAD
fi
exec "$@"
