# Which commit slowed ResNet-50 on the GPU: each checkout in _bis/<commit>
# (git archive <commit> src kiln setup.py pyproject.toml) built in place and
# timed with benchmarks/diag/regress.py (eager/kiln ratio), then this tree.
set -u
REPO=$PWD
python3 setup.py -q build_ext --inplace > $OUT/build.txt 2>&1 || { echo build failed; exit 1; }
ls -d _bis/* | xargs -P 8 -I{} sh -c 'cd {} && python3 setup.py -q build_ext --inplace > build.log 2>&1 || echo "{} build failed"'
for d in $(ls -d _bis/* | sort) .; do
  c=$(basename $d); [ $d = . ] && c=HEAD
  for i in 1 2; do
    KILN_CACHE_DIR=/tmp/kc-$c PYTHONPATH=$REPO/$d timeout 120 python3 benchmarks/diag/regress.py --models resnet50 --rounds 5 --tag $c 2>>$OUT/bisect.err
  done
done | tee $OUT/bisect.txt
