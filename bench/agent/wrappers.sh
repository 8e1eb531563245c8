#!/bin/sh
# The agent's code of two builds, function by function, instruction by
# instruction (objdump, addresses masked): every MPI wrapper (MPI_*, the
# Fortran mpi_* entry points) and every function of the agent's rooms
# (nl_*), in both libraries. Prints the count of identical functions and
# names every one that differs or exists in one build only.
#   bench/agent/wrappers.sh BASE_LIBDIR LIBDIR
# (bench/agent/run.sh with BASE=<rev> builds BASE_LIBDIR and runs it.)
set -eu
[ $# -eq 2 ] || { echo "usage: $0 BASE_LIBDIR LIBDIR" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# one file per function: its instructions, addresses and RIP offsets masked
split_fns() { # lib outdir
	mkdir -p "$2"
	objdump -d --no-show-raw-insn "$1" | awk -v dir="$2" '
		/^[0-9a-f]+ <[^>]+>:$/ { name = $2; gsub(/[<>:]/, "", name); out = (name ~ /^(MPI_|mpi_|nl_)/ && name !~ /@/) ? dir "/" name : ""; next }
		/^$/ { out = ""; next }
		out != "" { $1 = ""; print >> out }' 
	for f in "$2"/*; do
		sed -E 's/[0-9a-f]+ <[^>]*>/ADDR/g; s/0x[0-9a-f]+\(%rip\)/RIP/g; s/# .*//; s/[[:space:]]+$//' "$f" >"$f.m" && mv "$f.m" "$f"
	done
}
status=0
for lib in ompi mpich; do
	split_fns "$1/libnetloom-$lib.so" "$tmp/base-$lib"
	split_fns "$2/libnetloom-$lib.so" "$tmp/this-$lib"
	same=0 wsame=0 wtotal=0 diff=""
	for f in "$tmp/this-$lib"/*; do
		n=$(basename "$f")
		case $n in MPI_* | mpi_*) wtotal=$((wtotal + 1)) ;; esac
		if [ -f "$tmp/base-$lib/$n" ] && cmp -s "$f" "$tmp/base-$lib/$n"; then
			same=$((same + 1))
			case $n in MPI_* | mpi_*) wsame=$((wsame + 1)) ;; esac
		else
			diff="$diff $n"
		fi
	done
	for f in "$tmp/base-$lib"/*; do
		[ -f "$tmp/this-$lib/$(basename "$f")" ] || diff="$diff $(basename "$f")(base-only)"
	done
	echo "$lib: wrappers identical $wsame of $wtotal; all functions identical $same of $(ls "$tmp/this-$lib" | wc -l)"
	case $diff in *MPI_* | *mpi_*) status=1 ;; esac
	[ -z "$diff" ] || echo "$lib: differ:$diff"
done
exit $status
