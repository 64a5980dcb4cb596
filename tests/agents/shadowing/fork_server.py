"""The agent's own `fork_server` module: its name is also one of lk-eval's host modules."""

WHO = "agent"
