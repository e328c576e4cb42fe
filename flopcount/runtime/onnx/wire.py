"""Where an ONNX file keeps its weights, read from the protobuf wire format.

A ModelProto's bytes hold each initializer's raw data as one length-delimited field (``graph``
is field 7 of ModelProto, ``initializer`` field 5 of GraphProto, ``raw_data`` field 9 of
TensorProto). ``split_weights(data, types)`` finds those fields and returns the file's bytes
without them (a ModelProto of a few kilobytes, which protobuf parses at once) and where each
initializer's raw data lies in ``data``. The importer then makes its arrays from the file's
bytes instead of parsing a copy of every weight into protobuf and copying it out again.

Only the plain layout is split: one ``graph`` field, no groups, and a tensor is left whole
(its raw data stays in the light bytes) unless it has exactly one ``raw_data`` field, an element
type in ``types``, and no other data, segment or location fields. Anything else returns
``None`` and the file is read the ordinary way.

    >>> split_weights(b"\\x3a\\x00", {1})   # a ModelProto whose graph is empty: nothing to split
"""

from __future__ import annotations

GRAPH = 7            # ModelProto.graph
INITIALIZER = 5      # GraphProto.initializer
DATA_TYPE = 2        # TensorProto.data_type
RAW_DATA = 9         # TensorProto.raw_data
# TensorProto fields that hold or place data elsewhere: segment, the typed data fields,
# external_data, data_location
_OTHER_DATA = frozenset({3, 4, 5, 6, 7, 10, 11, 13, 14})
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


class _Declined(Exception):
    """The bytes are not laid out as this reader expects: read the file the ordinary way."""


def _varint(data: bytes, pos: int, end: int) -> tuple:
    """(value, position after it) of the varint at ``pos``."""
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Declined
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fields(data: bytes, pos: int, end: int):
    """(field number, wire type, tag start, value start, value end) of each field in
    ``data[pos:end]``; a length-delimited value starts after its length."""
    while pos < end:
        tag_start = pos
        tag, pos = _varint(data, pos, end)
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise _Declined
        if wire == _VARINT:
            start = pos
            _, stop = _varint(data, pos, end)
        elif wire == _BYTES:
            length, start = _varint(data, pos, end)
            stop = start + length
        elif wire == _FIXED64:
            start, stop = pos, pos + 8
        elif wire == _FIXED32:
            start, stop = pos, pos + 4
        else:  # groups (deprecated) or invalid wire types
            raise _Declined
        if stop > end:
            raise _Declined
        yield field, wire, tag_start, start, stop
        pos = stop


def _raw_field(data: bytes, start: int, end: int, types) -> tuple | None:
    """(tag start, value start, value end) of a tensor's one raw_data field, when the tensor is
    plain (see the module docstring); None leaves the tensor whole."""
    raw, data_type = None, None
    for field, wire, tag_start, value_start, value_end in _fields(data, start, end):
        if field == RAW_DATA:
            if wire != _BYTES or raw is not None:
                return None
            raw = (tag_start, value_start, value_end)
        elif field == DATA_TYPE:
            if wire != _VARINT:
                return None
            data_type = _varint(data, value_start, value_end)[0]
        elif field in _OTHER_DATA:
            return None
    return raw if raw is not None and data_type in types else None


def _split(data: bytes, types) -> tuple | None:
    graph = None
    for field, wire, tag_start, start, end in _fields(data, 0, len(data)):
        if field == GRAPH:
            if wire != _BYTES or graph is not None:  # protobuf would merge two graph fields
                raise _Declined
            graph = (tag_start, start, end)
    if graph is None:
        return None
    graph_tag, graph_start, graph_end = graph
    pieces, spans = [], []
    cursor = graph_start
    for field, wire, tag_start, start, end in _fields(data, graph_start, graph_end):
        if field != INITIALIZER:
            continue
        if wire != _BYTES:
            raise _Declined
        raw = _raw_field(data, start, end, types)
        if raw is None:
            spans.append(None)
            continue
        raw_tag, raw_start, raw_end = raw
        tensor = data[start:raw_tag] + data[raw_end:end]
        pieces += [data[cursor:tag_start], _encode_varint(INITIALIZER << 3 | _BYTES),
                   _encode_varint(len(tensor)), tensor]
        cursor = end
        spans.append((raw_start, raw_end - raw_start))
    if not any(spans):
        return None
    pieces.append(data[cursor:graph_end])
    body = b"".join(pieces)
    light = b"".join([data[:graph_tag], _encode_varint(GRAPH << 3 | _BYTES), _encode_varint(len(body)), body,
                      data[graph_end:]])
    return light, spans


def split_weights(data: bytes, types) -> tuple | None:
    """``(light, spans)``: ``data`` (a serialized ModelProto) without the raw data of its plain
    initializers, and per initializer (in order) ``(offset, length)`` of its raw data in
    ``data``, or None for a tensor left whole. ``types`` are the element type codes to take
    out. None when nothing was taken out or the layout is not the plain one."""
    try:
        return _split(data, frozenset(types))
    except _Declined:
        return None
