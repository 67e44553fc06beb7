# GPU round 5: loop and graph dumps of GPT-2 (small) and BERT, traced vs the
# old pickle round trip.  Results in $OUT.
source "$(dirname "$0")/setup.sh"
for m in gpt2small bert; do for mode in plain revive; do
  KILN_DUMP=graph,loops timeout 100 python3 $REPO/benchmarks/diag/dump_modes.py $m $mode > $OUT/$m-$mode.txt 2>&1
  echo "$m $mode $(grep KERNELS $OUT/$m-$mode.txt)"
done; done
timeout 60 python3 -m pytest $REPO/tests/test_fusion.py -q -p no:cacheprovider -k "empty or gpt2" > $OUT/fusion.txt 2>&1; tail -2 $OUT/fusion.txt
