#!/bin/bash
# benchmarks/device.sh -- every run on the GPU machine, as stages.
#
# Run from the repository root on the GPU machine, with $OUT the folder whose
# files come back (at most 8 of them: pick stages so their files stay under
# that; "build fuzz bench tests" write 6):
#
#   STAGES="build fuzz bench tests" FUZZ_COUNT=6000 FUZZ_SEED=900000 \
#     BENCH_MODELS=resnet18,resnet50 bash benchmarks/device.sh
#
# Stages run in the order STAGES gives (default "build tests"); each runs
# under its own time budget in seconds (the *_S variable), writes its output
# under $OUT and prints its exit status and the end of its output.  kiln is
# built in place and imported from this tree (PYTHONPATH); the kiln disk
# cache is $KILN_CACHE_DIR (default /tmp/kiln-cache; kiln.bench uses fresh
# caches of its own).  A failed build stops the run.
#
#   build       python3 setup.py -q build_ext --inplace; Python, torch and GPU
#               versions first                               BUILD_S=180   build.txt
#   fuzz        the differential fuzzer on the machine's CPU cores:
#               python3 -m tests.fuzz --kind all --entry both --workers 15,
#               FUZZ_COUNT programs (6000) from FUZZ_SEED (900000),
#               FUZZ_WORKERS, FUZZ_ARGS (e.g. "--seeds summary.json")
#                                                FUZZ_S=300    fuzz.txt fuzz-summary.json
#   bench       python3 -m kiln.bench --device cuda --dtype bfloat16 over
#               BENCH_MODELS (default the README's ten), --repeat BENCH_REPEAT
#               (20), BENCH_ARGS (e.g. "--inductor-mode max-autotune-no-cudagraphs")
#                                                BENCH_S=540   bench.txt bench.json
#   dynamic     python3 -m kiln.bench --dynamic --device cuda --dtype bfloat16 (issue 17's
#               serving sweep: BERT, GPT-2, Llama and resnet18 where torchvision imports,
#               else cnn, over 16 seqs x 8 batches), DYNAMIC_ARGS (e.g. "--dyn-seqs 8")
#                                                DYNAMIC_S=540 dynamic.txt dynamic.json
#   tests       pytest on TESTS (default tests/codegen, tests/runtime and the compiler soundness files),
#               PYTEST_ARGS                      TESTS_S=300   tests.txt
#   opinfo      the OpInfo sweep on cuda, OPINFO_DTYPES (float32 bfloat16
#               int64 bool) as parallel processes OPINFO_S=360 opinfo.txt
#   suite       the whole test suite (how the Python 3.12 runs were made)
#                                                SUITE_S=420   suite.txt
#   frontend    kiln.bench --overhead and --capture (dispatch cost, capture
#               speed; CPU work)                 FRONTEND_S=270 frontend.txt
#   bandwidth   kiln.bench --device cuda --bandwidth (1 GiB float32 tensors),
#               and the largest cached cubin listed with cuobjdump (native
#               sm_90 code, not PTX)             BANDWIDTH_S=150 bandwidth.txt
#   phases      benchmarks/compile_phases.py --device cuda --profile-first-run
#               over PHASES_MODELS (the ten), then
#               benchmarks/attention_first_use.py for both mask kinds
#                                                PHASES_S=360  phases.txt
#   profile     benchmarks/profile_cuda.py over PROFILE_MODELS
#               (bert,resnet50,vit_small)        PROFILE_S=300 profile.txt
#   index_errors  benchmarks/diag/cuda_index_errors.py (the GPU error
#               record's three modes)            INDEX_ERRORS_S=200 index_errors.txt
#   regress     kiln against older checkouts: each folder in REGRESS_DIRS
#               (default _old; make one with `mkdir -p _old && git archive
#               COMMIT src kiln setup.py pyproject.toml | tar -x -C _old`,
#               then carry it) built in place, then REGRESS_ROUNDS (3) rounds
#               alternating each checkout and this tree through
#               benchmarks/diag/regress.py on REGRESS_MODELS (resnet18,resnet50)
#               with REGRESS_ARGS (e.g. "--rounds 5"): eager/kiln ratios
#               measured in the same process
#                                                REGRESS_S=500 regress.txt
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
REPO=$(pwd)
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-cache}
WORK=$(mktemp -d /tmp/kiln-device.XXXXXX)   # logs that do not come back
TEN=encoder,bert,gpt2,llama,t5,resnet18,resnet50,mobilenet_v3,efficientnet_b0,vit_small

