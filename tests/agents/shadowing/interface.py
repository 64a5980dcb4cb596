"""The agent's own `interface` module: its name is also one of lk-eval's agent-side modules."""

WHO = "agent"
