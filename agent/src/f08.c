/* `use mpi_f08` entry points that start and stop the agent, for both MPIs:
 * Open MPI's mpi_init_f08_ calls ompi_init_f (then PMPI_Init), MPICH's calls
 * PMPI_Init directly, so neither reaches the C MPI_Init wrapper. They call the
 * library's own mpi_x_f08_ (the next definition). ierror is OPTIONAL in f08:
 * a NULL pointer when absent, so the call is given one of ours. The other
 * f08 entry points are generated (agent/gen -f08). */
#include "agent.h"

typedef void (*f08_init_t)(MPI_Fint *ierr);
typedef void (*f08_init_thread_t)(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr);
typedef void (*f08_finalize_t)(MPI_Fint *ierr);
typedef void (*f08_pcontrol_t)(MPI_Fint *level, MPI_Fint *ierr);

static f08_init_t real_init;
static f08_init_thread_t real_init_thread;
static f08_finalize_t real_finalize;
static f08_pcontrol_t real_pcontrol;

void mpi_init_f08_(MPI_Fint *ierr)
{
	f08_init_t real = (f08_init_t)nl_fsym((void **)&real_init, "mpi_init_f08_");
	MPI_Fint rc = MPI_SUCCESS;
	const uint64_t t0 = nl_ticks();
	nl_init_begin();
	real(&rc);
	if (rc == MPI_SUCCESS)
		nl_start_agent();
	nl_fn_done(NL_FN_MPI_Init, t0);
	if (ierr)
		*ierr = rc;
}

void mpi_init_thread_f08_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
	f08_init_thread_t real = (f08_init_thread_t)nl_fsym((void **)&real_init_thread, "mpi_init_thread_f08_");
	MPI_Fint rc = MPI_SUCCESS;
	const uint64_t t0 = nl_ticks();
	nl_init_begin();
	real(required, provided, &rc);
	if (rc == MPI_SUCCESS)
		nl_start_agent();
	nl_fn_done(NL_FN_MPI_Init_thread, t0);
	if (ierr)
		*ierr = rc;
}

void mpi_finalize_f08_(MPI_Fint *ierr)
{
	f08_finalize_t real = (f08_finalize_t)nl_fsym((void **)&real_finalize, "mpi_finalize_f08_");
	const uint64_t t0 = nl_ticks();
	nl_fn_done(NL_FN_MPI_Finalize, t0);
	nl_stop_agent();
	real(ierr);
}

/* MPI_Pcontrol(level) has no ierror in the standard and in Open MPI; MPICH's
 * mpi_pcontrol_f08_ takes an optional one. The second argument is passed on
 * untouched, never read here: Open MPI's ignores it. */
void mpi_pcontrol_f08_(MPI_Fint *level, MPI_Fint *ierr)
{
	f08_pcontrol_t real = (f08_pcontrol_t)nl_fsym((void **)&real_pcontrol, "mpi_pcontrol_f08_");
	const uint64_t t0 = nl_ticks();
	nl_pcontrol((int)*level);
	real(level, ierr);
	nl_fn_done(NL_FN_MPI_Pcontrol, t0);
}