# show FILE [N]: the last N lines of FILE without progress bars, 250 columns
show() { grep -v -e '^  \.\.\.' -e '%|' "$1" | tail -n "${2:-8}" | cut -c1-250; }

stage_build() {
    { python3 --version
      python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
      nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
    } > "$OUT/build.txt" 2>&1
    timeout "${BUILD_S:-180}" python3 setup.py -q build_ext --inplace >> "$OUT/build.txt" 2>&1
    local rc=$?
    show "$OUT/build.txt" 12
    return $rc
}

stage_fuzz() {
    rm -rf $WORK/fuzz
    timeout "${FUZZ_S:-300}" python3 -m tests.fuzz --kind all --entry both --workers "${FUZZ_WORKERS:-15}" \
        --seed "${FUZZ_SEED:-900000}" --count "${FUZZ_COUNT:-6000}" --out $WORK/fuzz ${FUZZ_ARGS:-} > "$OUT/fuzz.txt" 2>&1
    local rc=$?
    cp $WORK/fuzz/summary.json "$OUT/fuzz-summary.json" 2>/dev/null
    show "$OUT/fuzz.txt" 25
    return $rc
}

stage_bench() {
    timeout "${BENCH_S:-540}" python3 -m kiln.bench --device cuda --dtype bfloat16 --models "${BENCH_MODELS:-$TEN}" \
        --repeat "${BENCH_REPEAT:-20}" ${BENCH_ARGS:-} --json "$OUT/bench.json" > "$OUT/bench.txt" 2> $WORK/bench.err
    local rc=$?
    grep -v -e '^wrote' -e '^$' "$OUT/bench.txt" | tail -n 20 | cut -c1-250
    show $WORK/bench.err 3
    return $rc
}

stage_dynamic() {
    timeout "${DYNAMIC_S:-540}" python3 -m kiln.bench --dynamic --device cuda --dtype bfloat16 ${DYNAMIC_ARGS:-} \
        --json "$OUT/dynamic.json" > "$OUT/dynamic.txt" 2> $WORK/dynamic.err
    local rc=$?
    grep -v -e '^wrote' -e '^$' "$OUT/dynamic.txt" | tail -n 30 | cut -c1-250
    show $WORK/dynamic.err 3
    return $rc
}

stage_tests() {
    # (unquoted: TESTS holds several files and globs)
    timeout "${TESTS_S:-300}" python3 -m pytest -q -p no:cacheprovider \
        ${TESTS:-tests/codegen tests/runtime tests/compile/test_soundness_*.py} ${PYTEST_ARGS:-} > "$OUT/tests.txt" 2>&1
    local rc=$?
    show "$OUT/tests.txt" 25
    return $rc
}

stage_opinfo() {
    local dt p rc=0 pids=()
    for dt in ${OPINFO_DTYPES:-float32 bfloat16 int64 bool}; do
        timeout "${OPINFO_S:-360}" python3 -m pytest tests/ops/test_opinfo.py -k "cuda and not emulated and $dt" \
            -q -p no:cacheprovider -rA > "$WORK/opinfo-$dt.txt" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    for dt in ${OPINFO_DTYPES:-float32 bfloat16 int64 bool}; do
        echo "== $dt"; grep -E "kiln opinfo|failures:|^  |passed|failed" "$WORK/opinfo-$dt.txt" | head -n 30
    done > "$OUT/opinfo.txt"
    cat "$OUT/opinfo.txt" | cut -c1-250
    return $rc
}

stage_suite() {
    timeout "${SUITE_S:-420}" python3 -m pytest -q -p no:cacheprovider -x tests ${PYTEST_ARGS:-} > "$OUT/suite.txt" 2>&1
    local rc=$?
    show "$OUT/suite.txt" 8
    return $rc
}

stage_frontend() {
    local rc=0
    timeout "$(( ${FRONTEND_S:-270} / 2 ))" python3 -m kiln.bench --overhead > "$OUT/frontend.txt" 2>&1 || rc=1
    timeout "$(( ${FRONTEND_S:-270} / 2 ))" python3 -m kiln.bench --capture >> "$OUT/frontend.txt" 2>&1 || rc=1
    show "$OUT/frontend.txt" 20
    return $rc
}

