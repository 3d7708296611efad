"""The errors a user can cause and act on. Anything else is a bug."""

from __future__ import annotations

import reprlib
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A value from a file in a message: bounded in length and depth, whatever the file holds (a
# list of millions of entries, or nested hundreds deep, would make the message the problem).
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 3
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = 6
_SHOWN.maxstring = 40
_SHOWN.maxother = 40
_SHOWN_CHARS = 100


def shown(value: object) -> str:
    """``repr(value)`` cut to about a hundred characters and three levels of nesting."""
    text = _SHOWN.repr(value)
    return text if len(text) <= _SHOWN_CHARS else f"{text[: _SHOWN_CHARS - 3]}..."


class VramguiError(Exception):
    """Base of every error that carries a message meant for the user.

    ``str(error)`` is the command line's wording; ``error.words(say)`` is another front end's,
    where the message is a :class:`Message` that names settings.
    """

    def words(self, say: Say) -> str:
        """The message with each setting it names worded by ``say``."""
        return (
            words(self.args[0], say)
            if len(self.args) == 1 and isinstance(self.args[0], str)
            else str(self)
        )


class ConfigError(VramguiError):
    """A model description (config.json, header, metadata) is missing, malformed or unsupported."""


class WorkloadError(VramguiError):
    """The chosen settings are invalid or do not apply to this model."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One of vramgui's settings, as a message names it: each front end words it its own way
    (``--seq 40,000`` on the command line, ``Context “40,000”`` in the window).

    Attributes:
        name: the setting's field name (``Workload.kv_dtype``, ``LlamaCppLayout.n_cpu_moe``).
        value: the value the message is about; None names the setting alone.
    """

    name: str
    value: object = None


@dataclass(frozen=True, slots=True)
class Command:
    """A command of vramgui's own that a message points to (``vramgui search llama``); the
    window points to its own place for the same thing."""

    name: str
    args: str = ""


Term = Setting | Command
# A front end's words for a term, given the term and its value as the message formats it
# ("" for a setting named alone or a command).
Say = Callable[[Term, str], str]


# Settings whose command-line option is not their field's name. ``overhead_bytes`` is given in
# GiB on the command line (``--overhead-gib``); a refusal of the bytes a file holds keeps its
# own word for them.
OPTIONS = {
    "draft_model": "speculative-model",
    "overrides": "override-tensor",
    "kv_offload": "no-kv-offload",
    "op_offload": "no-op-offload",
    "overhead_bytes": "overhead",
}


def command_line(term: Term, value: str) -> str:
    """A term as the command line says it: ``--kv-dtype fp8``, ``--fsdp``, ```vramgui search x```."""
    if isinstance(term, Command):
        return f"`vramgui {term.name} {term.args}`" if term.args else f"`vramgui {term.name}`"
    flag = "--" + OPTIONS.get(term.name, term.name.replace("_", "-"))
    return f"{flag} {value}" if value else flag


class _Wording(string.Formatter):
    def __init__(self, say: Say) -> None:
        self._say = say

    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, Message):  # a message within another: an error's, quoted
            return value.words(self._say)
        if isinstance(value, Setting):
            shown_value = "" if value.value is None else format(value.value, format_spec)
            return self._say(value, shown_value)
        if isinstance(value, Command):
            return self._say(value, "")
        return str(super().format_field(value, format_spec))


class Message(str):
    """A message that names settings: its text is the command line's wording (what ``str``,
    the JSON document and logs hold), and ``words(say)`` words it for another front end.

    ``template`` is a ``str.format`` template whose fields are the message's data: a
    :class:`Setting` or :class:`Command` is worded by the front end, any other value formatted
    as given (``"{seq:,}"``).
    """

    template: str
    fields: dict[str, object]

    def __new__(cls, template: str, **fields: object) -> Message:
        message = super().__new__(cls, _Wording(command_line).vformat(template, (), fields))
        message.template = template
        message.fields = fields
        return message

    def words(self, say: Say) -> str:
        """The message with each setting and command worded by ``say``."""
        return _Wording(say).vformat(self.template, (), self.fields)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_message, (self.template, self.fields))


def _message(template: str, fields: dict[str, object]) -> Message:
    return Message(template, **fields)


def phrase(*parts: str | Term) -> Message:
    """A message of plain text, terms and other messages, in order: ``phrase("raise ",
    Setting("grad_accum"), " to shrink it")``. The text is taken as it is (no template
    fields); a :class:`Message` among the parts keeps its own terms."""
    template: list[str] = []
    fields: dict[str, object] = {}
    for part in parts:
        if isinstance(part, str) and not isinstance(part, Message):
            template.append(part.replace("{", "{{").replace("}", "}}"))
        else:
            key = f"term{len(fields)}"
            fields[key] = part
            template.append("{" + key + "}")
    return Message("".join(template), **fields)


def message_of(error: BaseException) -> str:
    """An error's message as it was raised: a :class:`Message` where it names settings, so that
    a record that keeps it (a refusal, a note) can still be worded by each front end."""
    args = error.args
    return args[0] if len(args) == 1 and isinstance(args[0], Message) else str(error)


def words(text: str, say: Say) -> str:
    """``text`` worded by ``say`` where it is a :class:`Message`, else as it is."""
    return text.words(say) if isinstance(text, Message) else text
