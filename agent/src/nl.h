/* Netloom agent: what the generated wrappers call. The hot path and its
 * state are hot.h's; here the out-of-line rules they call (core.c: waits,
 * collectives, one-sided, persistent requests, Fortran; trace.c: the replay
 * trace's hooks) and the lifecycle (life.c). */
#ifndef NL_H
#define NL_H

#include <mpi.h>

#include "hot.h"

void nl_wait_before(int f, MPI_Comm comm);
void nl_wait_recv(int f, int source, int tag, MPI_Comm comm);
int nl_sendrecv_waits(int f, const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
		      void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
		      MPI_Status *status);
void nl_fsendrecv_waits(const void *sendbuf, const MPI_Fint *sendcount, const MPI_Fint *sendtype, const MPI_Fint *dest,
			const MPI_Fint *sendtag, void *recvbuf, const MPI_Fint *recvcount, const MPI_Fint *recvtype,
			const MPI_Fint *source, const MPI_Fint *recvtag, const MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierr);

/* The replay trace (trace.c; NETLOOM_TRACE=1): the wrappers of the functions
 * with an @trace clause call nl_trace_enter before the call and their
 * nl_tr_* and nl_trace_exit after it, on their timed path only. */
void nl_trace_enter(void);
void nl_trace_enter_at(uint64_t t0); /* entered at t0, the call's timing start (0: now) */
void nl_trace_exit(void);
void nl_tr_send(int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm);
void nl_tr_isend(int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request *req);
void nl_tr_recv(int count, MPI_Datatype t, int source, int tag, MPI_Comm comm, const MPI_Status *st);
void nl_tr_irecv(int count, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Request *req);
void nl_tr_sendrecv(int scount, MPI_Datatype st, int dest, int stag, int rcount, MPI_Datatype rt, int source, int rtag,
                    MPI_Comm comm, const MPI_Status *status);
void nl_tr_reqs(int n, const MPI_Request *r);
void nl_tr_waited(int n, const int *indices, int flag);
void nl_tr_reqs_f(int n, const MPI_Fint *r);                   /* Fortran: INTEGER handles */
void nl_tr_waited_f(int n, const MPI_Fint *indices, int flag); /* Fortran: indices from 1 */
void nl_tr_barrier(MPI_Comm comm);
void nl_tr_bcast(int count, MPI_Datatype t, int root, MPI_Comm comm);
void nl_tr_reduce(int count, MPI_Datatype t, int root, MPI_Comm comm);
void nl_tr_allreduce(int count, MPI_Datatype t, MPI_Comm comm);
void nl_tr_alltoall(int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm);
void nl_tr_alltoallv(const int *scounts, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, MPI_Comm comm);
void nl_tr_gather(int op, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, int root, MPI_Comm comm);
void nl_tr_gatherv(int all, int scount, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, int root, MPI_Comm comm);
void nl_tr_scatterv(const int *scounts, MPI_Datatype st, int rcount, MPI_Datatype rt, int root, MPI_Comm comm);
void nl_tr_reduce_scatter(const int *rcounts, MPI_Datatype t, MPI_Comm comm);
/* persistent requests */
void nl_persist(MPI_Request req, int count, MPI_Datatype t, int dest, MPI_Comm comm);
void nl_start(int f, MPI_Request req);
void nl_startall(int f, int n, const MPI_Request *reqs);
void nl_startall_f(int f, int n, const MPI_Fint *reqs);
void nl_forget_request(MPI_Request req);
void nl_forget_comm(MPI_Comm comm);
void nl_forget_win(MPI_Win win);

/* collectives (rules in README.md) */
void nl_bcast(int f, int count, MPI_Datatype t, int root, MPI_Comm comm);
void nl_reduce(int f, int count, MPI_Datatype t, int root, MPI_Comm comm);
void nl_allreduce(int f, int count, MPI_Datatype t, MPI_Comm comm);
void nl_gather(int f, const void *sbuf, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, int root, MPI_Comm comm);
void nl_gatherv(int f, const void *sbuf, int scount, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, int root, MPI_Comm comm);
void nl_scatter(int f, int scount, MPI_Datatype st, const void *rbuf, int rcount, MPI_Datatype rt, int root, MPI_Comm comm);
void nl_scatterv(int f, const int *scounts, MPI_Datatype st, const void *rbuf, int rcount, MPI_Datatype rt, int root, MPI_Comm comm);
void nl_allgather(int f, const void *sbuf, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm);
void nl_allgatherv(int f, const void *sbuf, int scount, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, MPI_Comm comm);
void nl_alltoall(int f, const void *sbuf, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm);
void nl_alltoallv(int f, const void *sbuf, const int *scounts, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, MPI_Comm comm);
void nl_alltoallw(int f, const void *sbuf, const int *scounts, const MPI_Datatype *st, const int *rcounts, const MPI_Datatype *rt, MPI_Comm comm);
void nl_alltoallw_f(int f, const void *sbuf, const int *scounts, const MPI_Fint *st, const int *rcounts, const MPI_Fint *rt, MPI_Comm comm);
void nl_reduce_scatter(int f, const int *rcounts, MPI_Datatype t, MPI_Comm comm);
void nl_reduce_scatter_block(int f, int rcount, MPI_Datatype t, MPI_Comm comm);
void nl_scan(int f, int count, MPI_Datatype t, MPI_Comm comm, int exclusive);
void nl_neighbor_allgather(int f, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm);
void nl_neighbor_allgatherv(int f, int scount, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, MPI_Comm comm);
void nl_neighbor_alltoall(int f, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm);
void nl_neighbor_alltoallv(int f, const int *scounts, MPI_Datatype st, const int *rcounts, MPI_Datatype rt, MPI_Comm comm);
void nl_neighbor_alltoallw(int f, const int *scounts, const MPI_Datatype *st, const int *rcounts, const MPI_Datatype *rt, MPI_Comm comm);
void nl_neighbor_alltoallw_f(int f, const int *scounts, const MPI_Fint *st, const int *rcounts, const MPI_Fint *rt, MPI_Comm comm);

/* one-sided and MPI-IO */
void nl_rma(int f, int count, MPI_Datatype t, int target, MPI_Win win);
void nl_io(int f, int count, MPI_Datatype t, int write);

/* Fortran support */
void *nl_fsym(void **cache, const char *name);
const void *nl_fbuf(const void *fortran_buf);
/* nl_fstatus: a Fortran (mpif.h, use mpi) status as C's, in *c, or
 * MPI_STATUS_IGNORE for MPI_STATUS_IGNORE. */
const MPI_Status *nl_fstatus(const void *fortran_status, MPI_Status *c);

/* lifecycle (life.c; nl_init_begin and nl_pcontrol: core.c) */
void nl_init_begin(void); /* at MPI_Init's entry: wall time starts there */
void nl_start_agent(void);
void nl_stop_agent(void);
void nl_pcontrol(int level);

#endif
