"""Cutting a task's log file into chunks for the coordinator, on UTF-8 character boundaries."""

import codecs
from pathlib import Path

from astraeus.shared import LogChunk

CHUNK_BYTES = 256 * 1024
"""At most this much of one task's log in one report."""


def next_chunk(
    task_uid: str, path: Path, offset: int, *, final: bool, limit: int = CHUNK_BYTES
) -> tuple[LogChunk, int] | None:
    """The log from `offset` on (up to `limit` bytes) and the offset after it; None if nothing new.

    A multi-byte character cut by the end of what was read waits for the next chunk, unless the
    task has ended (`final`) and this is the end of the file, when it becomes U+FFFD like any
    other invalid byte.
    """
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            raw = log.read(limit)
            at_end = final and not log.read(1)
    except FileNotFoundError:
        return None
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(raw, final=at_end)
    held_back = len(decoder.getstate()[0])
    if not text:
        return None
    end = offset + len(raw) - held_back
    return LogChunk(task_uid=task_uid, offset=offset, end=end, data=text), end
