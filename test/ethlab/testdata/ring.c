/* ring: every rank sends SIZE bytes to the next rank ITERS times
 * (MPI_Sendrecv), so each rank sends exactly SIZE*ITERS payload bytes to
 * one peer. Prints one line per rank: "rank R of N on HOST sent B". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n, len;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Get_processor_name(host, &len);
    long size = argc > 1 ? atol(argv[1]) : 1 << 20;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    char *sbuf = malloc(size), *rbuf = malloc(size);
    memset(sbuf, rank + 1, size);
    long sent = 0;
    int bad = 0;
    for (int i = 0; i < iters; i++) {
        MPI_Sendrecv(sbuf, (int)size, MPI_BYTE, (rank + 1) % n, 7, rbuf, (int)size, MPI_BYTE,
                     (rank + n - 1) % n, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        sent += size;
        if (size > 0 && rbuf[size - 1] != (char)((rank + n - 1) % n + 1)) bad = 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const char *echo = getenv("ETHLAB_ECHO");
    printf("rank %d of %d on %s sent %ld echo=%s%s\n", rank, n, host, sent, echo ? echo : "",
           bad ? " BAD" : "");
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return bad;
}
