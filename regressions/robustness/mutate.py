"""Mutators for real input files: each takes hypothesis' ``draw`` and the bytes of a file and returns them
damaged in one way a user, a disk or a buggy tool damages files (a flipped byte, a cut-off tail, junk, a
huge or negative number where a size was, text that is not UTF-8, a duplicated or lost line, two tokens
swapped). Protobuf files also get *structured* mutations (a field set out of range, a repeated entry
dropped or doubled) because byte noise almost never survives protobuf decoding to reach the checks behind
it. Everything here is a pure function of what hypothesis draws, so every failure shrinks and replays.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

Draw = Callable[[st.SearchStrategy[Any]], Any]
Mutator = Callable[[Draw, bytes], bytes]

#: Numbers that sit on a boundary of some integer type or mean "absurdly large / negative".
INTERESTING_INTS = (0, 1, -1, 2, 7, 255, 256, 4095, 65535, 65536, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32,
                    1 << 40, (1 << 53) + 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 1 << 64, 10 ** 30,
                    -(1 << 31), -(1 << 63), -(10 ** 30))
INTERESTING_FLOATS = (0.0, -0.0, math.nan, math.inf, -math.inf, 1e38, -1e38, 3.5e38, 1e-45, 1e308, -1.0)
#: Number spellings for text formats: decimal, hex, negative hex, empty hex, float and exponent forms.
NUMBER_TEXTS = tuple(str(n) for n in INTERESTING_INTS) + tuple(hex(n) for n in INTERESTING_INTS if n >= 0) + (
    "-0x10", "0x", "0x-1", "1e309", "-1e309", "nan", "inf", "1.5", "0777", "+3", "0b101", "9" * 400)
#: Byte sequences no UTF-8 decoder accepts (lone continuation, overlong, surrogate, truncated sequence, 0xff).
INVALID_UTF8 = (b"\xff", b"\xfe\xff", b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\xf8\x88\x80\x80\x80")
JUNK = (b"\x00", b"\t", b"\r", b"\r\n", b"\n\n", b"(", b")", b",", b";", b"{", b"}", b'"', b"=", b"#", b"//",
        b"+", b":", b"0x", b" ", b"\xef\xbb\xbf")
_TOKEN = re.compile(rb"[A-Za-z0-9_.+\-]+")
_NUMBER = re.compile(rb"-?(?:0[xX][0-9a-fA-F]+|\d+)")


def _at(draw: Draw, data: bytes) -> int:
    return draw(st.integers(0, len(data)))


# ---- byte-level mutators (any file) -------------------------------------------------------------------------
def flip_byte(draw: Draw, data: bytes) -> bytes:
    if not data:
        return data
    i = draw(st.integers(0, len(data) - 1))
    if draw(st.booleans()):
        value = data[i] ^ (1 << draw(st.integers(0, 7)))  # one bit, as a disk or a cable flips it
    else:
        value = draw(st.integers(0, 255))
    return data[:i] + bytes([value]) + data[i + 1:]


def truncate(draw: Draw, data: bytes) -> bytes:
    return data[:_at(draw, data)]


def insert_junk(draw: Draw, data: bytes) -> bytes:
    i = _at(draw, data)
    junk = draw(st.one_of(st.sampled_from(JUNK), st.binary(min_size=1, max_size=12)))
    return data[:i] + junk + data[i:]


def insert_invalid_utf8(draw: Draw, data: bytes) -> bytes:
    i = _at(draw, data)
    return data[:i] + draw(st.sampled_from(INVALID_UTF8)) + data[i:]


def overwrite_word(draw: Draw, data: bytes) -> bytes:
    """A 4- or 8-byte little-endian boundary value over whatever was there (a length, an offset, a count)."""
    if len(data) < 4:
        return data
    width = draw(st.sampled_from((4, 8))) if len(data) >= 8 else 4
    i = draw(st.integers(0, len(data) - width))
    value = draw(st.sampled_from(INTERESTING_INTS)) % (1 << (8 * width))
    return data[:i] + value.to_bytes(width, "little") + data[i + width:]


def delete_span(draw: Draw, data: bytes) -> bytes:
    i = _at(draw, data)
    n = draw(st.integers(1, 64))
    return data[:i] + data[i + n:]


# ---- text mutators (line- and token-aware) ------------------------------------------------------------------
def replace_number(draw: Draw, data: bytes) -> bytes:
    """One number of the file replaced by a huge, negative or malformed one (sizes, offsets, addresses)."""
    spans = [m.span() for m in _NUMBER.finditer(data)]
    if not spans:
        return insert_number(draw, data)
    start, end = spans[draw(st.integers(0, len(spans) - 1))]
    return data[:start] + draw(st.sampled_from(NUMBER_TEXTS)).encode() + data[end:]


def insert_number(draw: Draw, data: bytes) -> bytes:
    i = _at(draw, data)
    return data[:i] + draw(st.sampled_from(NUMBER_TEXTS)).encode() + data[i:]


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def duplicate_line(draw: Draw, data: bytes) -> bytes:
    lines = _lines(data)
    if not lines:
        return data
    i = draw(st.integers(0, len(lines) - 1))
    j = draw(st.integers(0, len(lines)))
    return b"".join(lines[:j] + [lines[i]] + lines[j:])


def delete_line(draw: Draw, data: bytes) -> bytes:
    lines = _lines(data)
    if not lines:
        return data
    i = draw(st.integers(0, len(lines) - 1))
    return b"".join(lines[:i] + lines[i + 1:])


def swap_lines(draw: Draw, data: bytes) -> bytes:
    lines = _lines(data)
    if len(lines) < 2:
        return data
    i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
    lines[i], lines[j] = lines[j], lines[i]
    return b"".join(lines)


def swap_tokens(draw: Draw, data: bytes) -> bytes:
    """Two words/numbers exchanged (an argument order mistake, a name where a number belongs)."""
    spans = [m.span() for m in _TOKEN.finditer(data)]
    if len(spans) < 2:
        return data
    i, j = sorted((draw(st.integers(0, len(spans) - 1)), draw(st.integers(0, len(spans) - 1))))
    if i == j:
        return data
    (a0, a1), (b0, b1) = spans[i], spans[j]
    return data[:a0] + data[b0:b1] + data[a1:b0] + data[a0:a1] + data[b1:]


def delete_token(draw: Draw, data: bytes) -> bytes:
    spans = [m.span() for m in _TOKEN.finditer(data)]
    if not spans:
        return data
    start, end = spans[draw(st.integers(0, len(spans) - 1))]
    return data[:start] + data[end:]


BYTE_MUTATORS: tuple[Mutator, ...] = (flip_byte, truncate, insert_junk, insert_invalid_utf8, overwrite_word,
                                      delete_span)
TEXT_MUTATORS: tuple[Mutator, ...] = (flip_byte, truncate, insert_junk, insert_invalid_utf8, replace_number,
                                      replace_number, insert_number, duplicate_line, delete_line, swap_lines,
                                      swap_tokens, delete_token)


def mutated(seed: bytes, mutators: tuple[Mutator, ...], max_steps: int = 3) -> st.SearchStrategy[bytes]:
    """``seed`` after one to ``max_steps`` mutations drawn from ``mutators``."""

    @st.composite
    def build(draw: Draw) -> bytes:
        data = seed
        for _ in range(draw(st.integers(1, max_steps))):
            data = draw(st.sampled_from(mutators))(draw, data)
        return data

    return build()


# ---- structured protobuf mutators ---------------------------------------------------------------------------
_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(1 << 31), (1 << 31) - 1), FieldDescriptor.TYPE_SINT32: (-(1 << 31), (1 << 31) - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(1 << 31), (1 << 31) - 1), FieldDescriptor.TYPE_ENUM: (-(1 << 31), (1 << 31) - 1),
    FieldDescriptor.TYPE_UINT32: (0, (1 << 32) - 1), FieldDescriptor.TYPE_FIXED32: (0, (1 << 32) - 1),
    FieldDescriptor.TYPE_INT64: (-(1 << 63), (1 << 63) - 1), FieldDescriptor.TYPE_SINT64: (-(1 << 63), (1 << 63) - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(1 << 63), (1 << 63) - 1),
    FieldDescriptor.TYPE_UINT64: (0, (1 << 64) - 1), FieldDescriptor.TYPE_FIXED64: (0, (1 << 64) - 1),
    FieldDescriptor.TYPE_BOOL: (0, 1),
}
_FLOATS = (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE)
_NESTED = (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP)


def _is_repeated(fd: FieldDescriptor) -> bool:
    repeated = getattr(fd, "is_repeated", None)  # protobuf >= 6 (upb) dropped ``label``
    return bool(repeated) if repeated is not None else fd.label == FieldDescriptor.LABEL_REPEATED


def string_values(msg: Message, limit: int = 500) -> list[str]:
    """Up to ``limit`` string values set anywhere in ``msg`` (names a mutation can swap in: a tensor, region
    or layer name where another was meant)."""
    out: list[str] = []
    todo = [msg]
    while todo and len(out) < limit:
        m = todo.pop()
        for fd, value in m.ListFields():
            if fd.type == FieldDescriptor.TYPE_STRING:
                out.extend(value if _is_repeated(fd) else [value])
            elif fd.type == FieldDescriptor.TYPE_MESSAGE:
                todo.extend(v for v in (value if _is_repeated(fd) else [value]) if hasattr(v, "ListFields"))
    return out[:limit]


def pick_field(draw: Draw, msg: Message) -> tuple[Message, FieldDescriptor] | None:
    """A field reached by a random descent from the root (stopping at a message field one time in four), one
    time in five a scalar the message leaves unset (a pad, group or stride a model never wrote): cost grows
    with the depth of the message, not its size, so a 500 KB loadable mutates fast."""
    while True:
        fields = msg.ListFields()
        if not fields or draw(st.integers(0, 4)) == 0:  # sometimes a field the file never set (a default)
            scalars = [f for f in msg.DESCRIPTOR.fields if f.type not in _NESTED]
            if scalars:
                return msg, scalars[draw(st.integers(0, len(scalars) - 1))]
            if not fields:
                return None
        fd, value = fields[draw(st.integers(0, len(fields) - 1))]
        if fd.type != FieldDescriptor.TYPE_MESSAGE or draw(st.integers(0, 3)) == 0:
            return msg, fd
        if _is_repeated(fd):
            if len(value) == 0 or fd.message_type.GetOptions().map_entry:
                return msg, fd
            value = value[draw(st.integers(0, len(value) - 1))]
        msg = value


def _scalar(draw: Draw, fd: FieldDescriptor, old: Any, strings: list[str]) -> Any:
    if fd.type in _INT_RANGES:
        lo, hi = _INT_RANGES[fd.type]
        value = draw(st.one_of(st.sampled_from(INTERESTING_INTS), st.integers(-1000, 1000)))
        value = min(max(value, lo), hi)
        return bool(value) if fd.type == FieldDescriptor.TYPE_BOOL else value
    if fd.type in _FLOATS:
        return draw(st.one_of(st.sampled_from(INTERESTING_FLOATS), st.floats(-1e6, 1e6)))
    if fd.type == FieldDescriptor.TYPE_STRING:
        return draw(st.one_of(st.just(""), st.sampled_from(strings or [""]), st.text(max_size=8)))
    if fd.type == FieldDescriptor.TYPE_BYTES:
        raw = bytes(old) if isinstance(old, (bytes, bytearray)) else b""
        how = draw(st.sampled_from(("empty", "cut", "extend")))
        if how == "cut":
            return raw[:draw(st.integers(0, len(raw)))]
        return raw + draw(st.binary(max_size=16)) if how == "extend" else b""
    return old


def mutate_message(draw: Draw, msg: Message, strings: list[str]) -> None:
    """One structured change in place: a scalar set to a boundary value, a repeated entry dropped, doubled or
    swapped, or a field cleared. Values protobuf itself refuses (a closed enum's unknown value) are skipped."""
    picked = pick_field(draw, msg)
    if picked is None:
        return
    parent, fd = picked
    action = draw(st.sampled_from(("set", "set", "set", "clear", "drop", "double", "swap")))
    try:
        if action == "clear":
            parent.ClearField(fd.name)
        elif _is_repeated(fd):
            items = getattr(parent, fd.name)
            if fd.type == FieldDescriptor.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry:
                return
            if len(items) == 0:
                if fd.type != FieldDescriptor.TYPE_MESSAGE and action == "set":
                    items.append(_scalar(draw, fd, None, strings))
                return
            i = draw(st.integers(0, len(items) - 1))
            if action == "drop":
                del items[i]
            elif action == "double":
                if fd.type == FieldDescriptor.TYPE_MESSAGE:
                    items.add().CopyFrom(items[i])
                else:
                    items.append(items[i])
            elif action == "swap" and len(items) > 1:
                j = draw(st.integers(0, len(items) - 1))
                if fd.type == FieldDescriptor.TYPE_MESSAGE:
                    a, b = type(items[i])(), type(items[j])()
                    a.CopyFrom(items[i])
                    b.CopyFrom(items[j])
                    items[i].CopyFrom(b)
                    items[j].CopyFrom(a)
                else:
                    items[i], items[j] = items[j], items[i]
            elif fd.type != FieldDescriptor.TYPE_MESSAGE:
                items[i] = _scalar(draw, fd, items[i], strings)
        elif fd.type != FieldDescriptor.TYPE_MESSAGE:
            setattr(parent, fd.name, _scalar(draw, fd, getattr(parent, fd.name), strings))
    except (ValueError, TypeError):
        return  # protobuf refuses the value for this field's type: no mutation this step


def mutated_message(seed: Message, max_steps: int = 3) -> st.SearchStrategy[Message]:
    """A copy of ``seed`` after one to ``max_steps`` structured mutations."""
    strings = string_values(seed)

    @st.composite
    def build(draw: Draw) -> Message:
        msg = type(seed)()
        msg.CopyFrom(seed)
        for _ in range(draw(st.integers(1, max_steps))):
            mutate_message(draw, msg, strings)
        return msg

    return build()


# ---- structured JSON mutators -------------------------------------------------------------------------------
#: Values of every JSON type, including ones Python's json reads but no schema wants (NaN, 1e999, huge ints).
JSON_VALUES = ("abc", "", [], [1.0], {}, {"scale": 1.0}, None, True, False, 0, -1, 1e999, -1e999, math.nan, 10 ** 400,
               1e-320, 2 ** 64)


def _json_slots(value: Any, out: list[tuple[Any, Any]]) -> None:
    """(container, key) of every value inside ``value``."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, sub in items:
        out.append((value, key))
        _json_slots(sub, out)


def mutated_json(seed: Any, max_steps: int = 3) -> st.SearchStrategy[Any]:
    """A deep copy of the JSON value ``seed`` with one to ``max_steps`` values replaced by any JSON type, keys
    dropped or renamed."""
    import copy

    @st.composite
    def build(draw: Draw) -> Any:
        doc = copy.deepcopy(seed)
        for _ in range(draw(st.integers(1, max_steps))):
            slots: list[tuple[Any, Any]] = []
            _json_slots(doc, slots)
            if not slots:
                return draw(st.sampled_from(JSON_VALUES))
            container, key = slots[draw(st.integers(0, len(slots) - 1))]
            action = draw(st.sampled_from(("value", "value", "drop", "rename")))
            if action == "value":
                container[key] = copy.deepcopy(draw(st.sampled_from(JSON_VALUES)))
            elif action == "drop":
                del container[key]
            elif isinstance(container, dict):
                container[draw(st.sampled_from(("scale", "min", "max", "", "x")))] = container.pop(key)
        return doc

    return build()
