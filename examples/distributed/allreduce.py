"""`torch.distributed` over `env://`: every process adds RANK + 1 across the world and checks the
sum. NCCL where CUDA is, Gloo elsewhere. Works as one process per worker, under a plain
`torchrun`, and under `per_gpu.py`."""

import os
import sys

import torch
import torch.distributed as dist


def main() -> int:
    cuda = torch.cuda.is_available()
    device = torch.device("cpu")
    if cuda:
        # A worker sees only its own GPUs, numbered from 0.
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")  # reads MASTER_ADDR, ..., RANK
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(total)
    expected = world * (world + 1) / 2
    local = os.environ["LOCAL_RANK"]
    met = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    print(
        f"rank {rank} of {world} (local rank {local}) at {met}:"
        f" sum {total.item():g}, expected {expected:g}"
    )
    dist.destroy_process_group()
    return 0 if total.item() == expected else 1


if __name__ == "__main__":
    sys.exit(main())
