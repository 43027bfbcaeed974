"""Test doubles that stand in for the outside world: the scripted LLM server (llm_server)."""
