"""GPU health: Xid classification and at-risk signals over time windows."""

from .signals import HealthPolicy
from .tracker import HealthTracker
from .xid import XidClass, classify_xid

__all__ = ["HealthPolicy", "HealthTracker", "XidClass", "classify_xid"]
