"""Xid classification (docs/hardware.md §2): fatal ones fault the GPU until it is reset or
re-validated, application errors do not count, the rest are at-risk signals."""

from enum import StrEnum


class XidClass(StrEnum):
    FATAL = "fatal"
    AT_RISK = "at_risk"
    APPLICATION = "application"


FATAL_XIDS = frozenset(
    {
        46,  # GPU stopped processing: catalogue action RESET_GPU
        48,  # double-bit ECC error
        62,  # internal micro-controller halt: RESET_GPU
        64,  # row remapping failure: RESET_GPU
        74,  # NVLink error
        79,  # GPU has fallen off the bus
        95,  # uncontained memory error
        110,  # security fault: RESET_GPU
        119,  # GSP RPC timeout
        120,  # GSP error
        136,  # NVLink training failed: RESET_GPU
        140,  # unrecoverable ECC error escape
        143,  # GPU init error: RESET_GPU
        151,  # key rotation error (confidential computing): RESTART_VM
        155,  # NVLink software-defined error: RESET_GPU
        158,  # GPU fatal timeout: RESET_GPU
        167,  # PCIe fatal timeout
        171,  # uncorrectable DRAM error (with Xid 48)
        172,  # uncorrectable SRAM error
    }
)
"""The catalogue's RESET_GPU/RESTART_BM Xids plus DCGM's always-fatal set."""

NVLINK5_XIDS = frozenset(range(144, 151))
"""NVLink5 (Blackwell) unit errors. The catalogue decodes each by the unit's error status, which
only the kernel log carries (an NVML event gives the number alone): many are IGNORE, some are
RESET_GPU. At risk here; when the decode calls for a reset, the driver also sets the GPU recovery
action (Xid 154, NVML field 230), which the agent reads on the rescan the event triggers and which
then faults the GPU."""

APPLICATION_XIDS = frozenset({8, 13, 31, 32, 39, 40, 41, 43, 45, 60, 68, 69})
"""Errors of the application (its process is killed; the GPU is fine): the catalogue's
RESTART_APP bucket. 13, 31, 43, 45 and 68 are also what NVIDIA's device plugin ignores."""

NAMES = {
    46: "GPU stopped processing",
    48: "double-bit ECC error",
    54: "auxiliary power not connected",
    62: "internal micro-controller halt",
    63: "row remapping event",
    64: "row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained memory error",
    95: "uncontained memory error",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link corrected error",
    136: "NVLink training failed",
    140: "unrecoverable ECC error escape",
    143: "GPU initialization error",
    144: "NVLink5 SAW error",
    145: "NVLink5 RLW error",
    146: "NVLink5 TLW error",
    147: "NVLink5 TREX error",
    148: "NVLink5 NVLPW_CTRL error",
    149: "NVLink5 NETIR error",
    150: "NVLink5 MSE error",
    151: "key rotation error",
    154: "GPU recovery action changed",
    155: "NVLink software-defined error",
    156: "resource retirement event",
    157: "resource retirement failure",
    158: "GPU fatal timeout",
    999: "unknown Xid",
}


def classify_xid(xid: int) -> XidClass:
    if xid in FATAL_XIDS:
        return XidClass.FATAL
    if xid in APPLICATION_XIDS:
        return XidClass.APPLICATION
    return XidClass.AT_RISK


def describe_xid(xid: int) -> str:
    """`Xid 79 (GPU has fallen off the bus)` or `Xid 157`."""
    name = NAMES.get(xid)
    return f"Xid {xid} ({name})" if name else f"Xid {xid}"
