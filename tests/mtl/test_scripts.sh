#!/bin/bash
# test_scripts.sh - the scripts a new user runs first (TAP), as issue 17
# found them:
#   - scripts/mpi-demo.sh keeps the caller's
#     OMPI_MCA_btl_vader_single_copy_mechanism (and sets none only when it
#     is unset), seen by a stand-in mpirun (MPIRUN);
#   - scripts/install-component.sh run as a user who cannot write to Open
#     MPI's component directory says so, and shows no earlier install's
#     log (one is planted; nobody runs copies of the scripts in a
#     directory of its own, as the checkout may be out of its reach);
#   - scripts/card-check.sh on a machine with an RDMA device but no tag
#     matching (a stand-in sysfs directory) builds what it needs, runs the
#     self-test and ends "no RC tag matching" (exit 2), never "not built".
# The scripts work on this build (TM_BUILD_DIR).
set -u
. "$(dirname "$0")/mpi_tap.sh"
srcdir=$(cd "${top_srcdir:-.}" && pwd)
export TM_BUILD_DIR
TM_BUILD_DIR=$(cd "$builddir" && pwd)
echo "1..5"

# ---- mpi-demo.sh and the caller's environment ---------------------------
cat > "$tmp/mpirun" <<'EOS'
#!/bin/sh
echo "vader=${OMPI_MCA_btl_vader_single_copy_mechanism:-unset}"
EOS
chmod +x "$tmp/mpirun"
out=$(OMPI_MCA_btl_vader_single_copy_mechanism=cma MPIRUN=$tmp/mpirun \
	bash "$srcdir/scripts/mpi-demo.sh" 2 2>&1)
check "mpi-demo.sh keeps the caller's btl_vader_single_copy_mechanism (cma)" \
	grep -qx 'vader=cma' <<< "$out"
[ $fails = 0 ] || echo "$out" | sed 's/^/# /'
out=$(env -u OMPI_MCA_btl_vader_single_copy_mechanism MPIRUN=$tmp/mpirun \
	bash "$srcdir/scripts/mpi-demo.sh" 2 2>&1)
check "mpi-demo.sh sets it to none when the caller did not" \
	grep -qx 'vader=none' <<< "$out"

# ---- install-component.sh as a user without write access -----------------
# nobody runs copies of the two scripts it needs, with a copy of this
# build's Makefile (where the script reads Open MPI's directory) and a
# planted earlier log, in a directory of its own under /tmp: the checkout
# may live where nobody can reach (a 0700 mktemp -d), and the verdict is
# about the script, not about where it lies.
destdir=$(sed -n 's/^OMPI_PKGLIBDIR = //p' "$TM_BUILD_DIR/Makefile")
if [ "$(id -u)" != 0 ] || ! command -v runuser > /dev/null; then
	skip "install-component.sh as nobody: needs root and runuser"
	skip "... shows no earlier log"
elif runuser -u nobody -- test -w "$destdir"; then
	skip "install-component.sh as nobody: nobody can write to $destdir"
	skip "... shows no earlier log"
else
	stage=$(mktemp -d -p /tmp tm-scripts.XXXXXX)
	trap 'rm -rf "$tmp" "$stage"' EXIT
	mkdir "$stage/scripts" "$stage/build"
	cp "$srcdir/scripts/install-component.sh" "$srcdir/scripts/build-dir.sh" \
		"$stage/scripts/"
	cp "$TM_BUILD_DIR/Makefile" "$stage/build/"
	# ensure_build_dir wants a configure; it never runs, the Makefile is there
	printf '#!/bin/sh\nexit 1\n' > "$stage/configure"
	echo "libtool: install: STALE-EARLIER-INSTALL" > "$stage/build/install-component.log"
	chmod -R a+rX "$stage"
	chmod 755 "$stage/configure"
	out=$(cd / && runuser -u nobody -- env TM_BUILD_DIR="$stage/build" \
		bash "$stage/scripts/install-component.sh" 2>&1)
	rc=$?
	check "install-component.sh as nobody: fails, naming Open MPI's directory (exit $rc)" \
		bash -c "[ $rc != 0 ] && grep -q \"cannot write to Open MPI's component directory $destdir\" <<< \"\$1\"" _ "$out"
	check "install-component.sh as nobody: no earlier install's log, no success" \
		bash -c "! grep -q 'STALE-EARLIER-INSTALL\|installed' <<< \"\$1\"" _ "$out"
	[ $fails = 0 ] || echo "$out" | sed 's/^/# /'
fi

# ---- card-check.sh builds what it needs ------------------------------------
mkdir -p "$tmp/ib/rxe0"
out=$(CARD_CHECK_SYSFS_IB=$tmp/ib bash "$srcdir/scripts/card-check.sh" 2>&1)
rc=$?
check "card-check.sh: builds, self-tests, ends 'no RC tag matching' with exit 2 (exit $rc)" \
	bash -c "[ $rc = 2 ] && grep -q '^== building' <<< \"\$1\" &&
		 grep -q 'no RC tag matching' <<< \"\$1\" &&
		 ! grep -q 'not built' <<< \"\$1\"" _ "$out"
[ $rc = 2 ] || echo "$out" | sed 's/^/# /'
exit 0
