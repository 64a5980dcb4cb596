"""The agent's own `tape` module: its name is also one of lk-eval's host modules."""

WHO = "agent"
