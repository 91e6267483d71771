# bench/sizes.sh - sourced by the bench scripts that take -s SIZES.
# sizes_of "8,64,1K" prints "8 64 1024"; it fails on anything else.
sizes_of() {
	local s out=
	for s in ${1//,/ }; do
		case $s in
		*[kK]) s=${s%?}; [[ $s =~ ^[0-9]+$ ]] || return 1; s=$((s * 1024)) ;;
		*) [[ $s =~ ^[0-9]+$ ]] || return 1 ;;
		esac
		out="$out $s"
	done
	[ -n "$out" ] && echo $out
}
