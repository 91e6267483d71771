# mpi_tap.sh - the opening the shell tests of tests/mtl share; sourced,
# not run:   . "$(dirname "$0")/mpi_tap.sh"
#
# Sets builddir, libs (where the built mca_mtl_tm.so is), prog (the MPI
# test programs), MPIRUN; puts the built component first on
# mca_base_component_path (exported, so that mpirun -x passes it on) and
# lets mpirun run as root; makes $tmp, a directory removed at exit; gives
# the TAP helpers ok, notok, skip and check, counting in $n and $fails,
# and mpirun_log to run a job into a log file; skip_without_sessions for
# the tests of MPI-4 sessions.
# A test of a build without the component (sanitizer builds) is skipped
# as a whole here.
#
# vader's single-copy mechanism (CMA) may be refused in containers, so it
# is off unless the caller's environment chose one.

builddir=${top_builddir:-.}
libs=$(cd "$builddir" && pwd)/.libs
prog=$(cd "$builddir" && pwd)/tests/mtl
MPIRUN=${MPIRUN:-mpirun}
export OMPI_MCA_mca_base_component_path="$libs:SYS_DEFAULT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}

n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
skip() { n=$((n + 1)); echo "ok $n - $* # SKIP"; }
check() { # check "name" cond-command...
	local name=$1
	shift
	if "$@"; then ok "$name"; else notok "$name"; fi
}

# mpirun_log SECONDS LOG mpirun-args...: mpirun with the built component,
# killed after SECONDS, all its output in LOG; its exit status.  SIGPIPE
# ignored, no stdin: when ranks fail in MPI_Init, mpirun (4.1) can write to
# a pipe or socket of one already gone and die of SIGPIPE (status 141, seen
# on a loaded machine after the refusal was printed whole); ignored, the
# write fails instead and mpirun ends with its own status.
mpirun_log() {
	local t=$1 log=$2
	shift 2
	(trap '' PIPE
	 exec timeout "$t" "$MPIRUN" --oversubscribe \
		-x OMPI_MCA_mca_base_component_path "$@" > "$log" 2>&1 \
		< /dev/null)
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# skip_without_sessions PROG: PROG (tests/mtl/mpi_sessions) probes Open
# MPI for sessions; without them (Open MPI 4.1) the test is skipped as a
# whole, and an answer PROG should not give is its one failure.
skip_without_sessions() {
	local probe
	probe=$("$1" probe)
	case $probe in
	"sessions: SKIP "*) echo "1..0 # SKIP ${probe#sessions: SKIP }"; exit 0 ;;
	"sessions: available") ;;
	*) echo "1..1"; echo "not ok 1 - mpi_sessions probe: '$probe'"; exit 0 ;;
	esac
}

if [ ! -f "$libs/mca_mtl_tm.so" ]; then
	echo "1..0 # SKIP $libs/mca_mtl_tm.so not built"
	exit 0
fi
