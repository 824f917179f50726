"""The node agent: discovery, health, worker environment, runner, local API."""
