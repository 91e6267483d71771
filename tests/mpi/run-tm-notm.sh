#!/bin/bash
# run-tm-notm.sh - run-mpi-tests.sh in the tm-notm configuration alone.
#
# make check runs one such script per configuration, so that each is a
# test with a time limit of its own (TEST_TIMEOUT): all four in one script
# overran it on a loaded machine although no mpirun hung (each has its own
# limit, MPI_TESTS_TIMEOUT).  MPI_TESTS_CONFIGS, if set, still chooses:
# a configuration it leaves out is skipped.
case " ${MPI_TESTS_CONFIGS:-tm-notm} " in
*" tm-notm "*) ;;
*) echo "1..0 # SKIP tm-notm not in MPI_TESTS_CONFIGS"; exit 0 ;;
esac
MPI_TESTS_CONFIGS=tm-notm exec "$BASH" "$(dirname "$0")/run-mpi-tests.sh" "$@"
