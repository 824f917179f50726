"""What every command gets: the API, the output format, and where to write."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` alone costs a tenth of `astra status`
    from typing import Any, TextIO

    from .client import Api

_ESCAPES = {
    code: f"\\x{code:02x}" for code in (*range(0x0A), *range(0x0B, 0x20), *range(0x7F, 0xA0))
}
"""Every control character but the newline (C0, DEL, C1), to its escape: `str.translate`'s
table (a regular expression would load `re`, and `enum` with it, into every command)."""


def printable(text: str) -> str:
    """`text` with every control character but the newline (C0, DEL, C1) written as its escape
    (`\\x1b`), so a GPU model, label, name or message from a hostile agent or user cannot move
    the cursor, clear the screen or retitle the terminal of whoever reads it. (`-o json` escapes
    them by itself; `astra logs` prints the run's own output as it is, as `kubectl logs` does.)"""
    return text.translate(_ESCAPES)


class Context:
    """A command's API client, whether it prints JSON (`-o json`), and where it writes."""

    def __init__(self, api: Api, json: bool = False, out: TextIO | None = None) -> None:
        self.api = api
        self.json = json
        self.out = sys.stdout if out is None else out

    def lines(self, lines: list[str]) -> None:
        for line in lines:
            print(printable(line), file=self.out)
        self.out.flush()

    def emit(self, data: Any, lines: list[str]) -> None:
        """The data as JSON with `-o json`, else the lines. `data` is what the API answered
        (plain JSON, printed as it came) or a model (`model_dump`, as the API would write it)."""
        if not self.json:
            self.lines(lines)
            return
        import json  # `-o json`, indented: `json`'s own encoder

        plain = data.model_dump(mode="json") if hasattr(data, "model_dump") else data
        print(json.dumps(plain, indent=2, ensure_ascii=False), file=self.out)
        self.out.flush()
