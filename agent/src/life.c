/* Netloom agent: the lifecycle. MPI_Init starts the rooms in order (the
 * accounting, core.c; the replay trace, trace.c; the reports, report.c),
 * MPI_Finalize stops them in reverse. The only file that calls up into
 * every room: none of them calls back here. */

#include "agent.h"

void nl_start_agent(void)
{
	if (nl_agent.started)
		return;
	nl_core_start();
	nl_trace_start();
	nl_report_start();
}

void nl_stop_agent(void)
{
	if (!nl_agent.started || nl_agent.stopped)
		return;
	nl_agent.stopped = 1;
	nl_trace_end();
	nl_core_stop();
	nl_report_final();
}

int MPI_Init(int *argc, char ***argv)
{
	const uint64_t t0 = nl_ticks();
	nl_init_begin();
	int rc = PMPI_Init(argc, argv);
	if (rc == MPI_SUCCESS)
		nl_start_agent();
	nl_fn_done(NL_FN_MPI_Init, t0);
	return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	const uint64_t t0 = nl_ticks();
	nl_init_begin();
	int rc = PMPI_Init_thread(argc, argv, required, provided);
	if (rc == MPI_SUCCESS)
		nl_start_agent();
	nl_fn_done(NL_FN_MPI_Init_thread, t0);
	return rc;
}

int MPI_Finalize(void)
{
	const uint64_t t0 = nl_ticks();
	nl_fn_done(NL_FN_MPI_Finalize, t0);
	nl_stop_agent();
	return PMPI_Finalize();
}
