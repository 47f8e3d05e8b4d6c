"""Trace JSON -> small typed msgspec Structs, built from the schema tables (schema.py).

msgspec decodes each complete ('X') event into a ``Complete`` Struct (other events into empty
ones), so only the fields the analyses need are decoded. Fields of events other than 'X' are not
decoded, so not type-checked either (unless their piece holds an event of no or a non-standard
'ph', see ``complete_events``). ``Head`` and ``TraceFile`` are the trace object around the
events; ``devices_of`` reads its per-GPU property blocks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

import msgspec

from profiler.trace.schema import (
    ARG_COLUMNS,
    DEVICE_PROPERTY_BLOCKS,
    ArgColumn,
    DeviceProperties,
)

#: (a dim3 decodes to a tuple, so that a kernel's launch configuration can be a dict key)
_ARG_TYPES = {"int": int | None, "float": float | None, "dim3": tuple[int, ...] | None}
#: what a column holds when its key is absent: -1 for ints (ids, devices, counts are never
#: negative), nan for floats. Absent keys decode straight to these, so a column is one
#: ``np.fromiter`` pass; an explicit ``null`` still decodes to None and takes a slower path.
_ARG_DEFAULTS = {"int": -1, "float": float("nan"), "dim3": None}


def field_name(column: ArgColumn, i: int) -> str:
    return f"{column.column}__{i}"


if TYPE_CHECKING:
    # built from ARG_COLUMNS at run time, so its fields are unknown to a type checker (they are
    # read through _ARG_GETTERS in columns.py)
    Args = msgspec.Struct
else:
    Args = msgspec.defstruct(
        "Args",
        [
            (
                field_name(col, i),
                _ARG_TYPES[col.type],
                msgspec.field(name=key, default=_ARG_DEFAULTS[col.type]),
            )
            for col in ARG_COLUMNS
            for i, key in enumerate(col.keys)
        ],
        gc=False,
        frozen=True,
    )
#: the args of an event that has none (frozen, so one instance is every such event's default)
NO_ARGS = Args()


class Complete(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    """A complete event ('ph': 'X'), the only kind the analyses read."""

    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = float("nan")  # absent: nan, flagged and excluded (see impossible_rows)
    dur: float = float("nan")
    # absent: NO_ARGS, so the columns read every event's args through one dotted attrgetter; an
    # explicit null is None (columns.py replaces it)
    args: Args | None = NO_ARGS


#: The other 'ph' values of the Trace Event Format (duration B/E, instant, counter, async, flow,
#: sample, object, metadata, memory dump, mark, clock sync, context). Decoded through a union
#: tagged by 'ph', each of those events is an empty Struct: none of its fields are decoded.
_OTHER_PHASES = (
    "B",
    "E",
    "i",
    "I",
    "C",
    "b",
    "n",
    "e",
    "S",
    "T",
    "p",
    "F",
    "s",
    "t",
    "f",
    "P",
    "N",
    "O",
    "D",
    "M",
    "V",
    "v",
    "R",
    "c",
    "(",
    ")",
)
_SKIPPED = tuple(
    msgspec.defstruct(f"_Phase{i}", [], tag_field="ph", tag=ph, gc=False)
    for i, ph in enumerate(_OTHER_PHASES)
)


class _Event(Complete, gc=False, tag=False):
    """Any event, 'ph' as a plain field: for lists with an event of no or another 'ph'."""

    ph: str = ""


class TraceFile(msgspec.Struct):
    traceEvents: list[msgspec.Raw]
    # Any: a property block of an odd shape is ignored (devices_of), never a reason to refuse
    deviceProperties: Any = None
    computeProperties: Any = None


FILE_DECODER = msgspec.json.Decoder(TraceFile)
#: any event, tagged by 'ph' (Union[...] over a tuple built at run time, which a type checker
#: cannot read as a type)
_ANY_PHASE: Any = Union.__getitem__((Complete, *_SKIPPED))
_PHASE_DECODER = msgspec.json.Decoder(list[_ANY_PHASE])
_CHUNK_DECODER = msgspec.json.Decoder(list[_Event])


def complete_events(text: bytes) -> list[Complete]:
    """The complete events of a JSON list of events, as Complete or _Event Structs.

    Strict typed decoding first (fast); a field of an unexpected type anywhere in ``text``
    (a ROCm ``"stream": "0x0"``, an Inductor ``"grid": "grid(100,)"`` on a cpu_op) sends the
    list through ``_lenient_events``, which keeps every event and drops only the odd values."""
    try:
        return [e for e in _PHASE_DECODER.decode(text) if e.__class__ is Complete]
    except msgspec.ValidationError:  # no 'ph', a 'ph' outside the format, or a wrong type
        pass
    try:
        return [e for e in _CHUNK_DECODER.decode(text) if e.ph == "X"]
    except msgspec.ValidationError:  # a field of an unexpected type
        return _lenient_events(text)


def _lenient_events(text: bytes) -> list[Complete]:
    """The complete events of a JSON list, decoded untyped and then checked value by value:
    a value of the wrong type reads as absent (a missing ``ts``/``dur`` is then flagged and
    the event excluded, see ``impossible_rows``); an item that is not an object is skipped."""
    items = msgspec.json.decode(text)
    if not isinstance(items, list):
        raise msgspec.ValidationError("the events are not a list")
    return [_checked_event(e) for e in items if isinstance(e, dict) and e.get("ph") == "X"]


def _checked_event(raw: dict[str, Any]) -> Complete:
    args = raw.get("args")
    return Complete(
        cat=_text(raw.get("cat")),
        name=_text(raw.get("name")),
        pid=_thread_part(raw.get("pid")),
        tid=_thread_part(raw.get("tid")),
        ts=_number(raw.get("ts")),
        dur=_number(raw.get("dur")),
        args=_checked_args(args) if isinstance(args, dict) else NO_ARGS,
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _thread_part(value: object) -> int | str:
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else _text(value)


def _number(value: object) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an int beyond float range
            return float("inf")
    return float("nan")


def _checked_args(raw: dict[str, Any]) -> Args:
    values: dict[str, int | float | tuple[int, ...]] = {}
    for column in ARG_COLUMNS:
        for i, key in enumerate(column.keys):
            value = _arg_value(raw.get(key), column.type)
            if value is not None:
                values[field_name(column, i)] = value
    return Args(**values)


def _arg_value(value: object, type_: str) -> int | float | tuple[int, ...] | None:
    """``value`` as the column's type, or None when it is absent or of another type. A string
    int column value is read as a number when it is one (``"0x0"``, ``"7"``)."""
    if value is None or isinstance(value, bool):
        return None
    if type_ == "dim3":
        if (
            isinstance(value, list)
            and 0 < len(value) <= 3
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            return tuple(value)
        return None
    if type_ == "float":
        return _number(value) if isinstance(value, (int, float)) else None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return None
    return None


class Head(msgspec.Struct):
    traceEvents: msgspec.Raw
    deviceProperties: Any = None
    computeProperties: Any = None


HEAD_DECODER = msgspec.json.Decoder(Head)


def devices_of(head: Head | TraceFile) -> dict[int, DeviceProperties]:
    devices: dict[int, DeviceProperties] = {}
    for block in DEVICE_PROPERTY_BLOCKS:
        listed = getattr(head, block)
        for raw in listed if isinstance(listed, list) else []:
            if isinstance(raw, dict):
                props = DeviceProperties.from_json(raw)
                devices.setdefault(props.id, props)
    return devices
