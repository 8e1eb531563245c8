#include "mad.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/mad.h>
#include <infiniband/umad.h>

#define MAD_SIZE 256
#define MAD_DATA_OFFS 64 /* SMP (LID-routed) and PMA data both start here */
#define QP1_QKEY 0x80010000u
#define SLOT_BITS 12     /* low TID bits name the in-flight slot */
#define DR_PATH_OFFS 128 /* a directed-route SMP's initial path */

struct slot {
	int idx; /* query index, -1 when free */
	uint32_t tid;
	int64_t deadline; /* CLOCK_MONOTONIC ns */
};

struct nl_port {
	int fd;
	int agent_smi;
	int agent_dr;
	int agent_perf;
	int cancel;
	uint32_t gen;
	size_t buf_size; /* umad_size() + MAD_SIZE, once a port is open */
	void *send_buf;
	void *recv_buf;
	struct slot slots[NL_MAX_WINDOW];
};

static int64_t now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void put16(uint8_t *b, uint16_t v)
{
	b[0] = v >> 8;
	b[1] = v;
}

static void put32(uint8_t *b, uint32_t v)
{
	b[0] = v >> 24;
	b[1] = v >> 16;
	b[2] = v >> 8;
	b[3] = v;
}

static uint32_t get32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

struct nl_port *nl_open(const char *ca, int port, char *err, int errlen, int *stage, int *sys_errno)
{
	struct nl_port *p;

	*stage = 0;
	*sys_errno = 0;

