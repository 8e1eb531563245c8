/* Pipelined MAD engine: sends many LID-routed SMP/PMA queries over one
 * umad port with a window of outstanding requests, matches replies by TID,
 * and retries on timeout. One call per batch keeps cgo crossings rare. */
#ifndef NETLOOM_IB_MAD_H
#define NETLOOM_IB_MAD_H

#include <stdint.h>

enum {
	NL_CLASS_SMI = 0x01, /* LID-routed subnet management */
	NL_CLASS_SMI_DR = 0x81, /* directed-route subnet management */
	NL_DR_PATH = 64,        /* initial path bytes of a directed-route SMP */
	NL_CLASS_PERF = 0x04,
	NL_GET = 0x01,
	NL_SET = 0x02,
	NL_IN_LEN = 24,  /* request data bytes the caller fills */
	NL_OUT_LEN = 80, /* reply data bytes kept */
	NL_MAX_WINDOW = 4096,
};

/* Outcome of one query (nl_query.err). */
enum {
	NL_OK = 0,
	NL_ETIMEOUT = 1,   /* no reply after all retries (sys_errno: last umad status, if any) */
	NL_ESEND = 2,      /* umad_send failed (sys_errno says why) */
	NL_ESTATUS = 3,    /* reply carried a non-zero MAD status */
	NL_ECANCELED = 4,  /* the batch was canceled before this query ended */
};

struct nl_query {
	/* request, filled by the caller */
	uint16_t dlid;
	uint8_t mgmt_class;
	uint8_t method;
	uint16_t attr_id;
	uint16_t pad0;
	uint32_t attr_mod;
	uint8_t in[NL_IN_LEN]; /* copied to the start of the MAD data area */
	/* result */
	int32_t err;
	int32_t sys_errno;
	uint16_t status; /* MAD status of the reply */
	uint8_t tries;
	uint8_t pad1;
	uint32_t pad2;
	int64_t time_ns; /* CLOCK_REALTIME when the reply arrived */
	uint8_t out[NL_OUT_LEN];
	/* directed route (NL_CLASS_SMI_DR): hop count and the port to leave
	 * by at each hop, dr_path[1..dr_hops]; dlid is not used */
	uint8_t dr_hops;
	uint8_t pad3[7];
	uint8_t dr_path[NL_DR_PATH];
};

struct nl_port;

/* nl_open opens a umad port (ca NULL or "" and port 0: the first) and
 * registers SMI (LID-routed and directed-route) and PMA agents. On failure it returns NULL, writes a
 * message to err and sets *stage: 1 when no port could be opened (umad_init or umad_open_port
 * failed; *sys_errno is the error number, when there is one), 2 when the port opened but did not
 * take the agents, 3 when out of memory. */
struct nl_port *nl_open(const char *ca, int port, char *err, int errlen, int *stage, int *sys_errno);
void nl_close(struct nl_port *p);

/* nl_unregister_others unregisters every agent id on p's fd but p's own:
 * umad2sim keeps the agents of a closed port and hands its table to the
 * next port opened with that fd, so a process that opens and closes ports
 * (libibnetdisc does, per discovery) runs out of agents. Only for
 * umad2sim. */
void nl_unregister_others(struct nl_port *p);

/* nl_batch runs n queries with at most window in flight. It returns 0, or
 * -1 if canceled (unfinished queries get NL_ECANCELED). */
int nl_batch(struct nl_port *p, struct nl_query *q, int n, int window,
	     int timeout_ms, int retries);

/* nl_set_cancel(p, 1) makes a running nl_batch stop soon; it is safe from
 * another thread. Set 0 before starting a batch. */
void nl_set_cancel(struct nl_port *p, int v);

/* The PortInfo (and Mellanox ExtendedPortInfo) fields the topology needs,
 * decoded by libibmad in one call per port: a cgo call per field was a
 * third of loading a 6,400-host cache. */
struct nl_port_fields {
	uint32_t capmask, state;
	uint32_t width_active, width_supported, width_enabled;
	uint32_t speed_active, speed_supported, speed_enabled;
	uint32_t speed_ext_active, speed_ext_supported, speed_ext_enabled;
	uint32_t mlnx_speed_active, mlnx_speed_supported, mlnx_speed_enabled; /* 0 without ext */
};

/* nl_port_fields decodes info (a PortInfo, 64 bytes) and ext (a Mellanox
 * ExtendedPortInfo, or NULL) into f. */
void nl_port_fields(const void *info, const void *ext, struct nl_port_fields *f);

#endif
