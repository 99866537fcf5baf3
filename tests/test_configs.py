"""The recipes under config/: each resolves with the script its header runs it with, each that names a base
config writes only what it changes, and every config a command in the docs or a shell script names exists."""
import glob
import os
import re

import pytest

import ablate
import train
from conftest import REPO_ROOT
from lib import command_line

CONFIGS = sorted(glob.glob(os.path.join(REPO_ROOT, "config", "*.py")))
PARSERS = {"train": train.parse_train_args, "ablate": ablate.parse_args}


def commands_in_header(path):
    """The scripts the file's own comments run it with: `python ablate.py config/NAME.py ...`."""
    text = open(path, encoding="utf-8").read()
    return set(re.findall(rf"python (\w+)\.py config/{re.escape(os.path.basename(path))}\b", text))


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_every_config_resolves_with_the_scripts_its_header_names(path):
    scripts = commands_in_header(path) & set(PARSERS)
    assert scripts, f"{path}: its header should say how to run it (python ablate.py or train.py config/...)"
    settings = command_line._config_settings(path)
    for script in scripts:
        cfg = PARSERS[script]([path])
        # every value the file and its bases write arrives, the file's own over its base's
        for name, value in dict((name, value) for _, name, value in settings).items():
            assert cfg[name] == value, (script, name)


@pytest.mark.parametrize("path", [p for p in CONFIGS if "base_config" in command_line._read_config_file(p)],
                         ids=os.path.basename)
def test_a_config_with_a_base_writes_only_what_it_changes(path):
    own = command_line._read_config_file(path)
    base = os.path.join(os.path.dirname(path), own.pop("base_config"))
    inherited = {name: value for _, name, value in command_line._config_settings(base)}
    repeated = sorted(name for name, value in own.items() if name in inherited and inherited[name] == value)
    assert not repeated, f"{path} repeats its base's {', '.join(repeated)}"


def test_every_config_named_in_the_docs_and_scripts_exists():
    sources = [*glob.glob(os.path.join(REPO_ROOT, "*.md")), *glob.glob(os.path.join(REPO_ROOT, "docs", "*.md")),
               *glob.glob(os.path.join(REPO_ROOT, "config", "*")), *glob.glob(os.path.join(REPO_ROOT, "docs", "*.sh"))]
    named = set()
    for source in sources:
        named.update(re.findall(r"\bconfig/(\w+\.py)\b", open(source, encoding="utf-8").read()))
    assert "ablate_bpe_2026.py" in named  # the pattern does find the names it checks
    missing = sorted(name for name in named if not os.path.isfile(os.path.join(REPO_ROOT, "config", name)))
    assert not missing
