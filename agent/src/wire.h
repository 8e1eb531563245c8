/* Netloom agents' transport (wire.c): where the daemon listens, a snapshot
 * sent as signed UDP datagrams in chunks, the offline profile file, and the
 * /proc figures every snapshot carries. Shared by the MPI agent (report.c)
 * and the NCCL plugin (../nccl/plugin.c): it takes a filled Datagram and
 * knows nothing of MPI or NCCL (no mpi.h, nl.h or agent.h here).
 *
 * Called from a reporting thread or the final report, one call at a time:
 * the daemon's address and the socket are this file's own state. Nothing
 * here blocks except the final report's short wait for socket space. */
#ifndef NL_WIRE_H
#define NL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "netloom/agent/v1/agent.pb-c.h"

#define NL_WIRE_VERSION 1          /* Datagram.version */
#define NL_DGRAM_LIMIT (63 * 1024) /* chunks stay under 64 KiB */
#define NL_DGRAM_MAX 65507         /* the largest UDP payload over IPv4 */

/* nl_wire_init reads NETLOOM_DGRAM_LIMIT (256..64512, tests force chunking
 * with it); call it once before the first nl_wire_send. */
void nl_wire_init(void);

/* nl_wire_resolve finds the daemon's address: NETLOOM_DAEMON (host:port or
 * [v6]:port), else the first line of NETLOOM_DAEMON_FILE,
 * $XDG_RUNTIME_DIR/netloom/agent-address or /run/netloom/agent-address
 * (read again at each call: the daemon may start after the job), and opens
 * a non-blocking socket for it. 0: there is one. */
int nl_wire_resolve(void);

/* nl_wire_send sends d, a whole snapshot, as datagrams of at most the
 * chunk limit: chunk 0 carries the process, functions, regions, connections and the GPU
 * section; the node rows, then the peer rows fill the chunks in order, and
 * every chunk carries the header. Each is signed when MUNGE gives a
 * credential (auth.h; the signer is started here, with d's job id and
 * rank). A datagram that cannot be sent is dropped, never waited for,
 * except when d->final: then it waits for socket space at most 4 x 50 ms.
 * d's chunk fields and credential are used and left as they were. Returns
 * the datagrams dropped (none when no daemon address is known: nothing is
 * sent then). */
uint64_t nl_wire_send(Netloom__Agent__V1__Datagram *d);

/* nl_wire_write_profile writes OUTPUT_DIR/<d->job_id>/rank-<d->rank>.pb:
 * d as one Datagram (chunk 0 of 1), preceded by its length as a varint
 * (protobuf's delimited format), through a temporary file renamed into
 * place. jobdir (cap bytes, 1400 are enough) receives OUTPUT_DIR/<job>.
 * Says on stderr ("netloom: ...") what failed. Returns -1 when the folder
 * could not be made or memory was short, else 0 (the folder is there, the
 * file written or its failure said). */
int nl_wire_write_profile(const char *output_dir, const Netloom__Agent__V1__Datagram *d, char *jobdir, size_t cap);

/* nl_wire_read_proc fills p's CPU, memory and I/O fields from /proc/self. */
void nl_wire_read_proc(Netloom__Agent__V1__Process *p);

#endif
