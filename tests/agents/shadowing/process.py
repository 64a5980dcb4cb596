"""The agent's own `process` module: its name is also one of lk-eval's agent-side modules."""

WHO = "agent"
