from __future__ import annotations

import pytest

from textagent.toolkits import demo


@pytest.fixture(autouse=True)
def _lights():
    demo.reset_lights()
    yield
    demo.reset_lights()
