"""The GPUs this machine has had, kept in the data directory, so a GPU that vanishes is
reported missing (faulted) even across an agent restart, until an operator forgets it."""

import json
import logging
from pathlib import Path

from pydantic import ValidationError

from astraeus.shared import GpuInfo

log = logging.getLogger(__name__)

KNOWN_FILE = "known-gpus.json"


class KnownGpus:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.gpus: dict[str, GpuInfo] = {}
        self._load()

    def get(self, uuid: str) -> GpuInfo | None:
        return self.gpus.get(uuid)

    def missing(self, present: set[str]) -> list[GpuInfo]:
        return [info for uuid, info in self.gpus.items() if uuid not in present]

    def remember(self, infos: list[GpuInfo]) -> None:
        """Keep the latest identity of each GPU; write the file when the set of GPUs changed."""
        changed = any(info.uuid not in self.gpus for info in infos)
        self.gpus.update({info.uuid: info for info in infos})
        if changed:
            self._save()

    def forget(self, uuid: str) -> bool:
        """Stop expecting this GPU (it was removed on purpose); True when it was known."""
        if self.gpus.pop(uuid, None) is None:
            return False
        self._save()
        return True

    def _load(self) -> None:
        try:
            saved = json.loads(self.path.read_text())
            self.gpus = {u: GpuInfo.model_validate(g) for u, g in saved.get("gpus", {}).items()}
        except FileNotFoundError:
            return
        except (OSError, ValueError, ValidationError) as exc:
            log.warning("cannot read the known GPUs from %s: %s", self.path, exc)

    def _save(self) -> None:
        identity = {"health", "nvlink_domain"}
        body = {
            "gpus": {u: g.model_dump(mode="json", exclude=identity) for u, g in self.gpus.items()}
        }
        try:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(body, indent=1))
            tmp.replace(self.path)
        except OSError as exc:
            log.warning("cannot save the known GPUs to %s: %s", self.path, exc)
