# plot.gp - bench/run.sh's plots.  gnuplot -e "dir='...'; transports='tm ob1 ucx'" plot.gp
#
# Data files (summarize.awk): <bench>_<transport>.dat with columns
# x median q1 q3 over rounds.  Points are medians; the error bars span
# the middle half of the rounds, so the machine's noise stays visible.

set terminal pngcairo size 1000,650 font "sans,11" noenhanced
set grid
set key top left
set style data yerrorlines
set pointsize 0.8
n = words(transports)
col(i) = word("#1f77b4 #d62728 #2ca02c #9467bd #ff7f0e", i)
sizetics = '("1" 1, "8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "4M" 4194304)'

set xlabel "message size (bytes)"
set logscale xy 2
eval "set xtics " . sizetics
set xrange [0.7:6e6]	# end points off the border, so their tics show

# ---- latency vs size (size 0 cannot go on a log axis: dropped) ----------
set output dir . "/latency.png"
set title "Ping-pong latency (half round trip), 2 ranks; dashed: 1 sending thread, 2 receiving (latency_mt)"
set ylabel "latency (usec)"
set logscale y 10
plot for [i=1:n] dir . "/latency_" . word(transports, i) . ".dat" \
	using ($1 > 0 ? $1 : 1/0):2:3:4 lc rgb col(i) pt 7 title word(transports, i), \
     for [i=1:n] dir . "/latency_mt_" . word(transports, i) . ".dat" \
	using 1:2:3:4 lc rgb col(i) dt 2 pt 6 title word(transports, i) . " threads 1:2"

# ---- bandwidth vs size: uni solid, bi dashed ------------------------------
set output dir . "/bandwidth.png"
set title "Bandwidth: uni-directional (solid) and bi-directional (dashed), 2 ranks"
set ylabel "bandwidth (MB/s, 10^6 bytes/s)"
set key top left
plot for [i=1:n] dir . "/bw_" . word(transports, i) . ".dat" \
	using 1:2:3:4 lc rgb col(i) pt 7 title word(transports, i) . " uni", \
     for [i=1:n] dir . "/bibw_" . word(transports, i) . ".dat" \
	using 1:2:3:4 lc rgb col(i) dt 2 pt 6 title word(transports, i) . " bi"

# ---- message rate vs size ------------------------------------------------
set output dir . "/rate.png"
set title "Message rate, window of non-blocking sends, 2 ranks"
set ylabel "million messages per second"
set key top right
set xrange [5:50000]
plot for [i=1:n] dir . "/rate_" . word(transports, i) . ".dat" \
	using 1:2:3:4 lc rgb col(i) pt 7 title word(transports, i)

# ---- latency vs queue depth: one panel per kind ---------------------------
# Depth 0 is drawn at x = 0.5 so it fits on the log axis.
set output dir . "/depth.png"
set terminal pngcairo size 1500,550 font "sans,11" noenhanced
set multiplot layout 1,3 title "8 B ping-pong latency with D non-matching entries queued, 2 ranks"
set xlabel "queue depth D"
set logscale x 4
set xtics ("0" 0.5, "1" 1, "4" 4, "16" 16, "64" 64, "256" 256, "1K" 1024, "4K" 4096)
set xrange [0.4:6000]
set ylabel "latency (usec)"
set key top left
kinds = "posted any unexp"
names = "'D posted receives, specific source' 'D posted receives, MPI_ANY_SOURCE' 'D unexpected messages'"
do for [k=1:3] {
	set title word(names, k)
	plot for [i=1:n] dir . "/depth_" . word(kinds, k) . "_" . word(transports, i) . ".dat" \
		using ($1 > 0 ? $1 : 0.5):2:3:4 lc rgb col(i) pt 7 title word(transports, i)
}
unset multiplot
