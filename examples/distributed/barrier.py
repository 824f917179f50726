"""A rendezvous in pure Python with `env://`'s meaning, for trying a cluster without PyTorch.

Worker 0 listens on MASTER_ADDR:MASTER_PORT; every other worker connects and says its RANK and
WORLD_SIZE; once all WORLD_SIZE - 1 have, worker 0 checks that they agree and releases them.
Each worker prints one line (`rank 1 of 2 (local rank 0): barrier at 10.0.0.5:29500 passed`) and
exits 0, or says what disagreed and exits 1.
"""

import os
import socket
import sys
import time

TIMEOUT_SECONDS = 60.0


def main() -> int:
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    problem = lead(addr, port, world) if rank == 0 else follow(addr, port, rank, world)
    who = f"rank {rank} of {world} (local rank {os.environ.get('LOCAL_RANK', '0')})"
    if problem:
        print(f"{who}: barrier at {addr}:{port} failed: {problem}", flush=True)
        return 1
    print(f"{who}: barrier at {addr}:{port} passed", flush=True)
    return 0


def lead(addr: str, port: int, world: int) -> str | None:
    """Worker 0: wait for the others, check them, release them."""
    with socket.create_server((addr, port)) as server:
        server.settimeout(TIMEOUT_SECONDS)
        peers, seen = [], set()
        while len(peers) < world - 1:
            conn, _ = server.accept()
            their_rank, their_world = (int(x) for x in conn.makefile().readline().split())
            if their_world != world or not 0 < their_rank < world or their_rank in seen:
                conn.close()
                return f"rank {their_rank} says WORLD_SIZE {their_world}, expected {world}"
            seen.add(their_rank)
            peers.append(conn)
        for conn in peers:
            conn.sendall(f"go {world}\n".encode())
            conn.close()
    return None


def follow(addr: str, port: int, rank: int, world: int) -> str | None:
    """Any other worker: connect (worker 0 may start later), say who it is, wait to be let go."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=TIMEOUT_SECONDS)
            break
        except OSError:
            if time.monotonic() > deadline:
                return f"no worker 0 listening at {addr}:{port}"
            time.sleep(0.2)
    with conn:
        conn.sendall(f"{rank} {world}\n".encode())
        answer = conn.makefile().readline().split()
    if answer != ["go", str(world)]:
        return f"worker 0 answered {answer}"
    return None


if __name__ == "__main__":
    sys.exit(main())
