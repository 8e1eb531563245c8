/* Known traffic for the web UI's e2e test. Rank r sends (r+1)*1000 bytes
 * to rank r+1 (Sendrecv), rank 0 broadcasts 64 bytes, every rank puts 256
 * bytes into rank r+2's window; ITER rounds 100 ms apart, in regions
 * pcontrol-1 (p2p) and pcontrol-2 (coll + rma). */
#include <mpi.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv)
{
	int rank, n, iters = argc > 1 ? atoi(argv[1]) : 20;
	static char buf[8192], rbuf[8192], win_buf[1024];
	MPI_Win win;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	MPI_Win_create(win_buf, sizeof win_buf, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	int right = (rank + 1) % n, left = (rank + n - 1) % n;
	for (int i = 0; i < iters; i++) {
		MPI_Pcontrol(1);
		MPI_Sendrecv(buf, (rank + 1) * 1000, MPI_BYTE, right, 1, rbuf, (left + 1) * 1000, MPI_BYTE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Pcontrol(2);
		MPI_Bcast(buf, 64, MPI_BYTE, 0, MPI_COMM_WORLD);
		MPI_Win_fence(0, win);
		MPI_Put(buf, 256, MPI_BYTE, (rank + 2) % n, 0, 256, MPI_BYTE, win);
		MPI_Win_fence(0, win);
		MPI_Pcontrol(0);
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	MPI_Win_free(&win);
	MPI_Finalize();
	return 0;
}
