/* Netloom agents' connections (conn.c): the process's TCP connections,
 * for the daemon to tell which job, and which rank pair, a flow sampled by
 * a switch is (docs/sflow.md, "Flows to jobs"). Read at the snapshot, on
 * the reporting thread, never on the MPI hot path. MPI-free, as
 * snapshot.h. */
#ifndef NL_CONN_H
#define NL_CONN_H

#include "netloom/agent/v1/agent.pb-c.h"

#define NL_CONN_MAX 64 /* connections a snapshot carries at most (the daemon's limit too) */

/* nl_conn_take sets d's connections: the process's established TCP
 * connections, the first NL_CONN_MAX of them in file-descriptor order, with
 * connections_truncated set when there were more; loopback ones (never on
 * a switch) left out. Each socket of the process (its fds listed from
 * /proc/self/fd) is asked, read-only, for its protocol, its TCP state and
 * its two ends (getsockopt SO_PROTOCOL and TCP_INFO, getsockname,
 * getpeername): about a microsecond a socket, where reading
 * /proc/net/tcp walks the kernel's whole connection table (4.5 ms a read
 * on the machine this was built on, whatever the process holds; docs/sflow.md).
 * d points into this file's own storage, valid until the next call; one
 * call at a time (the reporting thread, then the final report after
 * joining it). */
void nl_conn_take(Netloom__Agent__V1__Datagram *d);

#endif
