"""Capture acceptance suite: every case starts from an empty compile cache and
a fixed seed."""
import pytest
import torch

import kiln


@pytest.fixture(autouse=True)
def _fresh_kiln():
    kiln.reset()
    torch.manual_seed(0)
    yield
    kiln.reset()
