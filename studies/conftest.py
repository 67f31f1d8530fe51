"""
The studies' tests import the core (train, data, model, ...) from the repository root and the studies' own
modules (experiments, sweep, compare, bench, ...) from this folder, as the scripts here do when run, and
tests/test_cli.py's tiny runs from tests/.
"""

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for folder in (HERE.parent, HERE.parent / "tests", HERE):  # tests/: test_cli's runs, which two tests here reuse
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from support import checkpoint  # noqa: E402  (after the path is set)
import model as modeling  # noqa: E402


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    """A tiny BERT's config.json: a plan reads the model type (bert) from it for Table 4's p and q."""
    d = tmp_path_factory.mktemp("tiny_config")
    cfg = modeling.Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                          max_position_embeddings=64)
    checkpoint.save_pretrained(modeling.Model(cfg, 2), d)
    return d
