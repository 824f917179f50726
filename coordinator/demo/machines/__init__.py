"""The demo cluster's machine descriptions (the fake machine format of docs/agent.md)."""
