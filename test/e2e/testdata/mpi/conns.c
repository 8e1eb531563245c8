/* conns: every rank exchanges SIZE bytes with every other (MPI_Alltoall,
 * so that the library connects every pair of ranks on different nodes),
 * then writes DIR/ready-RANK holding its pid and waits, without MPI, until
 * DIR/done exists (at most 120 s) while the test reads its sockets; then
 * it finalizes. Prints "rank R of N ok" or "... BAD".
 *   conns DIR [SIZE] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	const char *dir = argc > 1 ? argv[1] : ".";
	int size = argc > 2 ? atoi(argv[2]) : 65536;
	char *s = malloc((size_t)size * n), *r = malloc((size_t)size * n);
	for (int i = 0; i < n; i++)
		memset(s + (size_t)i * size, rank + 1, size);
	MPI_Alltoall(s, size, MPI_BYTE, r, size, MPI_BYTE, MPI_COMM_WORLD);
	int bad = 0;
	for (int i = 0; i < n; i++)
		bad |= r[(size_t)i * size + size - 1] != (char)(i + 1);
	MPI_Barrier(MPI_COMM_WORLD);
	char path[4096];
	snprintf(path, sizeof path, "%s/ready-%d.tmp", dir, rank);
	FILE *f = fopen(path, "w");
	if (f) {
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
		char final[4096];
		snprintf(final, sizeof final, "%s/ready-%d", dir, rank);
		rename(path, final);
	}
	snprintf(path, sizeof path, "%s/done", dir);
	for (int i = 0; i < 2400 && access(path, F_OK) != 0; i++)
		usleep(50000);
	MPI_Barrier(MPI_COMM_WORLD);
	printf("rank %d of %d %s\n", rank, n, bad ? "BAD" : "ok");
	free(s);
	free(r);
	MPI_Finalize();
	return bad;
}
