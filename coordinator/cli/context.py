"""What every command gets: the API, the output format, and where to write."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from pydantic import BaseModel

from .client import Api


@dataclass
class Context:
    api: Api
    json: bool = False
    out: TextIO = field(default_factory=lambda: sys.stdout)

    def lines(self, lines: list[str]) -> None:
        for line in lines:
            print(line, file=self.out)
        self.out.flush()

    def emit(self, data: BaseModel | dict[str, Any] | list[Any], lines: list[str]) -> None:
        """The data as JSON with `-o json`, else the lines."""
        if not self.json:
            self.lines(lines)
            return
        plain = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
        print(json.dumps(plain, indent=2, ensure_ascii=False), file=self.out)
        self.out.flush()
