#!/usr/bin/env bash
# The GPU checks, in one call of at most 6 minutes on a machine with an NVIDIA GPU that received the
# repository with device-bundle/ (made here by tests/gpu/prepare_device_checks.sh: nothing is built there).
# Every step has its own timeout, and no step starts once the whole would overrun; logs and the report
# are written to OUT_DIR as they go, so a run stopped at its limit still reports what it did.
#   1. nvidia-smi; the bundle unpacked; its executables resolve every library (ldd through its loader).
#   2. First pass with CUDA_LAUNCH_BLOCKING=1 (an error is reported at the launch that made it): the op
#      tests' cuda rows (test_backend_ops: every weight type, head sizes up to 256), test_cuda_backend_ops
#      and test_cuda_e2e, each once, two at a time.
#   3. compute-sanitizer memcheck and racecheck on a few op cases.
#   4. kvscope-cuda-bench (paged-attention bandwidth, GEMMs, graphs vs eager) and the paged vs naive
#      acceptance run on the GPU.
#   5. The sim backend's calibration: a benchmark on the CUDA backend with --save-timeline, and
#      kvscope-cli sim-calibrate fits the step-time constants to its measured steps, writing
#      sim-calibration-<gpu>.json (the detected GPU's sim name) for --sim-calibration.
#   tests/gpu/run_device_checks.sh [--dry-run] [OUT_DIR]     (OUT_DIR default: $OUT, else device-checks-out)
# --dry-run runs everything but the GPU steps (nvidia-smi, the sanitizers) on a CPU machine: the bundle,
# the loader, the libraries, the tests (their cuda rows skip), the calibration on the CPU backend (the CPU
# taken as the device, sim-calibration-cpu.json) and the report. Exit status: 0 when every
# test passed (benchmarks are reported, not judged), 1 otherwise.
set -uo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DRY=0
if [[ "${1:-}" == "--dry-run" ]]; then DRY=1; shift; fi
LOG="$(realpath -m "${1:-${OUT:-$SRC/device-checks-out}}")"
BUDGET="${BUDGET_S:-340}"  # seconds; the call's limit is 360
mkdir -p "$LOG"
REPORT="$LOG/report.txt"
: >"$REPORT"
t_start=$(date +%s)
elapsed() { echo $(( $(date +%s) - t_start )); }
say() { echo "$*" | tee -a "$REPORT"; }
# step NAME SECONDS CMD...: runs CMD under its timeout unless the budget cannot hold it; logs to NAME.log.
step() {
    local name="$1" limit="$2"; shift 2
    local left=$(( BUDGET - $(elapsed) ))
    if (( left < 10 )); then say "[$(elapsed)s] $name: not run (budget spent)"; return 124; fi
    (( limit > left )) && limit=$left
    local t0; t0=$(date +%s)
    timeout -k 5 "$limit" "$@" >"$LOG/$name.log" 2>&1
    local rc=$?
    say "[$(elapsed)s] $name: exit $rc in $(( $(date +%s) - t0 ))s$( ((rc == 124)) && echo " (timed out at ${limit}s)")"
    return $rc
}

BUNDLE="$SRC/device-bundle/kvscope-device.tar.xz"
B="$(mktemp -d "${TMPDIR:-/tmp}/kvscope-device-XXXXXX")"
trap 'rm -rf "$B"' EXIT
say "== kvscope device checks $( ((DRY)) && echo '(dry run: no GPU steps)'), logs in $LOG"
[[ -f "$BUNDLE" ]] || { say "no $BUNDLE: run tests/gpu/prepare_device_checks.sh first and carry device-bundle"; exit 1; }
tar -C "$B" -xJf "$BUNDLE" || { say "cannot unpack $BUNDLE"; exit 1; }
cat "$B/BUNDLE" | tee -a "$REPORT"

