/* The NCCL profiler plugin interface, as much of it as libnetloom-nccl.so
 * uses: Netloom's own declarations, written from the layout NCCL 2.28
 * defines in src/include/plugin/nccl_profiler.h, profiler/profiler_v4.h and
 * profiler/profiler_v5.h, and the network plugins' event payloads of the
 * IB and socket transports (net_ib_v1.h, net_socket_v1.h). NCCL 2.28.9 looks
 * for ncclProfiler_v5 first (its newest), then v4, ... v1. Names are ours;
 * sizes, order and values are NCCL's (the static assertions below pin the
 * offsets of everything read). Building needs no NCCL or CUDA header. */
#ifndef NL_NCCL_PROFILER_H
#define NL_NCCL_PROFILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ncclResult_t (an enum: an int) */
typedef int nl_nccl_result;
#define NL_NCCL_SUCCESS 0
#define NL_NCCL_SYSTEM_ERROR 2

/* ncclDebugLogger_t: level (an enum), flags, file, line, format */
typedef void (*nl_nccl_logger)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);

/* Event types: the descriptor's type, and the bits of the activation mask
 * init returns. Types 1 << 8 and up exist from v5 on. */
enum {
	NL_NCCL_GROUP = 1 << 0,         /* a group of operations (v4; v5 still sends it) */
	NL_NCCL_COLL = 1 << 1,          /* a collective, as NCCL enqueues it */
	NL_NCCL_P2P = 1 << 2,           /* a send or a receive */
	NL_NCCL_PROXY_OP = 1 << 3,      /* a proxy thread's work for one channel and peer */
	NL_NCCL_PROXY_STEP = 1 << 4,    /* one network transfer of a proxy operation */
	NL_NCCL_PROXY_CTRL = 1 << 5,    /* the proxy thread's own state */
	NL_NCCL_KERNEL_CH = 1 << 6,     /* a channel of the operation's kernel, on the GPU */
	NL_NCCL_NET_PLUGIN = 1 << 7,    /* an event of the network transport (IB, socket) */
	NL_NCCL_GROUP_API = 1 << 8,     /* v5: ncclGroupStart/End */
	NL_NCCL_COLL_API = 1 << 9,      /* v5: the collective's API call */
	NL_NCCL_P2P_API = 1 << 10,      /* v5: ncclSend/ncclRecv's API call */
	NL_NCCL_KERNEL_LAUNCH = 1 << 11 /* v5: a kernel launch */
};

/* Event states (recordEventState). The proxy steps' report their transfer
 * size in nl_nccl_state_args.proxy_step. */
enum {
	NL_NCCL_STEP_SEND_GPU_WAIT = 8,
	NL_NCCL_STEP_SEND_WAIT = 9,
	NL_NCCL_STEP_RECV_WAIT = 10,
	NL_NCCL_STEP_RECV_FLUSH_WAIT = 11,
	NL_NCCL_STEP_RECV_GPU_WAIT = 12,
	NL_NCCL_PROXY_OP_IN_PROGRESS = 19, /* v4 and up */
	NL_NCCL_STEP_SEND_PEER_WAIT = 20,  /* v4 and up */
	NL_NCCL_NET_UPDATE = 21,
	NL_NCCL_KERNEL_CH_STOP = 22,
	NL_NCCL_GROUP_START_API_STOP = 23, /* v5 */
	NL_NCCL_GROUP_END_API_START = 24   /* v5 */
};

/* The members of the descriptor's union both versions share (v5 adds a
 * parent group pointer at the end of coll and p2p, which is not read). */
#define NL_NCCL_COLL_FIELDS                                                            \
	uint64_t seq_number;                                                           \
	const char *func;     /* "AllReduce", ... */                                   \
	const void *send_buf;                                                          \
	void *recv_buf;                                                                \
	size_t count;         /* elements (AllGather, ReduceScatter: per rank) */      \
	int root;                                                                      \
	const char *datatype; /* "ncclFloat32", ... */                                 \
	uint8_t nchannels;                                                             \
	uint8_t nwarps;                                                                \
	const char *algo;     /* "RING", "TREE", ... */                                \
	const char *proto     /* "SIMPLE", "LL", "LL128" */
