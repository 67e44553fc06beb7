# Sourced by every device_round*.sh, from the repository root on the GPU
# machine: results go to $OUT, kiln is installed against what is there (no
# registry is reachable), and the round continues in /tmp with REPO set.
set -u
OUT=${OUT:-/tmp/out}; export KILN_CACHE_DIR=/tmp/kiln-cache; REPO=$(pwd)
python3 -m pip install --no-deps --no-build-isolation . > /tmp/install.log 2>&1 || { tail -30 /tmp/install.log; exit 1; }
cd /tmp
