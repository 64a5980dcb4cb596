"""The agent's own `siblings` module: its name is also one of lk-eval's host modules."""

WHO = "agent"
