/* The GPU check's MPI program (test/gpu/run.sh): 3 ranks on one GPU under
 * an MPI that is not CUDA-aware exchange messages of known sizes from and
 * into buffers of every kind the host can touch (pageable, pinned, managed)
 * and name device buffers where the MPI does not touch them (zero counts),
 * so that the agent's profile must hold exactly these bytes per path:
 *
 *   0 -> 1  pageable -> pinned    H->H  4 x 1000 bytes
 *   2 -> 0  pinned   -> managed   H->D  4 x 5000 bytes
 *   1 -> 2  managed  -> pageable  D->H  4 x 3000 bytes
 *   0 -> 2  managed  -> managed   D->D  4 x 7000 bytes
 *   1 -> 0  device   -> device    D->D  zero bytes, one message (MPI_Send / MPI_Recv, count 0)
 *
 * then an MPI_Allreduce and an MPI_Bcast on pageable buffers. CUDA is
 * initialized before MPI_Init, as GPU codes do to pick their device. Each
 * rank prints a checksum of what it received: the same with and without
 * the agent. */
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K 4

static void check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
		exit(2);
	}
}

int main(int argc, char **argv)
{
	check(cudaSetDevice(0), "cudaSetDevice");
	check(cudaFree(0), "cudaFree(0)"); /* the context, before MPI_Init */
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (n != 3) {
		if (rank == 0)
			fprintf(stderr, "paths: run with 3 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	const size_t big = 8192;
	unsigned char *pageable = (unsigned char *)malloc(big), *pinned, *managed, *device;
	check(cudaMallocHost((void **)&pinned, big), "cudaMallocHost");
	check(cudaMallocManaged((void **)&managed, big, cudaMemAttachGlobal), "cudaMallocManaged");
	check(cudaMalloc((void **)&device, big), "cudaMalloc");
	for (size_t i = 0; i < big; i++)
		pageable[i] = pinned[i] = managed[i] = (unsigned char)(i * 7 + rank);
	unsigned long sum = 0;
	for (int k = 0; k < K; k++) {
		switch (rank) {
		case 0:
			MPI_Send(pageable, 1000, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(managed, 5000, MPI_BYTE, 2, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			for (int i = 0; i < 5000; i++)
				sum += managed[i];
			MPI_Send(managed, 7000, MPI_BYTE, 2, 4, MPI_COMM_WORLD);
			break;
		case 1:
			MPI_Recv(pinned, 1000, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			for (int i = 0; i < 1000; i++)
				sum += pinned[i];
			MPI_Send(managed, 3000, MPI_BYTE, 2, 3, MPI_COMM_WORLD);
			break;
		case 2: {
			MPI_Request r[2];
			MPI_Isend(pinned, 5000, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &r[0]);
			MPI_Irecv(pageable, 3000, MPI_BYTE, 1, 3, MPI_COMM_WORLD, &r[1]);
			MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
			for (int i = 0; i < 3000; i++)
				sum += pageable[i];
			MPI_Recv(managed + 1000, 7000, MPI_BYTE, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			for (int i = 0; i < 7000; i++)
				sum += managed[1000 + i];
			break;
		}
		}
	}
	/* device memory, never touched: a zero-count message */
	if (rank == 1)
		MPI_Send(device, 0, MPI_BYTE, 0, 5, MPI_COMM_WORLD);
	else if (rank == 0)
		MPI_Recv(device, 0, MPI_BYTE, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	double in[1024], out[1024];
	for (int i = 0; i < 1024; i++)
		in[i] = rank + i;
	MPI_Allreduce(in, out, 1024, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	int b[100];
	for (int i = 0; i < 100; i++)
		b[i] = rank == 0 ? i : -1;
	MPI_Bcast(b, 100, MPI_INT, 0, MPI_COMM_WORLD);
	for (int i = 0; i < 1024; i++)
		sum += (unsigned long)out[i];
	for (int i = 0; i < 100; i++)
		sum += (unsigned long)b[i];
	printf("rank %d checksum %lu\n", rank, sum);
	cudaFree(device);
	cudaFree(managed);
	cudaFreeHost(pinned);
	free(pageable);
	MPI_Finalize();
	return 0;
}
