#!/usr/bin/env bash
# Everything this project wants measured on a GPU, in one command that ends within 9 minutes on one H100 and
# writes at most 8 files into one folder (docs/performance.md quotes them):
#   env.txt        the GPU, the driver, torch and the CPU
#   tests.txt      the test suite (tests with CUDA branches take them), with pytest-xdist where it is installed
#   bench.txt      bench.py --compare at GPT-2 small's shape: ms/iter, tokens/s and MFU against the datasheet
#                  peak, bfloat16 and float32, the tie modes, AdamW and Muon
#   init_loss.txt  init_loss.py's table at GPT-2 small's shape, computed on the GPU
#   training.txt   tied, untied, shuffle and pit at GPT-2 small's shape on BPE tiny shakespeare, a few hundred
#   training.csv   iterations each: the log lines, and every logged iteration (mode, iter, loss, tokens/s)
#   summary.txt    each step: ok, failed (exit code) or timed out, and its seconds
# Each step has its own time limit, and a step that fails or runs out of time loses nothing of the others.
# It installs nothing and reaches no network: it uses the python3 it finds (with its torch), and these files,
# which the caller brings (both under data/, which git ignores):
#   data/shakespeare/{train.bin,val.bin,meta.json}   python prepare.py --dataset=shakespeare --input=tinyshakespeare.txt
#   data/tiktoken_cache/                             tiktoken's two GPT-2 files (the tests that need them skip otherwise)
# On the device machine of this workplace, in one call (the device tool's run):
#   run(command="bash docs/measure_gpu.sh", carry=["data/shakespeare", "data/tiktoken_cache"], timeout_s=600)
#   (it writes into $OUT there; elsewhere into --out=DIR, default out-gpu)
# A scaled-down run of the same steps on a CPU, seconds long, is in the test suite (tests/test_measure_gpu.py):
#   bash docs/measure_gpu.sh --device=cpu --out=DIR --data_dir=DIR --dataset=NAME
set -uo pipefail
cd "$(dirname "$0")/.."

device=cuda
out=${OUT:-out-gpu}
data_dir=data
dataset=shakespeare
for arg in "$@"; do
    case "$arg" in
        --device=*) device=${arg#*=} ;;
        --out=*) out=${arg#*=} ;;
        --data_dir=*) data_dir=${arg#*=} ;;
        --dataset=*) dataset=${arg#*=} ;;
        *) echo "error: unknown option $arg (allowed: --device=cuda|cpu, --out=DIR, --data_dir=DIR, --dataset=NAME)" >&2
           exit 2 ;;
    esac
done
case "$device" in cuda|cpu) ;; *) echo "error: --device=$device is not allowed; choose one of: cuda, cpu" >&2; exit 2 ;; esac
mkdir -p "$out" || { echo "error: cannot make the folder --out=$out" >&2; exit 2; }
out=$(cd "$out" && pwd)
python=$(command -v python3 || command -v python)
export PYTHONUNBUFFERED=1
[ -d data/tiktoken_cache ] && export TIKTOKEN_CACHE_DIR="$PWD/data/tiktoken_cache"
runs=$(mktemp -d)  # the training runs' checkpoints: not results, and not kept
trap 'rm -rf "$runs"' EXIT

if [ "$device" = cuda ]; then  # GPT-2 small, as far as 9 minutes allow
    shape=(--n_layer=12 --n_head=12 --n_embd=768 --block_size=1024 --vocab_size=50304)
    # eager rows (a compile of each would take most of the budget); train.py's runs below are compiled
    bench_args=(--batch_size=8 --bench_iters=20 --compile=false --compare_compile=false --compare_modes=tied,untied,shuffle,pit)
    train_args=(--batch_size=8 --max_iters=200 --eval_interval=100 --eval_iters=10 --log_interval=10
                --warmup_iters=20 --learning_rate=6e-4 --min_lr=6e-5 --compile=true)
    limits=(tests=200 bench=100 init_loss=40 train=45)
else  # the same steps, scaled down to seconds: what the test suite runs so that this script cannot rot
    shape=(--n_layer=1 --n_head=2 --n_embd=32 --block_size=16)
    bench_args=(--batch_size=4 --bench_iters=2 --bench_warmup=1 --rounds=1 --compare_modes=tied)
    train_args=(--batch_size=4 --max_iters=4 --eval_interval=3 --eval_iters=1 --log_interval=2 --warmup_iters=1)
    limits=(tests=60 bench=60 init_loss=60 train=60)
fi
limit() { for pair in "${limits[@]}"; do [ "${pair%%=*}" = "$1" ] && echo "${pair#*=}"; done; }

: > "$out/summary.txt"
step() {  # step NAME FILE SECONDS COMMAND...: run it, its output appended to FILE, its outcome to summary.txt
    local name=$1 file=$2 seconds=$3; shift 3
    local started=$SECONDS
    echo "\$ $*" >> "$out/$file"
    timeout --kill-after=10 "$seconds" "$@" >> "$out/$file" 2>&1
    local code=$?
    local outcome="ok"
    [ $code -eq 124 ] || [ $code -eq 137 ] && outcome="timed out after ${seconds} s"
    [ $code -ne 0 ] && [ "$outcome" = ok ] && outcome="failed (exit code $code)"
    echo "$name: $outcome, $((SECONDS - started)) s" | tee -a "$out/summary.txt"
}

{
    date -u
    nvidia-smi 2>&1 | head -15 || true
    "$python" -c "import torch, platform; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu',
torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'); print(platform.platform())"
    grep -m1 'model name' /proc/cpuinfo; nproc
} > "$out/env.txt" 2>&1
echo "env: ok" >> "$out/summary.txt"

if [ "$device" = cuda ]; then
    parallel=(-o addopts=)  # pytest.ini asks for pytest-xdist: eight workers where it is there, else one process
    "$python" -c "import xdist" 2>/dev/null && parallel=(-n 8)
    step tests tests.txt "$(limit tests)" "$python" -m pytest -q "${parallel[@]}" tests/
else
    step tests tests.txt "$(limit tests)" "$python" -m pytest -q -n 0 tests/test_layout.py
fi
step bench bench.txt "$(limit bench)" "$python" bench.py --device="$device" --compare "${shape[@]}" "${bench_args[@]}"
step init_loss init_loss.txt "$(limit init_loss)" "$python" init_loss.py --device="$device" \
    $([ "$device" = cpu ] && echo "--vocab_size=64 --n_embd=32 --n_layer=1 --n_head=2 --block_size=16 --seeds=1")
echo "mode,iter,step_loss,val_loss,tokens_per_sec" > "$out/training.csv"
for mode in tied untied shuffle pit; do
    step "train $mode" training.txt "$(limit train)" "$python" train.py --device="$device" --tie_mode=$mode \
        --data_dir="$data_dir" --dataset="$dataset" --out_dir="$runs/$mode" "${shape[@]:0:4}" "${train_args[@]}"
    [ -f "$runs/$mode/metrics.csv" ] && "$python" - "$runs/$mode/metrics.csv" "$mode" >> "$out/training.csv" <<'EOF'
import csv, sys
for row in csv.DictReader(open(sys.argv[1])):
    print(','.join([sys.argv[2], row['iter'], row['step_loss'], row['val_loss'], row['tokens_per_sec']]))
EOF
done
echo "done: $(grep -c ': ok' "$out/summary.txt") of $(wc -l < "$out/summary.txt") steps ok; files in $out"
