"""The agent's own `protocol` module: its name is also one of lk-eval's agent-side modules."""

WHO = "agent"
