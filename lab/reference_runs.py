"""Twenty short float32 runs (every tie mode, the premise of (*), input_grad_scale, Muon, each end's rate and decay,
--untie_at under AdamW and Muon, dropout with gradient accumulation and a padded head, and a resume) whose every
training loss (as float.hex), metrics.csv row (without its times) and final weights (sha256) are recorded, so that
a rewrite of train.py or model.py can be shown to compute the same thing bit for bit, on the same CPU and torch:

    python prepare.py --input=tinyshakespeare.txt --out_dir=DATA_DIR/shakespeare_char   # the runs read it there
    python lab/reference_runs.py DATA_DIR OUT.json [REPO]      # REPO: another checkout to run (default: this one)
    python -c "import json; a, b = (json.load(open(f)) for f in ('A.json', 'B.json')); print([k for k in a if a[k] != b[k]])"

docs/results/reference-runs/ holds the record made before the reading path's rewrite (Zen 4, torch 2.13.0+cpu);
the same machine kind gives [] against it after. Other CPUs or torch versions round differently: record both there.
"""
import contextlib
import csv
import hashlib
import io
import json
import os
import sys
import tempfile

data_dir, out = (os.path.abspath(p) for p in sys.argv[1:3])
repo = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, repo)
os.chdir(repo)
import torch
torch.set_num_threads(1)
import model as model_module
import train

losses = []
original_forward = model_module.GPT.forward
def recording_forward(self, *args, **kwargs):
    logits, loss = original_forward(self, *args, **kwargs)
    if self.training and loss is not None:
        losses.append(loss.detach().float().item().hex())
    return logits, loss
model_module.GPT.forward = recording_forward

BASE = ['--dataset=shakespeare_char', f'--data_dir={data_dir}', '--n_layer=2', '--n_head=2', '--n_embd=32',
        '--block_size=16', '--batch_size=8', '--max_iters=20', '--eval_interval=10', '--eval_iters=2',
        '--log_interval=1', '--warmup_iters=4', '--learning_rate=3e-3', '--device=cpu', '--dtype=float32',
        '--compile=false', '--progress=false']
RUNS = {mode: [f'--tie_mode={mode}'] for mode in model_module.TIE_MODES}
RUNS.update({
    'tied_zero_emb_scale': ['--tie_mode=tied', '--zero_init_residual=true', '--emb_scale=true'],
    'pit_zero_emb_scale': ['--tie_mode=pit', '--zero_init_residual=true', '--emb_scale=true'],
    'tied_igs4': ['--tie_mode=tied', '--input_grad_scale=4'],
    'muon_tied': ['--tie_mode=tied', '--optimizer=muon'],
    'muon_untied_rates': ['--tie_mode=untied', '--optimizer=muon', '--embed_lr=3e-2', '--head_lr=1e-2',
                          '--ends_decay=per_step'],
    'adamw_untied_rates': ['--tie_mode=untied', '--embed_lr=3e-2', '--head_lr=1e-2', '--ends_decay=none'],
    'untie_at': ['--tie_mode=tied', '--untie_at=0.5'],
    'untie_at_muon': ['--tie_mode=small_init', '--untie_at=0.5', '--optimizer=muon'],
    'dropout_accum_pad': ['--tie_mode=shuffle', '--dropout=0.1', '--gradient_accumulation_steps=2',
                          '--pad_vocab=true'],
})

def weights_hash(state):
    h = hashlib.sha256()
    for name in sorted(state):
        h.update(name.encode()); h.update(state[name].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()

def run(args):
    losses.clear()
    with contextlib.redirect_stdout(io.StringIO()):
        summary = train.train(train.parse_train_args(args))
    rows = [{k: v for k, v in r.items() if k not in ('tokens_per_sec', 'elapsed_s')}
            for r in csv.DictReader(open(os.path.join([a for a in args if a.startswith('--out_dir=')][-1].split('=', 1)[1], 'metrics.csv')))]
    return dict(losses=list(losses), weights=weights_hash(summary['model'].state_dict()), metrics=rows,
                best_val_loss=float(summary['best_val_loss']).hex(), fingerprint=summary['data_fingerprint'])

record = {}
with tempfile.TemporaryDirectory() as tmp:
    for name, extra in RUNS.items():
        record[name] = run(BASE + extra + [f'--out_dir={tmp}/{name}'])
        print(name, record[name]['losses'][-1], record[name]['weights'][:12], flush=True)
    # a resume: 10 iterations, then 10 more from the checkpoint, with the schedule pinned to 20
    resume = BASE + ['--tie_mode=shuffle', '--dropout=0.1', '--lr_decay_iters=20', '--eval_interval=5',
                     f'--out_dir={tmp}/resume']
    first = run([a for a in resume if a != '--max_iters=20'] + ['--max_iters=10'])
    second = run(resume + ['--init_from=resume'])
    record['resume'] = dict(second, losses=first['losses'] + second['losses'])
    print('resume', record['resume']['losses'][-1], record['resume']['weights'][:12])
cpuinfo = open('/proc/cpuinfo').read() if os.path.exists('/proc/cpuinfo') else ''
family = next((line.split(':')[1].strip() for line in cpuinfo.splitlines() if line.startswith('cpu family')), '?')
machine = f"torch {torch.__version__}, cpu family {family}, {'avx512_bf16' if 'avx512_bf16' in cpuinfo else 'no avx512_bf16'}"
with open(out, 'w') as f:
    json.dump(dict(record, _machine=machine), f, indent=1)
