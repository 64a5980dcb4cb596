"""The agent's own `fork_server` module: its name is also one of lk-eval's agent-side modules."""

WHO = "agent"