stage_bandwidth() {
    timeout "${BANDWIDTH_S:-150}" python3 -m kiln.bench --device cuda --bandwidth > "$OUT/bandwidth.txt" 2>&1
    local rc=$?
    python3 - >> "$OUT/bandwidth.txt" 2>&1 <<'PY'
import glob, os, subprocess
c = sorted(glob.glob(os.path.join(os.environ["KILN_CACHE_DIR"], "cuda", "*", "*.cubin")), key=os.path.getsize)
print("largest cubin:", c[-1] if c else "none (run a CUDA stage first)")
if c:
    print(subprocess.run(["cuobjdump", "--list-elf", "--list-ptx", c[-1]], capture_output=True, text=True).stdout)
    print(subprocess.run(["cuobjdump", "-sass", c[-1]], capture_output=True, text=True).stdout[:1500])
PY
    show "$OUT/bandwidth.txt" 20
    return $rc
}

stage_phases() {
    local m
    timeout "$(( ${PHASES_S:-360} * 2 / 3 ))" python3 benchmarks/compile_phases.py --device cuda --profile-first-run \
        --models "${PHASES_MODELS:-$TEN}" > "$OUT/phases.txt" 2>&1
    local rc=$?
    for m in additive bool; do
        timeout "$(( ${PHASES_S:-360} / 6 ))" python3 benchmarks/attention_first_use.py --shape 8,4,512,64 --mask $m
    done >> "$OUT/phases.txt" 2>&1
    grep -E " (cold|warm) " "$OUT/phases.txt" | cut -c1-250
    show "$OUT/phases.txt" 10
    return $rc
}

stage_profile() {
    timeout "${PROFILE_S:-300}" python3 benchmarks/profile_cuda.py --models "${PROFILE_MODELS:-bert,resnet50,vit_small}" \
        > "$OUT/profile.txt" 2>&1
    local rc=$?
    grep -v -i warn "$OUT/profile.txt" | tail -n 60 | cut -c1-250
    return $rc
}

stage_index_errors() {
    timeout "${INDEX_ERRORS_S:-200}" python3 benchmarks/diag/cuda_index_errors.py > "$OUT/index_errors.txt" 2>&1
    local rc=$?
    show "$OUT/index_errors.txt" 8
    return $rc
}

stage_regress() {
    local d i p tag rc=0 dirs=(${REGRESS_DIRS:-_old} .)
    local each=$(( ${REGRESS_S:-500} / (${REGRESS_ROUNDS:-3} * ${#dirs[@]}) ))
    for d in ${REGRESS_DIRS:-_old}; do
        (cd "$d" && python3 setup.py -q build_ext --inplace > build.log 2>&1) || { echo "$d: build failed"; rc=1; }
    done
    for i in $(seq "${REGRESS_ROUNDS:-3}"); do
        for d in "${dirs[@]}"; do
            tag=$(basename "$d"); [ "$d" = . ] && tag=tree
            p=$d; [ "${d#/}" = "$d" ] && p=$REPO/$d
            KILN_CACHE_DIR=$WORK/kc-$tag PYTHONPATH=$p timeout "$each" \
                python3 benchmarks/diag/regress.py --models "${REGRESS_MODELS:-resnet18,resnet50}" --tag "$tag.$i" ${REGRESS_ARGS:-} || rc=1
        done
    done > "$OUT/regress.txt" 2> $WORK/regress.err
    cut -c1-250 "$OUT/regress.txt"
    show $WORK/regress.err 3
    return $rc
}

for s in ${STAGES:-build tests}; do
    if ! declare -F "stage_$s" > /dev/null; then
        echo "unknown stage '$s' (see the header of benchmarks/device.sh)"
        exit 2
    fi
done
status=0
for s in ${STAGES:-build tests}; do
    echo "== $s"
    t0=$SECONDS
    "stage_$s"
    rc=$?
    echo "== $s rc=$rc ($(( SECONDS - t0 )) s)"
    [ $rc -ne 0 ] && status=1
    if [ "$s" = build ] && [ $rc -ne 0 ]; then
        exit 1
    fi
done
exit $status
