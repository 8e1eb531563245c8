/* Netloom agents' snapshot builder (snapshot.h). */

#include <unistd.h>

#include "env.h"
#include "snapshot.h"
#include "wire.h"

void nl_snapshot_frame(Netloom__Agent__V1__Datagram *d, Netloom__Agent__V1__Process *p, const struct nl_ident *id,
		       uint64_t seq, int final, uint64_t dropped)
{
	netloom__agent__v1__datagram__init(d);
	d->version = NL_WIRE_VERSION;
	d->job_id = id->job_id;
	d->rank = id->rank;
	d->world_size = id->world;
	d->seq = seq;
	d->time_unix_ns = nl_unix_ns();
	d->final = final;
	d->start_unix_ns = id->start_unix_ns;
	d->interval_ns = (uint64_t)(id->interval_s * 1e9);

	netloom__agent__v1__process__init(p);
	p->node = id->node;
	p->host = id->host;
	p->pid = (uint32_t)getpid();
	p->mpi_library = id->library;
	p->program = id->program;
	p->user = id->user;
	nl_wire_read_proc(p);
	p->wall_seconds = (double)(nl_mono_ns() - id->wall_start_mono_ns) / 1e9;
	p->datagrams_dropped = dropped;
	d->process = p;
}

Netloom__Agent__V1__Traffic *nl_traffic0(Netloom__Agent__V1__Traffic *t, uint64_t bytes, uint64_t msgs)
{
	netloom__agent__v1__traffic__init(t);
	t->bytes = bytes;
	t->msgs = msgs;
	return t;
}

Netloom__Agent__V1__Traffic *nl_traffic(Netloom__Agent__V1__Traffic *t, uint64_t bytes, uint64_t msgs)
{
	return bytes || msgs ? nl_traffic0(t, bytes, msgs) : NULL;
}
