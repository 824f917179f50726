"""The GPUs this machine has had, kept in the data directory, so a GPU that vanishes is
reported missing (faulted) even across an agent restart, until an operator forgets it.

They are kept per GPU backend: a GPU that one backend lists (an Intel GPU under `intel`) is
never expected by another (`nvml`), so trying a backend (`astraeus-agent inspect --backend
intel`) cannot make the agent's own backend report a GPU missing. The file of an older agent
(one flat `gpus` map) is read too: each GPU goes to the backend that reads its vendor once that
backend opens the file; the others wait, expected by no backend, and the next write keeps them."""

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from astraeus.shared import GpuInfo, Vendor

log = logging.getLogger(__name__)

KNOWN_FILE = "known-gpus.json"
FORMAT = 2
"""1 (no `format` key): `{"gpus": {uuid: GpuInfo}}`; 2: `{"format": 2, "backends": {backend:
{uuid: GpuInfo}}, "unsorted": {uuid: GpuInfo}}`, unsorted holding format 1's GPUs that no
backend has taken yet."""
_IDENTITY_ONLY = {"health", "nvlink_domain"}


class KnownGpus:
    """The known GPUs of one backend (`backend`, the name the backend reports), which reads
    the GPUs of `vendors` (empty: no vendor, as the `none` backend). `read_only` never writes
    the file (`inspect`): what is learnt is kept in memory only."""

    def __init__(
        self,
        path: Path,
        backend: str = "",
        vendors: Iterable[Vendor] = (),
        *,
        read_only: bool = False,
    ) -> None:
        self.path, self.backend, self.read_only = path, backend, read_only
        self.vendors = frozenset(vendors)
        self.gpus: dict[str, GpuInfo] = {}
        self._others: dict[str, dict[str, Any]] = {}
        """The other backends' sections, as read: written back unchanged."""
        self._unsorted: dict[str, dict[str, Any]] = {}
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
            if not isinstance(saved, dict):
                raise ValueError("not a JSON object")
            if saved.get("format", 1) == 1:
                self._unsorted = dict(saved.get("gpus", {}))
                adopted = self._adopt()
            else:
                self._others = dict(saved.get("backends", {}))
                self._unsorted = dict(saved.get("unsorted", {}))
                mine = self._others.pop(self.backend, {})
                self.gpus = {u: GpuInfo.model_validate(g) for u, g in mine.items()}
                adopted = self._adopt()
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError, AttributeError, ValidationError) as exc:
            log.warning("cannot read the known GPUs from %s: %s", self.path, exc)
            return
        if adopted:
            self._save()

    def _adopt(self) -> bool:
        """Take the unsorted GPUs (from a format 1 file) of this backend's vendors."""
        taken = False
        for uuid, saved in list(self._unsorted.items()):
            info = GpuInfo.model_validate(saved)
            if info.vendor in self.vendors:
                self.gpus[uuid] = info
                del self._unsorted[uuid]
                taken = True
        return taken

    def _save(self) -> None:
        if self.read_only:
            return
        mine = {u: g.model_dump(mode="json", exclude=_IDENTITY_ONLY) for u, g in self.gpus.items()}
        backends = {**self._others, self.backend: mine}
        body: dict[str, Any] = {"format": FORMAT, "backends": backends}
        if self._unsorted:
            body["unsorted"] = self._unsorted
        try:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(body, indent=1))
            tmp.replace(self.path)
        except OSError as exc:
            log.warning("cannot save the known GPUs to %s: %s", self.path, exc)
