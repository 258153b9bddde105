"""ONNX models written as protobuf bytes without the ``onnx`` package.

:mod:`._bert_onnx` needs the serialized bytes of one ONNX model for onnxruntime, nothing
else of ``onnx``; importing ``onnx`` (and protobuf's runtime) alone cost 1.5 CPU seconds
here, more than half of what the first query of a process paid. The messages used are few
(``ModelProto``, ``GraphProto``, ``NodeProto``, ``AttributeProto``, ``TensorProto``,
``ValueInfoProto``; field numbers from ``onnx/onnx.proto``, which is proto2), and protobuf's
wire format is simple: each field a tag ``(number << 3) | wire type`` and a varint (wire
type 0), four little-endian bytes (5) or a length and its bytes (2). The functions here
write them in field-number order, repeated scalars unpacked, as protobuf's own serializer
does: ``tests/vectors/test_onnx_proto.py`` checks the bytes equal ``onnx.helper``'s.

Each function returns a :class:`Message`, the chunks of its bytes (a message nested in
another is a length-delimited field); :func:`model` joins them once.
"""
from __future__ import annotations

import struct

import numpy as np

__all__ = ["Message", "tensor", "node", "value_info", "graph", "model", "FLOAT", "INT64",
           "IR_VERSION"]

#: ``TensorProto.DataType`` of the element types used.
FLOAT, INT64 = 1, 7
_DATA_TYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.int64): INT64}
#: ``AttributeProto.AttributeType``.
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7
#: The IR version written: 9 is that of opset 20 (onnx 1.15), the graph's opset.
IR_VERSION = 9


class Message(list):
    """A message as the chunks of its bytes (``bytes(message)`` joins them): a tensor's
    values stay a view of its array until the model's bytes are joined, once."""

    @property
    def nbytes(self) -> int:
        return sum(len(chunk) for chunk in self)

    def __bytes__(self) -> bytes:
        return b"".join(self)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1          # a negative int64 as its two's complement (10 bytes)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(int(value))


def _field(number: int, value) -> Message:
    """A length-delimited field: a string (UTF-8), bytes or a nested :class:`Message`."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    if isinstance(value, Message):
        return Message([_varint(number << 3 | 2) + _varint(value.nbytes), *value])
    return Message([_varint(number << 3 | 2) + _varint(len(value)), value])


def _float(number: int, value: float) -> bytes:
    return _varint(number << 3 | 5) + struct.pack("<f", value)


def _attribute(name: str, value) -> Message:
    """``AttributeProto`` of an int, a float or a list of ints (as ``onnx.helper``
    makes them)."""
    out = _field(1, name)
    if isinstance(value, (bool, int, np.integer)):
        return Message([*out, _int(3, value), _int(20, _ATTR_INT)])
    if isinstance(value, (float, np.floating)):
        return Message([*out, _float(2, value), _int(20, _ATTR_FLOAT)])
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, np.integer))
                                                for v in value):
        return Message([*out, *(_int(8, v) for v in value), _int(20, _ATTR_INTS)])
    raise TypeError(f"attribute {name}: unsupported value {value!r}")


def tensor(name: str, array) -> Message:
    """``TensorProto`` of a float32 or int64 array, its values as ``raw_data`` (a view of
    the array: it must not change before the model's bytes are joined)."""
    array = np.asarray(array)
    data_type = _DATA_TYPES.get(array.dtype)
    if data_type is None:
        raise TypeError(f"tensor {name}: unsupported dtype {array.dtype}")
    values = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).reshape(-1)
    return Message([*(_int(1, d) for d in array.shape), _int(2, data_type),
                    *_field(8, name), *_field(9, memoryview(values.view(np.uint8)))])


def node(op_type: str, inputs, outputs, name: str, *, domain=None, **attributes) -> Message:
    """``NodeProto``; ``attributes`` in sorted order, as ``onnx.helper.make_node``."""
    out = Message()
    for i in inputs:
        out += _field(1, i)
    for o in outputs:
        out += _field(2, o)
    out += _field(3, name)
    out += _field(4, op_type)
    for k, v in sorted(attributes.items()):
        out += _field(5, _attribute(k, v))
    if domain is not None:
        out += _field(7, domain)
    return out


def value_info(name: str, elem_type: int, shape) -> Message:
    """``ValueInfoProto`` of a tensor; each dimension an int or a symbolic name."""
    dims = Message()
    for d in shape:
        dims += _field(1, _field(2, d) if isinstance(d, str) else Message([_int(1, d)]))
    tensor_type = Message([_int(1, elem_type), *_field(2, dims)])
    return Message([*_field(1, name), *_field(2, _field(1, tensor_type))])


def graph(nodes, name: str, inputs, outputs, initializers) -> Message:
    """``GraphProto`` of the messages of :func:`node`, :func:`value_info`, :func:`tensor`."""
    out = Message()
    for number, messages in ((1, nodes), (2, [name]), (5, initializers), (11, inputs),
                             (12, outputs)):
        for m in messages:
            out += _field(number, m)
    return out


def model(graph_message: Message, opsets: dict, *, producer_name: str,
          ir_version: int = IR_VERSION) -> bytes:
    """The bytes of a ``ModelProto``: ``opsets`` maps a domain (``""``: the standard
    operators) to its version."""
    out = Message([_int(1, ir_version), *_field(2, producer_name), *_field(7, graph_message)])
    for domain, version in opsets.items():
        out += _field(8, Message([*_field(1, domain), _int(2, version)]))
    return bytes(out)
