# kiln now against kiln at 5191996 (the H200 v7 run) on ResNet-18/50, bf16:
# each checkout's eager/kiln ratio, alternating processes, three times; then
# (STAGE=fuzz) the differential fuzzer on the device's CPU cores.
# The old checkout is expected in _old/ (git archive 5191996 | tar -x -C _old).
set -u
REPO=$PWD
python3 setup.py -q build_ext --inplace > $OUT/build.txt 2>&1 || { echo build failed; tail $OUT/build.txt; exit 1; }
if [ "${STAGE:-regress}" = regress ]; then
  (cd _old && python3 setup.py -q build_ext --inplace > $OUT/build-old.txt 2>&1) || { echo old build failed; exit 1; }
  for i in 1 2 3; do
    for v in old new; do
      d=$REPO; [ $v = old ] && d=$REPO/_old
      KILN_CACHE_DIR=/tmp/kc-$v PYTHONPATH=$d timeout 200 python3 benchmarks/diag/regress.py --tag $v$i 2>>$OUT/regress.err
    done
  done | tee $OUT/regress.txt
fi
if [ -n "${FUZZ:-}" ]; then
  PYTHONPATH=$REPO timeout ${FUZZ_S:-240} python3 -m tests.fuzz $FUZZ --workers ${WORKERS:-14} --out /tmp/fuzz > $OUT/fuzz.txt 2>&1
  echo "fuzz rc=$?"; cp /tmp/fuzz/summary.json $OUT/fuzz-summary.json; grep -v "^  \.\.\." $OUT/fuzz.txt | tail -30 | cut -c1-300
fi
