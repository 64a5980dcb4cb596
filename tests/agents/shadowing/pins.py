"""The agent's own `pins` module: its name is also one of lk-eval's host modules."""

WHO = "agent"
