"""The agent's own `agent_host` module: its name is also one of lk-eval's host modules."""

WHO = "agent"
