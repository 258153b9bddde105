"""The tests of this folder need Ray (skipped without it); its session is the
``ray_session`` fixture of tests/conftest.py."""
import os

import pytest

# A local session on the loopback interface only (read by Ray when it is imported).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
pytest.importorskip("ray", reason="Ray is not installed (pip install '.[distributed]')")
