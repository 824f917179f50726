"""Hugging Face Accelerate: every process adds its index + 1 across the world and checks the sum.
Started by `accelerate launch` with no flags in a worker (Astraeus writes the worker's share of
the run into Accelerate's config), or by `torchrun`. NCCL where CUDA is, Gloo elsewhere."""

import os
import sys

import torch
from accelerate import PartialState
from accelerate.utils import reduce


def main() -> int:
    # Reads RANK, WORLD_SIZE, MASTER_ADDR, ... as torchrun set them; without CUDA, Accelerate
    # meets over Gloo only when told the processes run on CPUs.
    state = PartialState(cpu=not torch.cuda.is_available())
    rank, world = state.process_index, state.num_processes
    total = reduce(torch.tensor([float(rank + 1)], device=state.device), reduction="sum")
    expected = world * (world + 1) / 2
    local = state.local_process_index
    met = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    print(
        f"rank {rank} of {world} (local rank {local}) at {met}:"
        f" sum {total.item():g}, expected {expected:g}"
    )
    state.destroy_process_group()
    return 0 if total.item() == expected else 1


if __name__ == "__main__":
    sys.exit(main())
