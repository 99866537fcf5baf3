#!/usr/bin/env bash
# prepare.py on a corpus larger than memory (lib/corpus.py): synthetic corpora of about 0.2 GB and 1 GB (jsonl files
# of tiny shakespeare's paragraphs in a seeded order), tokenized with one worker and with two; the wall time and the
# peak memory of the largest process (GNU time's maximum resident set size) of each. Run on a quiet machine:
#   bash docs/measure_corpus.sh [TEXT] [OUT]   # TEXT: a UTF-8 file to draw paragraphs from (default tiny shakespeare)
set -euo pipefail
cd "$(dirname "$0")/.."
TEXT=${1:-data/_sources/tinyshakespeare.txt}
OUT=${2:-out-measure-corpus}
mkdir -p "$OUT"
make_corpus() {  # MB FOLDER: about MB megabytes of jsonl, 64 MB a file
    python - "$TEXT" "$1" "$2" <<'PY'
import json, os, random, sys
text, mb, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
paragraphs = [p for p in open(text, encoding='utf-8').read().split('\n\n') if p.strip()]
rng, written, k = random.Random(0), 0, 0
os.makedirs(folder, exist_ok=True)
while written < mb * 2 ** 20:
    with open(os.path.join(folder, f'part{k:04d}.jsonl'), 'w', encoding='utf-8') as f:
        size = 0
        while size < 64 * 2 ** 20 and written + size < mb * 2 ** 20:
            doc = json.dumps({'text': '\n\n'.join(rng.choices(paragraphs, k=rng.randint(5, 40)))}) + '\n'
            f.write(doc)
            size += len(doc.encode('utf-8'))
    written, k = written + size, k + 1
PY
}
echo "# $(grep -m1 -E 'cpu family' /proc/cpuinfo | tr -s ' \t' ' '), $(nproc) cores, $(date -u +%F)" | tee "$OUT/times.txt"
for mb in 200 1000; do
    [ -d "$OUT/corpus-$mb" ] || make_corpus $mb "$OUT/corpus-$mb"
    for workers in 1 2; do
        rm -rf "$OUT/data-$mb-$workers"
        /usr/bin/time -f "%e %M" -o "$OUT/time.tmp" python prepare.py --input="$OUT/corpus-$mb" --dataset=c \
            --out_dir="$OUT/data-$mb-$workers" --workers=$workers --progress=false > "$OUT/prepare-$mb-$workers.log"
        read -r wall kb < "$OUT/time.tmp"
        printf '%5s MB, %s worker(s): %7.1f s, peak %6.0f MB, %s\n' $mb $workers "$wall" "$(echo "$kb / 1024" | bc -l)" \
            "$(grep '^train:' "$OUT/prepare-$mb-$workers.log")" | tee -a "$OUT/times.txt"
    done
done