#define NL_NCCL_P2P_FIELDS                                                             \
	const char *func; /* "Send", "Recv" */                                         \
	void *buf;                                                                     \
	const char *datatype;                                                          \
	size_t count;                                                                  \
	int peer;                                                                      \
	uint8_t nchannels
#define NL_NCCL_COMMON_MEMBERS                                                         \
	struct {                                                                       \
		pid_t pid;       /* the process whose operation it is (PXN: another) */ \
		uint8_t channel;                                                       \
		int peer;        /* the peer's rank in the communicator */             \
		int nsteps;                                                            \
		int chunk_size;                                                        \
		int is_send;     /* 1: the net transport's send side */                \
	} proxy_op;                                                                    \
	struct {                                                                       \
		int step;                                                              \
	} proxy_step;                                                                  \
	struct {                                                                       \
		uint8_t channel;                                                       \
		uint64_t ptimer; /* the GPU's globaltimer at the start */              \
	} kernel_ch;                                                                   \
	struct {                                                                       \
		int64_t id;      /* the payload's type (bits 16..31) and version */    \
		void *data;      /* the transport's payload */                         \
	} net

/* ncclProfilerEventDescr_v5_t */
struct nl_nccl_descr_v5 {
	uint64_t type;
	void *parent; /* the parent event's handle (as this plugin returned it) */
	int rank;     /* the rank in the communicator */
	union {
		struct {
			int graph_captured;
			int group_depth;
		} group_api;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			int root;
			void *stream;
			bool graph_captured;
		} coll_api;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			void *stream;
			bool graph_captured;
		} p2p_api;
		struct {
			void *stream;
		} kernel_launch;
		struct {
			NL_NCCL_COLL_FIELDS;
			void *parent_group;
		} coll;
		struct {
			NL_NCCL_P2P_FIELDS;
			void *parent_group;
		} p2p;
		NL_NCCL_COMMON_MEMBERS;
	};
};

/* ncclProfilerEventDescr_v4_t */
struct nl_nccl_descr_v4 {
	uint8_t type;
	void *parent;
	int rank;
	union {
		struct {
			NL_NCCL_COLL_FIELDS;
		} coll;
		struct {
			NL_NCCL_P2P_FIELDS;
		} p2p;
		NL_NCCL_COMMON_MEMBERS;
	};
};

/* ncclProfilerEventStateArgs_v4_t and _v5_t (the same 8 bytes) */
union nl_nccl_state_args {
	struct {
		size_t trans_size; /* the step's bytes */
	} proxy_step;
	struct {
		int appended_proxy_ops;
	} proxy_ctrl;
	struct {
		void *data;
	} net;
	struct {
		uint64_t ptimer;
	} kernel_ch;
};

/* ncclProfiler_v5_t */
struct nl_nccl_profiler_v5 {
	const char *name;
	nl_nccl_result (*init)(void **context, uint64_t comm_id, int *activation_mask, const char *comm_name, int nnodes,
	                       int nranks, int rank, nl_nccl_logger log);
	nl_nccl_result (*start_event)(void *context, void **handle, struct nl_nccl_descr_v5 *descr);
	nl_nccl_result (*stop_event)(void *handle);
	nl_nccl_result (*record_event_state)(void *handle, int state, union nl_nccl_state_args *args);
	nl_nccl_result (*finalize)(void *context);
};

/* ncclProfiler_v4_t: init's arguments in another order */
struct nl_nccl_profiler_v4 {
	const char *name;
	nl_nccl_result (*init)(void **context, int *activation_mask, const char *comm_name, uint64_t comm_hash, int nnodes,
	                       int nranks, int rank, nl_nccl_logger log);
	nl_nccl_result (*start_event)(void *context, void **handle, struct nl_nccl_descr_v4 *descr);
	nl_nccl_result (*stop_event)(void *handle);
	nl_nccl_result (*record_event_state)(void *handle, int state, union nl_nccl_state_args *args);
	nl_nccl_result (*finalize)(void *context);
};

