#!/bin/sh
# conn.c against the kernel's own view of the process's sockets, and its
# cost per snapshot (conn_check.c).
#   agent/test/conn.sh [N ...]   (after make; N: connections, default 4 and 40)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$here"
gcc -std=c11 -Wall -Wextra -Werror -O2 -D_GNU_SOURCE -Isrc -Ibuild/nccl -o "$tmp/conn_check" test/conn_check.c src/conn.c \
	build/nccl/netloom/agent/v1/agent.pb-c.c -lprotobuf-c
for n in ${@:-4 40}; do
	"$tmp/conn_check" "$n"
done
