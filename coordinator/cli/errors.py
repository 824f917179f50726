"""Exit codes and the one error type every command raises: a sentence, never a traceback."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


class Exit:
    """What `astra` exits with; scripts can tell these apart. Plain numbers, not an `IntEnum`:
    `enum` alone costs a fifth of `astra status` (issue 29)."""

    OK = 0
    FAILED = 1
    """The coordinator refused the request (for example a run name already taken)."""
    USAGE = 2
    """Bad flags or a bad spec: the message names the field."""
    UNREACHABLE = 3
    """No answer from the coordinator."""
    AUTH = 4
    """No token, a wrong token, or a token without the right to do this."""
    NOT_FOUND = 5
    """No run, task, machine, workspace or token of that name."""


class CliError(Exception):
    """A failure told to the user as one sentence (and maybe field lines), with its exit code."""

    def __init__(self, message: str, code: int = Exit.FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def refusal(error: str, fields: Iterable[tuple[object, object]]) -> str:
    """A refusal and one indented line per field, as `astra` prints the coordinator's (and its
    own, for a body it would not send); a pattern said in words, as the console says it."""
    fields = list(fields)
    if not fields:  # `no run named 'x'`: said without loading pydantic
        return error
    from astraeus.shared.validation import in_words  # pydantic: only to word a field's problem

    lines = (
        f"  {field}: {_CLI_WORDS.get((str(field), str(problem))) or in_words(str(problem))}"
        for field, problem in fields
    )
    return "\n".join([error, *lines])


_CLI_WORDS = {
    ("workspace", "is required for an admin"): "is required for an admin's token: pass"
    " --workspace NAME or set ASTRA_WORKSPACE",
}
"""A field's problem as the coordinator says it, to how `astra` says it: with its own flags."""
