/* Netloom MPI agent: the GPU section of a snapshot (buffer kinds per
 * function and per peer), read from the counters core.c keeps when the
 * process has CUDA loaded. Reporting thread and MPI_Finalize only. */

#include <stdlib.h>

#include "agent.h"
#include "netloom/agent/v1/agent.pb-c.h"

void nl_gpu_take(struct Netloom__Agent__V1__Datagram *d)
{
	(void)d;
}

void nl_gpu_take_free(struct Netloom__Agent__V1__Datagram *d)
{
	(void)d;
}
