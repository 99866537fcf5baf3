"""Test setup: import the top-level modules, and find tiktoken's GPT-2 files without any network."""

import hashlib
import os
import sys
import tempfile

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

# Developers and CI have ../shared beside the repo; a user has not, and the tests still run.
_shared_cache = os.path.join(os.path.dirname(REPO_ROOT), "shared", "tiktoken_cache")
if os.path.isdir(_shared_cache) and "TIKTOKEN_CACHE_DIR" not in os.environ:
    os.environ["TIKTOKEN_CACHE_DIR"] = _shared_cache

_GPT2_URLS = [
    "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe",
    "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json",
]


def gpt2_files_cached():
    # Mirrors where tiktoken looks, so that a test never makes it download.
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR",
                               os.environ.get("DATA_GYM_CACHE_DIR", os.path.join(tempfile.gettempdir(), "data-gym-cache")))
    names = [hashlib.sha1(url.encode()).hexdigest() for url in _GPT2_URLS]
    return bool(cache_dir) and all(os.path.isfile(os.path.join(cache_dir, name)) for name in names)


@pytest.fixture
def gpt2_files():
    if not gpt2_files_cached():
        pytest.skip("tiktoken's GPT-2 files are not cached (set TIKTOKEN_CACHE_DIR)")
