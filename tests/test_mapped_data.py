"""Prepared data larger than memory: a split whose int64 copy would pass prepared_data.IN_MEMORY_MAX_BYTES is read
from its .bin file (memory-mapped) instead of held in memory, chosen by itself; both give the same batches bit for
bit, the run the same losses, and the header says which it used."""

import contextlib
import io
import os

import numpy as np
import pytest
import torch

import train
from conftest import tiny_train_args
from lib import prepared_data
from lib.prepared_data import MappedTokens, load_splits
from train import get_batch


def test_the_choice_follows_the_size_and_both_give_the_same_batches(tiny_data):
    cfg = dict(data_dir=tiny_data, dataset='tiny', block_size=16)
    held, _ = load_splits(cfg)
    assert all(isinstance(tokens, torch.Tensor) for tokens in held.values())  # small: in memory, the faster path
    train_bytes = 8 * len(held['train'])
    mapped, _ = load_splits(cfg, in_memory_max_bytes=train_bytes - 1)  # train is too large for it, val is not
    assert isinstance(mapped['train'], MappedTokens) and isinstance(mapped['val'], torch.Tensor)
    assert prepared_data.where_held(mapped) == 'memory-mapped from train.bin'
    assert prepared_data.where_held(held) == 'in memory'
    assert len(mapped['train']) == len(held['train'])
    a, b = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    for _ in range(20):
        for x, y in zip(get_batch(held['train'], 8, 16, a), get_batch(mapped['train'], 8, 16, b)):
            assert x.dtype == y.dtype == torch.int64 and torch.equal(x, y)


def test_the_mapped_split_is_read_from_its_file_not_copied(tiny_data):
    mapped, meta = load_splits(dict(data_dir=tiny_data, dataset='tiny', block_size=16), in_memory_max_bytes=0)
    tokens = mapped['train'].tokens
    assert isinstance(tokens, np.memmap) and tokens.dtype == np.dtype(meta['dtype'])  # 2 bytes a token, on disk


def test_a_run_on_mapped_data_trains_as_one_in_memory_and_says_so(tiny_data, tmp_path, monkeypatch):
    def run(name):
        printed = io.StringIO()
        args = tiny_train_args(tiny_data, str(tmp_path / name), max_iters=10, eval_interval=5)
        with contextlib.redirect_stdout(printed):
            summary = train.train(train.parse_train_args(args))
        return summary, printed.getvalue()
    held, held_out = run('held')
    monkeypatch.setattr(prepared_data, 'IN_MEMORY_MAX_BYTES', 0)
    mapped, mapped_out = run('mapped')
    assert 'in memory' in held_out.splitlines()[0]
    assert 'memory-mapped from train.bin, val.bin' in mapped_out.splitlines()[0]
    assert mapped['val_loss'] == held['val_loss'] and mapped['data_fingerprint'] == held['data_fingerprint']
    for (name, a), b in zip(held['model'].state_dict().items(), mapped['model'].state_dict().values()):
        assert torch.equal(a, b), name


def test_only_the_splits_held_in_memory_count_against_the_machines_memory(tiny_data, monkeypatch):
    from lib import memory
    from lib.command_line import UserError
    monkeypatch.setattr(memory, 'device_memory', lambda device: 1024)  # a machine of 1 KiB
    cfg = dict(data_dir=tiny_data, dataset='tiny', block_size=16)
    with pytest.raises(UserError, match='holds a split of up to'):
        load_splits(cfg)  # held in memory, the tiny corpus needs more than 1 KiB
    mapped, _ = load_splits(cfg, in_memory_max_bytes=0)  # both stay in their files: nothing to refuse
    assert all(isinstance(tokens, MappedTokens) for tokens in mapped.values())


def test_a_start_checks_the_ids_against_meta_json_and_reads_no_token(tiny_data, tmp_path, monkeypatch, capsys):
    """prepare.py records each split's largest id, so load_splits checks the vocabulary without reading a split (a
    start on OpenWebText read 18 GB on every rank for it); a dataset prepared before the key is read once a start,
    and says so in one line."""
    import json
    import shutil
    meta = json.loads(open(os.path.join(tiny_data, 'tiny', 'meta.json'), encoding='utf-8').read())
    tokens = {split: np.fromfile(os.path.join(tiny_data, 'tiny', f'{split}.bin'), dtype=meta['dtype'])
              for split in ('train', 'val')}
    assert meta['largest_id'] == {split: int(ids.max()) for split, ids in tokens.items()}
    checked = []
    real = prepared_data.check_token_ids
    monkeypatch.setattr(prepared_data, 'check_token_ids', lambda path, ids, *a: (checked.append(len(ids)),
                                                                                  real(path, ids, *a)))
    load_splits(dict(data_dir=tiny_data, dataset='tiny', block_size=16))
    assert checked == [1, 1] and 'prepared before' not in capsys.readouterr().out
    older = tmp_path / 'older'
    shutil.copytree(os.path.join(tiny_data, 'tiny'), older / 'tiny')
    (older / 'tiny' / 'meta.json').write_text(json.dumps({k: v for k, v in meta.items() if k != 'largest_id'}))
    checked.clear()
    load_splits(dict(data_dir=str(older), dataset='tiny', block_size=16))
    assert sum(checked) == sum(len(ids) for ids in tokens.values())
    assert "prepared before meta.json recorded each split's largest id" in capsys.readouterr().out
