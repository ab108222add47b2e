import pytest
import torch


@pytest.fixture(autouse=True)
def autocast_state_is_restored():
    """Every test starts and ends with torch's default autocast state on this thread."""
    before = (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"),
              torch.is_autocast_cache_enabled())
    yield
    after = (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"),
             torch.is_autocast_cache_enabled())
    assert after == before
