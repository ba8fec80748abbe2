"""Open Inference Protocol v2 tensors: a request body in, numpy arrays out, and outputs back to a body.

JSON tensors (``data`` flat or nested, row-major) and Triton's binary tensor extension
(``Inference-Header-Content-Length``: a JSON header, then each binary tensor's raw bytes in
order, little-endian; a BYTES element is a 4-byte length and its bytes), which
``tritonclient`` uses by default. Every malformed part raises :class:`BadRequest` naming
the field (``inputs[1].shape``), because the body comes from anyone who can reach the port.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DTYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(bool), "UINT8": np.dtype("<u1"), "UINT16": np.dtype("<u2"), "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"), "INT8": np.dtype("<i1"), "INT16": np.dtype("<i2"), "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"), "FP16": np.dtype("<f2"), "FP32": np.dtype("<f4"), "FP64": np.dtype("<f8"),
    "BYTES": np.dtype(object),
}
MAX_ELEMENTS = 50_000_000  # a shape that asks for more is refused before any memory is taken for it


class BadRequest(ValueError):
    """A request the protocol cannot accept; the message names the field."""


@dataclass(slots=True)
class Tensor:
    name: str
    datatype: str
    array: np.ndarray  # already in ``shape``


@dataclass(slots=True)
class Requested:
    name: str
    binary: bool


@dataclass(slots=True)
class InferRequest:
    id: str | None
    inputs: list[Tensor]
    outputs: list[Requested] | None  # None: every output the model has
    binary_default: bool = False
    parameters: dict[str, Any] = field(default_factory=dict)


def datatype_of(dtype: np.dtype) -> str:
    if dtype.kind in "OUS":
        return "BYTES"
    for name, known in DTYPES.items():
        if name != "BYTES" and known == dtype.newbyteorder("<"):
            return name
    raise ValueError(f"no protocol datatype for numpy {dtype}")


def parse_infer(body: bytes, header_length: str | None) -> InferRequest:
    if header_length is not None:
        try:
            split = int(header_length)
        except ValueError:
            raise BadRequest("Inference-Header-Content-Length: not an integer") from None
        if not 0 < split <= len(body):
            raise BadRequest(f"Inference-Header-Content-Length: {split} is outside the body ({len(body)} bytes)")
        head, rest = body[:split], memoryview(body)[split:]
    else:
        head, rest = body, memoryview(b"")
    try:
        doc = json.loads(head)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"body: not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise BadRequest("body: a JSON object with `inputs`, not " + type(doc).__name__)
    if "inputs" not in doc:
        raise BadRequest("inputs: required (a list of tensors {name, shape, datatype, data})")
    if not isinstance(doc["inputs"], list) or not doc["inputs"]:
        raise BadRequest("inputs: a non-empty list of tensors")
    params = _mapping(doc.get("parameters"), "parameters")
    request_id = doc.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise BadRequest("id: a string")
    offset = 0
    inputs = []
    for i, raw in enumerate(doc["inputs"]):
        tensor, used = _input(raw, f"inputs[{i}]", rest[offset:])
        inputs.append(tensor)
        offset += used
    if offset != len(rest):
        raise BadRequest(f"body: {len(rest) - offset} binary bytes after the last binary input")
    names = [t.name for t in inputs]
    if len(set(names)) != len(names):
        raise BadRequest("inputs: each name at most once")
    return InferRequest(request_id, inputs, _requested(doc.get("outputs")), bool(params.get("binary_data_output")),
                        params)


def _mapping(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest(f"{where}: an object")
    return value


def _requested(raw: Any) -> list[Requested] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise BadRequest("outputs: a list of {name}")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise BadRequest(f"outputs[{i}].name: required, a string")
        params = _mapping(item.get("parameters"), f"outputs[{i}].parameters")
        out.append(Requested(item["name"], bool(params.get("binary_data"))))
    return out


def parse_tensor(raw: Any, where: str) -> Tensor:
    """One JSON tensor {name, shape, datatype, data}; errors name ``where``."""
    return _input(raw, where, memoryview(b""))[0]


def _input(raw: Any, where: str, binary: memoryview) -> tuple[Tensor, int]:
    """One input tensor, and how many bytes of the binary section it took."""
    if not isinstance(raw, dict):
        raise BadRequest(f"{where}: an object {{name, shape, datatype, data}}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequest(f"{where}.name: required, a non-empty string")
    datatype = raw.get("datatype")
    if datatype not in DTYPES:
        raise BadRequest(f"{where}.datatype: {datatype!r} is not a datatype of the protocol "
                         f"(one of {', '.join(DTYPES)})")
    shape = raw.get("shape")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise BadRequest(f"{where}.shape: required, a list of non-negative integers")
    count = math.prod(shape)
    if count > MAX_ELEMENTS:
        raise BadRequest(f"{where}.shape: {shape} is {count} elements, more than {MAX_ELEMENTS}")
    params = _mapping(raw.get("parameters"), f"{where}.parameters")
    size = params.get("binary_data_size")
    if size is not None:
        if type(size) is not int or not 0 <= size <= len(binary):
            raise BadRequest(f"{where}.parameters.binary_data_size: {size!r} does not fit the binary section "
                             f"({len(binary)} bytes left)")
        flat = _from_binary(bytes(binary[:size]), datatype, count, where)
        return Tensor(name, datatype, flat.reshape(shape)), size
    if "data" not in raw:
        raise BadRequest(f"{where}.data: required (or parameters.binary_data_size)")
    flat = _from_json(raw["data"], datatype, where)
    if flat.size != count:
        raise BadRequest(f"{where}.data: {flat.size} values, but shape {shape} holds {count}")
    return Tensor(name, datatype, flat.reshape(shape)), 0


def _from_json(data: Any, datatype: str, where: str) -> np.ndarray:
    if not isinstance(data, list):
        data = [data]
    if datatype == "BYTES":
        flat = list(_leaves(data))
        if not all(isinstance(v, str) for v in flat):
            raise BadRequest(f"{where}.data: BYTES values are strings")
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        return out
    try:
        arr = np.asarray(data)
    except ValueError:
        raise BadRequest(f"{where}.data: nested lists of unequal lengths") from None
    kinds = {"BOOL": "b", "FP16": "iuf", "FP32": "iuf", "FP64": "iuf"}.get(datatype, "iu")
    if arr.size and arr.dtype.kind not in kinds:
        raise BadRequest(f"{where}.data: {datatype} values must be "
                         f"{'true/false' if datatype == 'BOOL' else 'numbers'}, found {arr.dtype.kind!r}-typed "
                         "values (strings, nulls or mixed types?)")
    dtype = DTYPES[datatype]
    if dtype.kind in "iu" and arr.size:
        info = np.iinfo(dtype)
        if arr.min() < info.min or arr.max() > info.max:
            raise BadRequest(f"{where}.data: a value outside {datatype}'s range [{info.min}, {info.max}]")
    return arr.astype(dtype).ravel()


def _leaves(data: list):
    for v in data:
        if isinstance(v, list):
            yield from _leaves(v)
        else:
            yield v


def _from_binary(raw: bytes, datatype: str, count: int, where: str) -> np.ndarray:
    if datatype != "BYTES":
        dtype = DTYPES[datatype]
        if len(raw) != count * dtype.itemsize:
            raise BadRequest(f"{where}.parameters.binary_data_size: {len(raw)} bytes, but {count} {datatype} "
                             f"values take {count * dtype.itemsize}")
        return np.frombuffer(raw, dtype=dtype).copy()
    out, pos = [], 0
    while pos < len(raw):
        if pos + 4 > len(raw):
            raise BadRequest(f"{where}: a BYTES element's 4-byte length is cut short")
        (n,) = struct.unpack_from("<I", raw, pos)
        if pos + 4 + n > len(raw):
            raise BadRequest(f"{where}: a BYTES element runs past its tensor's bytes")
        out.append(raw[pos + 4:pos + 4 + n])
        pos += 4 + n
    if len(out) != count:
        raise BadRequest(f"{where}: {len(out)} BYTES elements, but the shape holds {count}")
    arr = np.empty(count, dtype=object)
    arr[:] = out
    return arr


def encode_response(model: str, version: str, request_id: str | None,
                    outputs: list[tuple[str, np.ndarray, bool]]) -> tuple[bytes, int | None]:
    """The response body, and the JSON header's length when binary outputs follow it."""
    tensors, blobs = [], []
    for name, arr, binary in outputs:
        datatype = datatype_of(arr.dtype)
        tensor: dict[str, Any] = {"name": name, "datatype": datatype, "shape": list(arr.shape)}
        if binary:
            blob = _to_binary(arr, datatype)
            tensor["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            tensor["data"] = [_text(v) for v in arr.ravel()] if datatype == "BYTES" else arr.ravel().tolist()
        tensors.append(tensor)
    doc = {"model_name": model, "model_version": version, "outputs": tensors}
    if request_id is not None:
        doc["id"] = request_id
    head = json.dumps(doc).encode()  # a model that answers NaN gets NaN, as Python and tritonclient read it
    if not blobs:
        return head, None
    return head + b"".join(blobs), len(head)


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _to_binary(arr: np.ndarray, datatype: str) -> bytes:
    if datatype != "BYTES":
        return np.ascontiguousarray(arr, dtype=DTYPES[datatype]).tobytes()
    parts = []
    for v in arr.ravel():
        b = v if isinstance(v, bytes) else str(v).encode()
        parts.append(struct.pack("<I", len(b)) + b)
    return b"".join(parts)
