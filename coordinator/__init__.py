"""The coordinator: placement engine, storage, scheduler loop, HTTP API, CLI client."""