if (( ! DRY )); then
    nvidia-smi >"$LOG/nvidia-smi.log" 2>&1 || { say "nvidia-smi failed: no NVIDIA driver or device"; exit 1; }
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader | tee -a "$REPORT"
fi
# CUDA's libraries come from the image; everything else from the bundle, through the bundle's own loader
# (the image's glibc may be older than the one the binaries were linked against).
CUDA_LIB=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -d "$d" ]] && CUDA_LIB="$CUDA_LIB:$d"
done
export KVSCOPE_CUDA_LIBRARY="$B/lib/kvscope/libkvscope-cuda.so"  # /proc/self/exe is the loader below
export KVSCOPE_TEST_MODELS="$SRC/tests/data"
export QT_QPA_PLATFORM=offscreen
# A program (not a function), so that timeout can start it.
printf '#!/bin/sh\nexec "%s/sys/ld-linux-x86-64.so.2" --library-path "%s/sys%s" "$@"\n' "$B" "$B" "$CUDA_LIB" >"$B/run"
chmod +x "$B/run"
run() { "$B/run" "$@"; }

missing=0
for f in tests/test_backend_ops tests/test_cuda_backend_ops tests/test_cuda_e2e app/kvscope-cuda-bench app/kvscope-cli \
         lib/kvscope/libkvscope-cuda.so; do
    if LD_LIBRARY_PATH="$B/sys$CUDA_LIB" ldd "$B/$f" 2>&1 | grep -q 'not found'; then
        say "$f: $(LD_LIBRARY_PATH="$B/sys$CUDA_LIB" ldd "$B/$f" | grep 'not found' | tr -s ' \t' ' ' | paste -sd,)"
        missing=1
    fi
done
(( missing )) && say "libraries missing (the CUDA ones must come from the image: CUDA 13 with cuBLAS)"
run "$B/app/kvscope-cli" info --model dummy:tiny >"$LOG/info.log" 2>&1 && say "kvscope-cli starts" ||
    { say "kvscope-cli does not start:"; tail -n 5 "$LOG/info.log" | tee -a "$REPORT"; }

say "== first pass, CUDA_LAUNCH_BLOCKING=1, two at a time [$(elapsed)s]"
export CUDA_LAUNCH_BLOCKING=1
tests_rc=0
# The CPU rows of test_backend_ops ran in CI; here only its cuda row.
KVSCOPE_TEST_BACKENDS=cuda step test_backend_ops 150 "$B/run" "$B/tests/test_backend_ops" &
p1=$!
step test_cuda_backend_ops 150 "$B/run" "$B/tests/test_cuda_backend_ops" &
p2=$!
wait $p2 || tests_rc=1
step test_cuda_e2e 170 "$B/run" "$B/tests/test_cuda_e2e" || tests_rc=1
wait $p1 || tests_rc=1
unset CUDA_LAUNCH_BLOCKING
for t in test_backend_ops test_cuda_backend_ops test_cuda_e2e; do
    printf '%-24s %s\n' "$t:" "$(grep -E '^Totals:' "$LOG/$t.log" | tail -n 1 || echo 'no totals')" | tee -a "$REPORT"
    grep -E '^FAIL!' -A2 "$LOG/$t.log" | head -n 30 | tee -a "$REPORT"
done

if (( ! DRY )); then
    say "== compute-sanitizer [$(elapsed)s]"
    SANITIZER="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    if [[ -x "$SANITIZER" ]]; then
        # Small shapes: the sanitizers slow kernels down 10-100x. write_kv and paged attention index the
        # cache through block tables; rms_norm and argmax reduce through shared memory; the embedding and
        # the Q8_0 matmul read every block type's bytes (the quantized kernels); head size 256 runs the
        # attention kernel with its raised dynamic shared memory.
        KVSCOPE_TEST_BACKENDS=cuda step memcheck 45 "$SANITIZER" --tool memcheck --target-processes all --error-exitcode 9 \
            "$B/run" "$B/tests/test_backend_ops" write_kv rms_norm argmax embedding matmul_int8 || tests_rc=1
        KVSCOPE_TEST_BACKENDS=cuda step racecheck 45 "$SANITIZER" --tool racecheck --target-processes all --error-exitcode 9 \
            "$B/run" "$B/tests/test_backend_ops" rms_norm argmax "paged_attention:D=256 gqa=2 B=16 prefill window=37" || tests_rc=1
        grep -E '^=========.*(ERROR|error|hazard)' "$LOG/memcheck.log" "$LOG/racecheck.log" | head -n 20 | tee -a "$REPORT"
    else
        say "compute-sanitizer not found: memcheck and racecheck not run"
    fi
