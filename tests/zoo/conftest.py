"""Every zoo test starts and ends in eager mode, even when a GRAPH-mode run fails midway."""
import pytest

import dualflow as flow


@pytest.fixture(autouse=True)
def eager_mode_restored():
    flow.set_mode(flow.EAGER)
    yield
    flow.set_mode(flow.EAGER)
