#!/bin/sh
# plot.sh — PNG plots of a demo run: eval pass rate (with its 95% interval),
# train reward and loss per iteration, from OUTDIR/curve.tsv; a run without
# teach in OUTDIR/ablate-teach/ (make demo ABLATE=teach) is drawn beside it.
#
#   pipelines/plot.sh OUTDIR       writes OUTDIR/eval.png, reward.png, loss.png
set -eu
out=${1:?usage: plot.sh OUTDIR}
abl=$out/ablate-teach/curve.tsv
[ -s "$out/curve.tsv" ] || { echo "plot.sh: no $out/curve.tsv" >&2; exit 1; }
# plot NAME YLABEL COLUMN [ERRLO ERRHI]
plot() {
  name=$1 ylabel=$2 col=$3 lo=${4:-} hi=${5:-}
  if [ -n "$lo" ]; then
    main="'$out/curve.tsv' using 1:$col:$lo:$hi with yerrorlines lw 2 title 'with teach'"
    [ -s "$abl" ] && main="$main, '$abl' using (\$1+0.08):$col:$lo:$hi with yerrorlines lw 2 title 'without teach'"
  else
    main="'$out/curve.tsv' using 1:$col with linespoints lw 2 title 'with teach'"
    [ -s "$abl" ] && main="$main, '$abl' using 1:$col with linespoints lw 2 title 'without teach'"
  fi
  gnuplot <<GP
set terminal png size 720,420
set output '$out/$name.png'
set datafile missing 'NaN'
set xlabel 'iteration (0: bootstrap)'
set ylabel '$ylabel'
set grid
set key bottom right
plot $main
GP
}
plot eval "eval pass rate (95% interval)" 2 3 4
plot reward "train reward (mean)" 5
plot loss "train-step loss (mean)" 6
