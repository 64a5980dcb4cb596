"""A test agent whose module cannot be imported."""

from __future__ import annotations

import lkeval_no_such_module  # noqa: F401
