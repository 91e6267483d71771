/*
 * mpi_hello.c - MPI_Init, report the PML in use, MPI_Finalize.  No
 * point-to-point traffic: shows which PML/MTL a run selects.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	printf("rank %d of %d: initialised\n", rank, size);
	fflush(stdout);
	MPI_Finalize();
	return 0;
}
