#!/usr/bin/env bash
# The GPU checks of issue 7 in one go, on a machine with an NVIDIA GPU: configures a fresh CUDA Release
# build for this device's architecture only (to keep nvcc time down), builds the gpu tests and the CUDA
# benchmark, runs `ctest -L gpu` and kvscope-cuda-bench, and prints a short report, with the decode
# tokens/s of dummy:llama-1b (BF16) replayed as CUDA graphs against op by op (--enforce-eager), and issue
# 5's acceptance run on the GPU (paged + continuous batching against the naive baseline, one process).
# Fits in 9 minutes on an H200 with 16 cores. Exit status: 0 when every gpu test passed (benchmarks are
# reported, not judged).
#   tests/gpu/run_device_checks.sh [BUILD_DIR]      env: JOBS (16), KVSCOPE_TEST_MODELS, CUDA_ARCH (e.g. 90)
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$(mktemp -d "${TMPDIR:-/tmp}/kvscope-gpu-XXXXXX")}"
JOBS="${JOBS:-16}"
LOG="$BUILD/device_checks"
mkdir -p "$LOG"
t_start=$(date +%s)
elapsed() { echo $(( $(date +%s) - t_start ))s; }

echo "== nvidia-smi"
if ! nvidia-smi; then
    echo "run_device_checks: nvidia-smi failed: no NVIDIA driver or device on this machine" >&2
    exit 1
fi
if [[ -z "${CUDA_ARCH:-}" ]]; then
    CUDA_ARCH="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d ' .')"
fi
[[ "$CUDA_ARCH" =~ ^[0-9]+$ ]] || { echo "run_device_checks: cannot tell the GPU architecture ('$CUDA_ARCH'); set CUDA_ARCH" >&2; exit 1; }
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
nvcc --version | tail -n 2

echo "== test models: ${KVSCOPE_TEST_MODELS:-$SRC/tests/data}"

echo "== configure ($BUILD, sm_$CUDA_ARCH) [$(elapsed)]"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S "$SRC" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DKVSCOPE_BUILD_GUI=OFF -DKVSCOPE_CUDA=ON \
      -DKVSCOPE_CUDA_ARCHITECTURES="$CUDA_ARCH" >"$LOG/configure.log" 2>&1 \
    || { tail -n 40 "$LOG/configure.log"; exit 1; }

echo "== build (-j$JOBS) [$(elapsed)]"
nvcc_start=$(date +%s)
timeout 360 cmake --build "$BUILD" -j "$JOBS" --target kvscope_cuda >"$LOG/build_cuda.log" 2>&1 \
    || { tail -n 60 "$LOG/build_cuda.log"; exit 1; }
echo "   kvscope_cuda (nvcc) built in $(( $(date +%s) - nvcc_start ))s"
timeout 420 cmake --build "$BUILD" -j "$JOBS" --target test_cuda_backend_ops test_cuda_e2e kvscope-cuda-bench kvscope-cli \
    >"$LOG/build.log" 2>&1 || { tail -n 60 "$LOG/build.log"; exit 1; }

echo "== ctest -L gpu [$(elapsed)]"
tests_rc=0
( cd "$BUILD" && timeout 330 ctest -L gpu --output-on-failure --timeout 300 ) 2>&1 | tee "$LOG/ctest.log" || tests_rc=$?
for t in test_cuda_backend_ops test_cuda_e2e; do
    # The per-function view (QtTest's own totals), including skips.
    "$BUILD/tests/$t" -silent >"$LOG/$t.txt" 2>&1 || true
done

echo "== kvscope-cuda-bench [$(elapsed)]"
bench_rc=0
timeout 240 "$BUILD/app/kvscope-cuda-bench" 2>&1 | tee "$LOG/bench.log" || bench_rc=$?

echo "== issue 5 acceptance on the GPU: kvscope-cli bench --compare naive [$(elapsed)]"
# The CPU command of the issue, on the CUDA backend: a KV budget that fits naive mode 8 sequences at
# max_model_len 2048 (F32 cache), 200 random requests of 128-512 input and 32-512 output tokens at once.
accept_rc=0
timeout 180 "$BUILD/app/kvscope-cli" bench --model dummy:smollm-135m --backend cuda --dataset random \
    --num-prompts 200 --input-len 320 --output-len 272 --range-ratio 0.6 --output-range-ratio 0.8824 \
    --max-model-len 2048 --kv-cache-memory 754974720 --compare naive --seed 1 \
    --output-json "$LOG/acceptance.json" >"$LOG/acceptance.log" 2>&1 || accept_rc=$?

echo
echo "================ report ================"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
echo "build: sm_$CUDA_ARCH, $BUILD"
grep -E "tests passed|tests failed" "$LOG/ctest.log" || echo "ctest: no summary (see $LOG/ctest.log)"
for t in test_cuda_backend_ops test_cuda_e2e; do
    printf '%-24s %s\n' "$t:" "$(grep -E '^Totals:' "$LOG/$t.txt" | tail -n 1 || echo 'no totals')"
    grep -E '^(FAIL!|SKIP)' "$LOG/$t.txt" | head -n 20 || true
done
grep -E "^(\||best:|device)" "$LOG/bench.log" || echo "bench: no figures (exit $bench_rc, see $LOG/bench.log)"
grep -E "^graphs:" "$LOG/bench.log" || echo "graphs: no graph vs eager figures (see $LOG/bench.log)"
if [[ -s "$LOG/acceptance.json" ]]; then
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))
print("acceptance: " + ", ".join("%s %.2f" % (k, j[k]) for k in ("speedup_output_throughput", "ratio_mean_e2el", "ratio_p99_ttft", "ratio_mean_tpot") if k in j))
for m in ("naive", "paged"): print("  %s: %.1f s, %.1f output tok/s" % (m, j[m]["duration"], j[m]["output_throughput"]))' \
        "$LOG/acceptance.json" || tail -n 20 "$LOG/acceptance.log"
else
    echo "acceptance: no result (exit $accept_rc, see $LOG/acceptance.log)"; tail -n 20 "$LOG/acceptance.log"
fi
echo "logs: $LOG; total $(elapsed)"
exit "$tests_rc"
