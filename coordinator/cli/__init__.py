"""`astra`: the user's command line (`astraeus.coordinator.cli:main`)."""

from .main import main

__all__ = ["main"]
