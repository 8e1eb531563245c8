/* Fortran entry points that start and stop the agent, for MPI libraries whose
 * Fortran bindings call PMPI_Init/PMPI_Finalize directly (Open MPI): the C
 * wrappers of MPI_Init and MPI_Finalize never see a Fortran program. */
#include "agent.h"

typedef void (*f_init_t)(MPI_Fint *ierr);
typedef void (*f_init_thread_t)(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr);
typedef void (*f_finalize_t)(MPI_Fint *ierr);
typedef void (*f_pcontrol_t)(MPI_Fint *level);

static f_init_t real_init;
static f_init_thread_t real_init_thread;
static f_finalize_t real_finalize;
static f_pcontrol_t real_pcontrol;

void mpi_init_(MPI_Fint *ierr)
{
	f_init_t real = (f_init_t)nl_fsym((void **)&real_init, "pmpi_init_");
	const uint64_t t0 = nl_ticks();
	nl_init_begin();
	real(ierr);
	if (*ierr == MPI_SUCCESS)
		nl_start_agent();
	nl_fn_done(NL_FN_MPI_Init, t0);
}

void mpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
	f_init_thread_t real = (f_init_thread_t)nl_fsym((void **)&real_init_thread, "pmpi_init_thread_");
	const uint64_t t0 = nl_ticks();
	nl_init_begin();
	real(required, provided, ierr);
	if (*ierr == MPI_SUCCESS)
		nl_start_agent();
	nl_fn_done(NL_FN_MPI_Init_thread, t0);
}

void mpi_finalize_(MPI_Fint *ierr)
{
	f_finalize_t real = (f_finalize_t)nl_fsym((void **)&real_finalize, "pmpi_finalize_");
	const uint64_t t0 = nl_ticks();
	nl_fn_done(NL_FN_MPI_Finalize, t0);
	nl_stop_agent();
	real(ierr);
}

void mpi_pcontrol_(MPI_Fint *level)
{
	f_pcontrol_t real = (f_pcontrol_t)nl_fsym((void **)&real_pcontrol, "pmpi_pcontrol_");
	const uint64_t t0 = nl_ticks();
	nl_pcontrol((int)*level);
	real(level);
	nl_fn_done(NL_FN_MPI_Pcontrol, t0);
}

void mpi_init__(MPI_Fint *ierr) __attribute__((alias("mpi_init_")));
void mpi_init(MPI_Fint *ierr) __attribute__((alias("mpi_init_")));
void MPI_INIT(MPI_Fint *ierr) __attribute__((alias("mpi_init_")));
void mpi_init_thread__(MPI_Fint *r, MPI_Fint *p, MPI_Fint *ierr) __attribute__((alias("mpi_init_thread_")));
void mpi_init_thread(MPI_Fint *r, MPI_Fint *p, MPI_Fint *ierr) __attribute__((alias("mpi_init_thread_")));
void MPI_INIT_THREAD(MPI_Fint *r, MPI_Fint *p, MPI_Fint *ierr) __attribute__((alias("mpi_init_thread_")));
void mpi_finalize__(MPI_Fint *ierr) __attribute__((alias("mpi_finalize_")));
void mpi_finalize(MPI_Fint *ierr) __attribute__((alias("mpi_finalize_")));
void MPI_FINALIZE(MPI_Fint *ierr) __attribute__((alias("mpi_finalize_")));
void mpi_pcontrol__(MPI_Fint *level) __attribute__((alias("mpi_pcontrol_")));
void mpi_pcontrol(MPI_Fint *level) __attribute__((alias("mpi_pcontrol_")));
void MPI_PCONTROL(MPI_Fint *level) __attribute__((alias("mpi_pcontrol_")));
