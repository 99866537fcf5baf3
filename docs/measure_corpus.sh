#!/usr/bin/env bash
# prepare.py on a corpus larger than memory (lib/corpus.py): one synthetic .txt file of about 0.1 GB and one of 1 GB
# (tiny shakespeare's paragraphs in a seeded order, a blank line between), each tokenized with one worker and with
# two; the wall time and the peak memory of the whole process tree (the resident sets of prepare.py and its workers,
# summed, sampled every 50 ms). A large .txt streams in documents cut at blank lines, so memory stays flat and one
# file feeds every worker. Run on a quiet machine:
#   bash docs/measure_corpus.sh [TEXT] [OUT]   # TEXT: a UTF-8 file to draw paragraphs from (default tiny shakespeare)
#   SIZES="5 20" bash docs/measure_corpus.sh      # other sizes (MB), a quick try
set -euo pipefail
cd "$(dirname "$0")/.."
TEXT=${1:-data/_sources/tinyshakespeare.txt}
OUT=${2:-out-measure-corpus}
mkdir -p "$OUT"
make_text() {  # MB FILE: about MB megabytes of text in one file
    python - "$TEXT" "$1" "$2" <<'PY'
import os, random, sys
text, mb, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
paragraphs = [p.strip('\n') for p in open(text, encoding='utf-8').read().split('\n\n') if p.strip()]
rng, written = random.Random(0), 0
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path + '.tmp', 'w', encoding='utf-8') as f:
    while written < mb * 2 ** 20:
        block = '\n\n'.join(rng.choices(paragraphs, k=1000)) + '\n\n'
        f.write(block)
        written += len(block.encode('utf-8'))
os.replace(path + '.tmp', path)
PY
}
peak_tree() {  # COMMAND...: runs it; prints its wall seconds and the peak summed RSS (KiB) of it and its descendants
    python - "$@" <<'PY'
import os, subprocess, sys, time
def tree_rss(root):
    parents, rss = {}, {}
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/stat') as f:
                parents[int(pid)] = int(f.read().rsplit(')', 1)[1].split()[1])
            with open(f'/proc/{pid}/status') as f:
                rss[int(pid)] = next((int(l.split()[1]) for l in f if l.startswith('VmRSS:')), 0)
        except (OSError, ValueError, IndexError):
            continue
    inside = {root}
    for _ in range(8):  # prepare.py, its pool's workers, and whatever those start
        inside |= {pid for pid, parent in parents.items() if parent in inside}
    return sum(rss.get(pid, 0) for pid in inside)
started = time.monotonic()
child = subprocess.Popen(sys.argv[1:], stdout=sys.stderr)
peak = 0
while child.poll() is None:
    peak = max(peak, tree_rss(child.pid))
    time.sleep(0.05)
print(f'{time.monotonic() - started:.1f} {peak}')
sys.exit(child.returncode)
PY
}
echo "# $(grep -m1 -E 'cpu family' /proc/cpuinfo | tr -s ' \t' ' '), $(grep -q avx512_bf16 /proc/cpuinfo && echo avx512_bf16 \
    || echo no avx512_bf16), $(nproc) cores, $(date -u +%F), commit $(git rev-parse --short HEAD)" | tee "$OUT/times.txt"
for mb in ${SIZES:-100 1000}; do  # SIZES: megabytes, for a quick try
    [ -f "$OUT/text-$mb/book.txt" ] || make_text $mb "$OUT/text-$mb/book.txt"
    for workers in 1 2; do
        rm -rf "$OUT/data-$mb-$workers"
        measured=$(peak_tree python prepare.py --input="$OUT/text-$mb" --dataset=c \
            --out_dir="$OUT/data-$mb-$workers" --workers=$workers --progress=false 2> "$OUT/prepare-$mb-$workers.log")
        read -r wall kb <<< "$measured"
        printf '%5s MB in one .txt, %s worker(s): %7.1f s, peak of the process tree %6.0f MB, %s\n' $mb $workers \
            "$wall" "$(echo "$kb / 1024" | bc -l)" "$(grep '^train:' "$OUT/prepare-$mb-$workers.log")" \
            | tee -a "$OUT/times.txt"
    done
done
