"""Topology: RDMA ports from sysfs, NVLink domains from GPU fabric info, IMEX channels."""
