"""Test helpers for lk-eval: a scripted OpenAI-compatible LLM, so evals run without an API key."""
