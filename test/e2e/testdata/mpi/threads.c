/* MPI_THREAD_MULTIPLE: THREADS threads per rank each send MSGS messages of
 * 8 bytes to the right neighbour (and receive as many from the left) at once,
 * on a communicator duplicated per thread. The agent must count all of them. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

#define THREADS 4
#define MSGS 500

static int rank, n;
static MPI_Comm comms[THREADS];

static void *work(void *arg)
{
	MPI_Comm c = comms[(long)arg];
	char s[8] = {0}, r[8];
	for (int i = 0; i < MSGS; i++) {
		MPI_Request rq[2];
		MPI_Irecv(r, 8, MPI_BYTE, (rank + n - 1) % n, 0, c, &rq[0]);
		MPI_Isend(s, 8, MPI_BYTE, (rank + 1) % n, 0, c, &rq[1]);
		MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int provided;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	if (provided != MPI_THREAD_MULTIPLE) {
		printf("no MPI_THREAD_MULTIPLE\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	for (int t = 0; t < THREADS; t++)
		MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
	pthread_t th[THREADS];
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, work, (void *)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < THREADS; t++)
		MPI_Comm_free(&comms[t]);
	MPI_Finalize();
	return 0;
}
