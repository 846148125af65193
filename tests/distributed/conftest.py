import pytest

import irflow as flow


@pytest.fixture(autouse=True)
def fresh_session():
    """Every test starts from an empty default session and leaves none behind."""
    flow.clear_default_session()
    yield
    flow.clear_default_session()