/* Network events: descr.net.id is the payload's type | version. */
#define NL_NCCL_NET_TYPE_MASK 0xffff0000u
#define NL_NCCL_NET_VER_MASK 0x0000ffffu
#define NL_NCCL_NET_TYPE_IB (1u << 16)
#define NL_NCCL_NET_TYPE_SOCK (2u << 16)
#define NL_NCCL_NET_IB_QP 1     /* the IB payload's event: a work request posted on a queue pair */
#define NL_NCCL_NET_SOCK_OP 1   /* the socket payload's event: a socket operation */

/* the IB transport's payload, version 1 (NCCL 2.26 and up) */
struct nl_nccl_net_ib_v1 {
	uint8_t type;
	union {
		struct {
			int device;
			uint64_t wr_id;
			int opcode;     /* the ibv_wr_opcode */
			int qp_num;
			size_t length;  /* the work request's bytes */
		} qp;
	};
};

/* the socket transport's payload, version 1 */
struct nl_nccl_net_sock_v1 {
	uint8_t type;
	union {
		struct {
			int fd;
			int op;
			size_t length;
		} sock;
	};
};

/* The offsets NCCL 2.28's headers give on x86-64 and aarch64 (LP64). */
_Static_assert(sizeof(void *) == 8, "LP64 only");
_Static_assert(offsetof(struct nl_nccl_descr_v5, parent) == 8, "v5 parent");
_Static_assert(offsetof(struct nl_nccl_descr_v5, rank) == 16, "v5 rank");
_Static_assert(offsetof(struct nl_nccl_descr_v5, coll.func) == 32, "v5 coll.func");
_Static_assert(offsetof(struct nl_nccl_descr_v5, coll.count) == 56, "v5 coll.count");
_Static_assert(offsetof(struct nl_nccl_descr_v5, coll.datatype) == 72, "v5 coll.datatype");
_Static_assert(offsetof(struct nl_nccl_descr_v5, coll.algo) == 88, "v5 coll.algo");
_Static_assert(offsetof(struct nl_nccl_descr_v5, coll.proto) == 96, "v5 coll.proto");
_Static_assert(offsetof(struct nl_nccl_descr_v5, p2p.datatype) == 40, "v5 p2p.datatype");
_Static_assert(offsetof(struct nl_nccl_descr_v5, p2p.count) == 48, "v5 p2p.count");
_Static_assert(offsetof(struct nl_nccl_descr_v5, p2p.peer) == 56, "v5 p2p.peer");
_Static_assert(offsetof(struct nl_nccl_descr_v5, proxy_op.pid) == 24, "v5 proxy_op.pid");
_Static_assert(offsetof(struct nl_nccl_descr_v5, proxy_op.peer) == 32, "v5 proxy_op.peer");
_Static_assert(offsetof(struct nl_nccl_descr_v5, proxy_op.is_send) == 44, "v5 proxy_op.is_send");
_Static_assert(offsetof(struct nl_nccl_descr_v5, net.id) == 24, "v5 net.id");
_Static_assert(offsetof(struct nl_nccl_descr_v5, net.data) == 32, "v5 net.data");
_Static_assert(offsetof(struct nl_nccl_descr_v4, coll.algo) == 88, "v4 coll.algo");
_Static_assert(offsetof(struct nl_nccl_descr_v4, p2p.peer) == 56, "v4 p2p.peer");
_Static_assert(offsetof(struct nl_nccl_descr_v4, proxy_op.is_send) == 44, "v4 proxy_op.is_send");
_Static_assert(offsetof(struct nl_nccl_descr_v4, net.data) == 32, "v4 net.data");
_Static_assert(sizeof(union nl_nccl_state_args) == 8, "state args");
_Static_assert(offsetof(struct nl_nccl_net_ib_v1, qp.length) == 32, "ib length");
_Static_assert(offsetof(struct nl_nccl_net_sock_v1, sock.length) == 16, "socket length");

#endif
