"""The coordinator's JSON read and a request body written with `json`'s C half (`_json`) alone.

`import json` loads `re` (and `enum` with it) for the pure-Python half, which the everyday
commands never use: together a third of `astra status` (issue 29). `loads` and `dumps` here run
the C scanner and encoder that `json.loads` and `json.dumps` run with their default settings, and
whatever they do not take as it comes (an error, a byte-order mark, UTF-16) is handed to `json`
itself, so every answer and every error is `json`'s own (`tests/cli/test_quick.py` compares
them). `-o json`'s indented output is `json`'s: it is not on the everyday path's bill.
"""

from __future__ import annotations

import _json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}
_SPACE = " \t\n\r"
"""JSON's whitespace (RFC 8259 §2), what `json.decoder.WHITESPACE` matches."""


class _Decoding:
    """What the C scanner reads of a `json.JSONDecoder`: its default settings."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


_scan = _json.make_scanner(_Decoding())  # type: ignore[arg-type]  # typeshed: a JSONDecoder


def _refuse(_value: object) -> object:
    raise TypeError("not JSON")  # `json.dumps` says it in its words: see `dumps`


_encode = _json.make_encoder(
    {}, _refuse, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True
)
"""`json.dumps(value)`'s C encoder, with its settings (`check_circular`, `ensure_ascii`,
`allow_nan`, the default separators)."""


def loads(data: bytes | str) -> Any:
    """`json.loads(data)`."""
    try:
        if isinstance(data, bytes):
            if 0 in data[:4] or data.startswith(b"\xef\xbb\xbf"):  # UTF-16/32 or a BOM
                raise ValueError(data[:4])
            text = data.decode("utf-8", "surrogatepass")  # as `json.loads` decodes UTF-8
        else:
            text = data
        start = len(text) - len(text.lstrip(_SPACE))
        value, end = _scan(text, start)
        if text[end:].strip(_SPACE):
            raise ValueError(end)
        return value
    except (ValueError, StopIteration):
        import json  # the error in `json`'s words, or what `json` makes of the rest

        return json.loads(data)


def dumps(value: object) -> str:
    """`json.dumps(value)`."""
    try:
        return "".join(_encode(value, 0))
    except (TypeError, ValueError):
        import json

        return json.dumps(value)
