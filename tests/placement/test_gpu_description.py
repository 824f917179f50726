"""A GPU's description, as the free-kind filters read it (`kinds.gpu_description`), is the plain
values of its vendor and health: the same tuple, hash and order as `.value` gives, for every
vendor and health state (it reads the enums' `_value_` attribute, which is quicker)."""

from __future__ import annotations

import itertools

from astraeus.coordinator.placement.cache.kinds import gpu_description
from astraeus.shared import GpuInfo
from astraeus.shared.choices import Vendor
from astraeus.shared.report import GpuHealth, GpuHealthState


def test_every_vendor_and_health_is_described_by_its_plain_values() -> None:
    for vendor, state in itertools.product(Vendor, GpuHealthState):
        gpu = GpuInfo(
            index=0,
            uuid="GPU-0",
            vendor=vendor,
            model="Some GPU",
            memory_bytes=80 * 2**30,
            health=GpuHealth(state=state),
        )
        described = gpu_description(gpu)
        assert described == (vendor.value, "Some GPU", 80 * 2**30, state.value)
        assert [type(part) for part in described] == [str, str, int, str]