	if (umad_init() < 0) {
		*stage = 1;
		snprintf(err, errlen, "umad_init failed");
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		*stage = 3;
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->fd = umad_open_port(ca && *ca ? ca : NULL, port);
	if (p->fd < 0) {
		*stage = 1;
		*sys_errno = -p->fd;
		snprintf(err, errlen, "umad_open_port(%s, %d): %s", ca && *ca ? ca : "(first)", port,
			 strerror(-p->fd));
		goto fail;
	}
	/* umad_size() grows (pkey_index) once the first port of the process is
	 * open, so the buffers are sized after that. */
	p->buf_size = umad_size() + MAD_SIZE;
	p->send_buf = calloc(1, p->buf_size);
	p->recv_buf = calloc(1, p->buf_size);
	if (!p->send_buf || !p->recv_buf) {
		*stage = 3;
		snprintf(err, errlen, "out of memory");
		umad_close_port(p->fd);
		goto fail;
	}
	p->agent_smi = umad_register(p->fd, NL_CLASS_SMI, 1, 0, NULL);
	p->agent_dr = umad_register(p->fd, NL_CLASS_SMI_DR, 1, 0, NULL);
	p->agent_perf = umad_register(p->fd, NL_CLASS_PERF, 1, 0, NULL);
	if (p->agent_smi < 0 || p->agent_dr < 0 || p->agent_perf < 0) {
		*stage = 2;
		snprintf(err, errlen, "umad_register: SMI %d, directed-route SMI %d, PMA %d",
			 p->agent_smi, p->agent_dr, p->agent_perf);
		umad_close_port(p->fd);
		goto fail;
	}
	return p;
fail:
	free(p->send_buf);
	free(p->recv_buf);
	free(p);
	return NULL;
}

void nl_close(struct nl_port *p)
{
	if (!p)
		return;
	/* umad2sim keeps agent ids per process until unregistered. */
	umad_unregister(p->fd, p->agent_smi);
	umad_unregister(p->fd, p->agent_dr);
	umad_unregister(p->fd, p->agent_perf);
	umad_close_port(p->fd);
	free(p->send_buf);
	free(p->recv_buf);
	free(p);
}

void nl_set_cancel(struct nl_port *p, int v)
{
	__atomic_store_n(&p->cancel, v, __ATOMIC_RELAXED);
}

/* send_query sends q from slot s; on failure it records the error and
 * returns -1 (the slot stays free). */
static int send_query(struct nl_port *p, struct nl_query *q, int idx, int s, int timeout_ms,
		      int64_t now)
{
	uint8_t *mad;
	uint32_t tid;
	int dr = q->mgmt_class == NL_CLASS_SMI_DR;
	int smi = q->mgmt_class == NL_CLASS_SMI || dr;
	int agent = dr ? p->agent_dr : smi ? p->agent_smi : p->agent_perf;
	int rc;

	memset(p->send_buf, 0, p->buf_size);
	/* A directed-route SMP goes to the permissive LID. */
	umad_set_addr(p->send_buf, dr ? 0xffff : q->dlid, smi ? 0 : 1, 0, smi ? 0 : QP1_QKEY);
	mad = umad_get_mad(p->send_buf);
	p->gen++;
	tid = (p->gen << SLOT_BITS) | (uint32_t)s;
	mad[0] = 1; /* base version */
	mad[1] = q->mgmt_class;
	mad[2] = 1; /* class version */
	mad[3] = q->method;
	put32(mad + 12, tid); /* low half of the TID; the kernel owns the high half */
	put16(mad + 16, q->attr_id);
	put32(mad + 20, q->attr_mod);
	memcpy(mad + MAD_DATA_OFFS, q->in, NL_IN_LEN);
	if (dr) {
		mad[6] = 0;          /* hop pointer */
		mad[7] = q->dr_hops; /* hop count */
		put16(mad + 32, 0xffff); /* DrSLID: permissive, both ends routed */
		put16(mad + 34, 0xffff); /* DrDLID */
		memcpy(mad + DR_PATH_OFFS, q->dr_path, NL_DR_PATH);
	}
	q->tries++;
	rc = umad_send(p->fd, agent, p->send_buf, MAD_SIZE, timeout_ms, 0);
	if (rc < 0) {
		q->err = NL_ESEND;
		q->sys_errno = rc == -1 ? errno : -rc;
		return -1;
	}
	p->slots[s].idx = idx;
	p->slots[s].tid = tid;
	p->slots[s].deadline = now + (int64_t)timeout_ms * 1000000;
	return 0;
}

int nl_batch(struct nl_port *p, struct nl_query *q, int n, int window, int timeout_ms,
	     int retries)
{
	int next = 0, active = 0, i, s, free_top = 0;
	int free_list[NL_MAX_WINDOW];
	int64_t next_check = INT64_MAX;

	if (window < 1)
		window = 1;
	if (window > NL_MAX_WINDOW)
		window = NL_MAX_WINDOW;
	if (timeout_ms < 1)
		timeout_ms = 1;
	for (i = 0; i < n; i++) {
		q[i].err = NL_ETIMEOUT;
		q[i].sys_errno = 0;
		q[i].status = 0;
		q[i].tries = 0;
		q[i].time_ns = 0;
	}
	for (s = window - 1; s >= 0; s--) {
		p->slots[s].idx = -1;
		free_list[free_top++] = s;
	}

	while (next < n || active > 0) {
		int64_t now = now_ns(CLOCK_MONOTONIC);
		int wait_ms, len, rc;

		if (__atomic_load_n(&p->cancel, __ATOMIC_RELAXED)) {
			for (s = 0; s < window; s++)
				if (p->slots[s].idx >= 0)
					q[p->slots[s].idx].err = NL_ECANCELED;
			for (i = next; i < n; i++)
				q[i].err = NL_ECANCELED;
			return -1;
		}
		while (free_top > 0 && next < n) {
			s = free_list[--free_top];
			if (send_query(p, &q[next], next, s, timeout_ms, now) < 0) {
				free_list[free_top++] = s;
			} else {
				active++;
				if (p->slots[s].deadline < next_check)
					next_check = p->slots[s].deadline;
			}
			next++;
		}
		if (now >= next_check) {
			/* Expire overdue queries: retry or give up. */
			next_check = INT64_MAX;
			for (s = 0; s < window; s++) {
				struct slot *sl = &p->slots[s];
				if (sl->idx < 0)
					continue;
				if (sl->deadline <= now) {
					struct nl_query *t = &q[sl->idx];
					int idx = sl->idx;
					sl->idx = -1;
					active--;
					if (t->tries <= retries &&
					    send_query(p, t, idx, s, timeout_ms, now) == 0) {
						active++;
					} else {
						if (t->err != NL_ESEND)
							t->err = NL_ETIMEOUT;
						free_list[free_top++] = s;
						continue;
					}
				}
				if (sl->deadline < next_check)
					next_check = sl->deadline;
			}
			continue;
		}
		if (active == 0)
			continue;
		wait_ms = (int)((next_check - now + 999999) / 1000000);
		len = MAD_SIZE;
		rc = umad_recv(p->fd, p->recv_buf, &len, wait_ms);
		if (rc < 0)
			continue; /* timeout or interrupted: the expiry pass handles it */
		{
			uint8_t *mad = umad_get_mad(p->recv_buf);
			uint32_t tid = get32(mad + 12);
			struct slot *sl;
			struct nl_query *t;

			s = tid & ((1u << SLOT_BITS) - 1);
			if (s >= window)
				continue;
			sl = &p->slots[s];
			if (sl->idx < 0 || sl->tid != tid)
				continue; /* late reply to an attempt we gave up on */
			t = &q[sl->idx];
			if (umad_status(p->recv_buf) != 0) {
				/* The kernel (or umad2sim) failed the send, usually a
				 * timeout: retry now. */
				int idx = sl->idx;
				t->sys_errno = umad_status(p->recv_buf);
				sl->idx = -1;
				active--;
				if (t->tries <= retries &&
				    send_query(p, t, idx, s, timeout_ms, now_ns(CLOCK_MONOTONIC)) == 0) {
					active++;
					if (sl->deadline < next_check)
						next_check = sl->deadline;
				} else {
					if (t->err != NL_ESEND)
						t->err = NL_ETIMEOUT;
					free_list[free_top++] = s;
				}
				continue;
			}
			t->status = (uint16_t)(mad[4] << 8 | mad[5]);
			/* Bit 15 is the direction bit of directed-route SMPs. */
			t->err = (t->status & 0x7fff) ? NL_ESTATUS : NL_OK;
			t->time_ns = now_ns(CLOCK_REALTIME);
			memcpy(t->out, mad + MAD_DATA_OFFS, NL_OUT_LEN);
			sl->idx = -1;
			active--;
			free_list[free_top++] = s;
		}
	}
	return 0;
}

void nl_unregister_others(struct nl_port *p)
{
	int id;

	for (id = 0; id < 64; id++)
		if (id != p->agent_smi && id != p->agent_dr && id != p->agent_perf)
			umad_unregister(p->fd, id);
}

void nl_port_fields(const void *info, const void *ext, struct nl_port_fields *f)
{
	void *i = (void *)info, *e = (void *)ext;

	f->capmask = mad_get_field(i, 0, IB_PORT_CAPMASK_F);
	f->state = mad_get_field(i, 0, IB_PORT_STATE_F);
	f->width_active = mad_get_field(i, 0, IB_PORT_LINK_WIDTH_ACTIVE_F);
	f->width_supported = mad_get_field(i, 0, IB_PORT_LINK_WIDTH_SUPPORTED_F);
	f->width_enabled = mad_get_field(i, 0, IB_PORT_LINK_WIDTH_ENABLED_F);
	f->speed_active = mad_get_field(i, 0, IB_PORT_LINK_SPEED_ACTIVE_F);
	f->speed_supported = mad_get_field(i, 0, IB_PORT_LINK_SPEED_SUPPORTED_F);
	f->speed_enabled = mad_get_field(i, 0, IB_PORT_LINK_SPEED_ENABLED_F);
	f->speed_ext_active = mad_get_field(i, 0, IB_PORT_LINK_SPEED_EXT_ACTIVE_F);
	f->speed_ext_supported = mad_get_field(i, 0, IB_PORT_LINK_SPEED_EXT_SUPPORTED_F);
	f->speed_ext_enabled = mad_get_field(i, 0, IB_PORT_LINK_SPEED_EXT_ENABLED_F);
	f->mlnx_speed_active = e ? mad_get_field(e, 0, IB_MLNX_EXT_PORT_LINK_SPEED_ACTIVE_F) : 0;
	f->mlnx_speed_supported = e ? mad_get_field(e, 0, IB_MLNX_EXT_PORT_LINK_SPEED_SUPPORTED_F) : 0;
	f->mlnx_speed_enabled = e ? mad_get_field(e, 0, IB_MLNX_EXT_PORT_LINK_SPEED_ENABLED_F) : 0;
}
