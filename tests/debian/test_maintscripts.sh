#!/bin/bash
# test_maintscripts.sh - the Debian package's postinst and postrm (TAP),
# on a scratch copy of Open MPI's override file, with the tokens
# debian/rules fills in set by hand (no dpkg, no root, any directory):
#   - no file before: configure writes the mark and the component path;
#     a second configure (an upgrade) leaves one entry and does not take
#     it for a site's own; remove takes the file away: nothing is left;
#   - a site's own lines before: they stay, in order, byte for byte,
#     after configure and remove (purge after remove changes nothing);
#   - a site's own mca_base_component_path: left alone, and postinst
#     says so naming the directory it must hold;
#   - built where no override is needed (OVERRIDE empty): neither script
#     touches a file.
# .ci/deb.sh runs the real thing under dpkg on Debian 12 and 13.
set -u

srcdir=$(cd "${top_srcdir:-$(dirname "$0")/../..}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
check() { # what command...
	n=$((n + 1))
	local what=$1
	shift
	if "$@" >"$tmp/out" 2>&1; then
		echo "ok $n - $what"
	else
		echo "not ok $n - $what"
		sed 's/^/# /' "$tmp/out" | head -n 20
		failed=$((failed + 1))
	fi
}

dir=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi40
conf=$tmp/etc/openmpi-mca-params-override.conf
mkdir -p "$tmp/etc"
# the scripts as debian/rules makes them (dh_installdeb -D)
for s in postinst postrm; do
	sed -e "s|#OVERRIDE#|$conf|" -e "s|#PKGLIBDIR#|$dir|" -e 's|#DEBHELPER#||' \
		"$srcdir/debian/ompi-mtl-tm.$s" >"$tmp/$s"
	sed -e 's|#OVERRIDE#||' -e "s|#PKGLIBDIR#|$dir|" -e 's|#DEBHELPER#||' \
		"$srcdir/debian/ompi-mtl-tm.$s" >"$tmp/$s-none"
done

echo "1..8"

# ---- no override file before ------------------------------------------------
check "configure with no file: the file names $dir" \
	sh -c "sh '$tmp/postinst' configure && grep -qx 'mca_base_component_path = $dir' '$conf'"
check "configure again (an upgrade): one entry, its own taken for no site's" \
	sh -c "sh '$tmp/postinst' configure '0.1' 2>'$tmp/err' && [ ! -s '$tmp/err' ] &&
	       [ \"\$(grep -c '^mca_base_component_path' '$conf')\" = 1 ]"
check "remove: the file it made is gone" \
	sh -c "sh '$tmp/postrm' remove && [ ! -e '$conf' ] && [ -z \"\$(ls -A '$tmp/etc')\" ]"

# ---- a site's own lines before ----------------------------------------------
printf '# site settings\nmpi_leave_pinned = 0\n\nbtl_tcp_if_include = eth0\n' >"$conf"
cp "$conf" "$tmp/site"
check "configure keeps the site's lines and adds one entry after them" \
	sh -c "sh '$tmp/postinst' configure && head -n 4 '$conf' | cmp - '$tmp/site' &&
	       [ \"\$(grep -c '^mca_base_component_path' '$conf')\" = 1 ]"
check "remove, then purge: the site's file byte for byte" \
	sh -c "sh '$tmp/postrm' remove && sh '$tmp/postrm' purge && cmp '$tmp/site' '$conf' &&
	       [ -z \"\$(ls -A '$tmp/etc' | grep -vx 'openmpi-mca-params-override.conf')\" ]"

# ---- a site's own component path --------------------------------------------
printf 'mca_base_component_path = /opt/site/openmpi\n' >"$conf"
cp "$conf" "$tmp/site"
check "a site's own mca_base_component_path is left alone, and postinst names $dir" \
	sh -c "sh '$tmp/postinst' configure 2>'$tmp/err' && cmp '$tmp/site' '$conf' &&
	       grep -q 'must name $dir' '$tmp/err' && sh '$tmp/postrm' purge && cmp '$tmp/site' '$conf'"
rm -f "$conf"

# ---- built where no override is needed --------------------------------------
check "OVERRIDE empty (Debian 12): configure writes nothing" \
	sh -c "sh '$tmp/postinst-none' configure && [ -z \"\$(ls -A '$tmp/etc')\" ]"
printf 'x = 1\n' >"$conf"
check "OVERRIDE empty: remove and purge leave a file alone" \
	sh -c "sh '$tmp/postrm-none' remove && sh '$tmp/postrm-none' purge && [ \"\$(cat '$conf')\" = 'x = 1' ]"

[ "$failed" -eq 0 ]
