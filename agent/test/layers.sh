#!/bin/sh
# The agent's files call one way (agent/README.md, "Layout"): for every
# source file of the Open MPI build, the files whose symbols it uses, from
# the compiled objects (nm); fails on a circle (tsort), and prints the
# order from the top (life.c) down to the hot path's state (hot.c).
#   agent/test/layers.sh   (after make; uses build/ompi's generated code)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap "rm -rf $tmp" EXIT
cd "$here"
for f in src/*.c build/ompi/wrappers.c build/ompi/fntab.c; do
	n=$(basename "$f" .c)
	mpicc -std=c11 -O2 -fPIC -fno-plt -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/ompi -c "$f" -o "$tmp/$n.o"
	nm --defined-only "$tmp/$n.o" | awk -v n="$n" '$2 ~ /^[TDBRVC]$/ { print $3, n }' >>"$tmp/defs"
done
for o in "$tmp"/*.o; do
	n=$(basename "$o" .o)
	nm -u "$o" | awk '{ print $2 }' | sort -u | while read -r sym; do
		awk -v s="$sym" -v n="$n" '$1 == s && $2 != n { print n, $2 }' "$tmp/defs"
	done
done | sort -u >"$tmp/edges"
if ! tsort "$tmp/edges" >"$tmp/order" 2>"$tmp/loop"; then
	echo "agent layers: a circle between the agent's files:" >&2
	cat "$tmp/loop" >&2
	exit 1
fi
echo "agent layers: no circle; from the top: $(tr '\n' ' ' <"$tmp/order")"