fi

say "== kvscope-cuda-bench [$(elapsed)s]"
step bench 60 "$B/run" "$B/app/kvscope-cuda-bench"
grep -E "^(\||best:|device|graphs:)" "$LOG/bench.log" | tee -a "$REPORT"

say "== paged vs naive on the GPU: kvscope-cli bench --compare naive [$(elapsed)s]"
# A KV budget that fits naive mode 8 sequences at max_model_len 2048 (F32 cache), 200 random requests of
# 128-512 input and 32-512 output tokens at once: the CPU acceptance command on the CUDA backend.
step acceptance 70 "$B/run" "$B/app/kvscope-cli" bench --model dummy:smollm-135m --backend cuda --dataset random \
    --num-prompts 200 --input-len 320 --output-len 272 --range-ratio 0.6 --output-range-ratio 0.8824 \
    --max-model-len 2048 --kv-cache-memory 754974720 --compare naive --seed 1 --output-json "$LOG/acceptance.json"
if [[ -s "$LOG/acceptance.json" ]]; then
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))
print("acceptance: " + ", ".join("%s %.2f" % (k, j[k]) for k in ("speedup_output_throughput", "ratio_mean_e2el", "ratio_p99_ttft", "ratio_mean_tpot") if k in j))
for m in ("naive", "paged"): print("  %s: %.1f s, %.1f output tok/s" % (m, j[m]["duration"], j[m]["output_throughput"]))' \
        "$LOG/acceptance.json" 2>&1 | tee -a "$REPORT"
else
    tail -n 5 "$LOG/acceptance.log" | tee -a "$REPORT"
fi
say "== sim calibration from measured steps: bench --save-timeline, sim-calibrate [$(elapsed)s]"
# The detected GPU's name in the sim table (engine/sim/gpu_specs.cpp); a dry run takes the CPU as the device,
# with nominal peaks for one thread, and the tiny model. Prefill chunks beside decode batches of 1-64 give the fit steps
# from compute-bound to memory-bound.
if (( DRY )); then
    calib_gpu=cpu calib_backend=cpu calib_model=dummy:tiny
    calib_device=(--peak-tflops 0.2 --memory-bandwidth-gbs 50 --device-name cpu)
    calib_work=(--num-prompts 32 --input-len 256 --output-len 48 --threads 1)
else
    case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)" in
        *H200*) calib_gpu=h200 ;;
        *H100*) calib_gpu=h100-sxm ;;
        *A100*80*) calib_gpu=a100-80g ;;
        *L40S*) calib_gpu=l40s ;;
        *4090*) calib_gpu=rtx4090 ;;
        *) calib_gpu="" ;;
    esac
    calib_backend=cuda calib_model=dummy:smollm-135m calib_device=(--gpu "$calib_gpu")
    calib_work=(--num-prompts 128 --input-len 512 --output-len 128)
fi
if [[ -z "$calib_gpu" ]]; then
    say "calibration: this GPU is not in the sim table; not run"
else
    step calibration_bench 60 "$B/run" "$B/app/kvscope-cli" bench --model "$calib_model" --backend "$calib_backend" \
        --dataset random "${calib_work[@]}" --range-ratio 0.9 --output-range-ratio 0.9 --request-rate 32 --seed 1 \
        --save-timeline --output-json "$LOG/calibration-timeline.json" &&
    step calibration 30 "$B/run" "$B/app/kvscope-cli" sim-calibrate --timeline "$LOG/calibration-timeline.json" \
        "${calib_device[@]}" --output "$LOG/sim-calibration-$calib_gpu.json" || tests_rc=1
    grep -E "error|calibrated|mfu|overhead|kept" "$LOG/calibration.log" "$LOG/calibration_bench.log" 2>/dev/null | tail -n 8 | tee -a "$REPORT"
fi
say "total $(elapsed)s; tests $( ((tests_rc == 0)) && echo passed || echo FAILED)"
exit "$tests_rc"
