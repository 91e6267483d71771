#!/bin/bash
# test_man.sh - the manual pages format without a warning (TAP): groff
# with every warning on (-ww), and mandoc's linter where it is installed.
set -u

srcdir=${top_srcdir:-.}
pages=$(ls "$srcdir"/man/*.7)
echo "1..$(( $(echo $pages | wc -w) * 2 ))"
n=0
for page in $pages; do
	name=$(basename "$page")
	n=$((n + 1))
	if ! command -v groff > /dev/null; then
		echo "ok $n - $name: groff -ww # SKIP groff not installed"
	else
		out=$(groff -ww -z -man "$page" 2>&1)
		if [ -z "$out" ]; then
			echo "ok $n - $name: groff -ww -z -man is silent"
		else
			echo "not ok $n - $name: groff -ww -z -man warns"
			echo "$out" | sed 's/^/# /'
		fi
	fi
	n=$((n + 1))
	if ! command -v mandoc > /dev/null; then
		echo "ok $n - $name: mandoc -Tlint # SKIP mandoc not installed (apt-get install mandoc)"
	else
		out=$(mandoc -Tlint "$page" 2>&1)
		if [ -z "$out" ]; then
			echo "ok $n - $name: mandoc -Tlint is silent"
		else
			echo "not ok $n - $name: mandoc -Tlint complains"
			echo "$out" | sed 's/^/# /'
		fi
	fi
done
exit 0
