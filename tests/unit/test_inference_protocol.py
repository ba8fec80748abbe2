"""The Open Inference Protocol v2 wire format, without a server: JSON and binary tensors in, bodies out."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from trainyard.serving.model_server.protocol import BadRequest, encode_response, parse_infer


def binary_body(header: dict, *blobs: bytes) -> tuple[bytes, str]:
    head = json.dumps(header).encode()
    return head + b"".join(blobs), str(len(head))


def test_nested_and_flat_json_data_give_the_same_array():
    nested = {"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2], [3, 4]]}]}
    flat = {"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    a, b = (parse_infer(json.dumps(d).encode(), None).inputs[0].array for d in (nested, flat))
    assert a.dtype == np.float32 and a.tolist() == b.tolist() == [[1, 2], [3, 4]]


def test_binary_tensors_follow_the_json_header_in_order():
    floats = np.array([[1.5, -2.0]], dtype="<f4")
    texts = [b"good", "h\xe9".encode()]
    strings = b"".join(struct.pack("<I", len(t)) + t for t in texts)
    body, length = binary_body({"inputs": [
        {"name": "a", "shape": [1, 2], "datatype": "FP32", "parameters": {"binary_data_size": 8}},
        {"name": "b", "shape": [2], "datatype": "BYTES", "parameters": {"binary_data_size": len(strings)}}],
        "outputs": [{"name": "p", "parameters": {"binary_data": True}}]}, floats.tobytes(), strings)
    req = parse_infer(body, length)
    assert req.inputs[0].array.tolist() == [[1.5, -2.0]]
    assert req.inputs[1].array.tolist() == texts
    assert req.outputs[0].name == "p" and req.outputs[0].binary


@pytest.mark.parametrize(("blob", "size", "field"), [
    (b"\x00" * 7, 7, "7 bytes, but 8 FP32 values take 32"),
    (struct.pack("<I", 9) + b"abc", 7, "runs past"),
    (b"\x00" * 8, 99, "does not fit"),
])
def test_binary_sizes_that_do_not_add_up_are_refused(blob, size, field):
    shape, datatype = ([8], "FP32") if "FP32" in field else ([1], "BYTES")
    body, length = binary_body({"inputs": [{"name": "a", "shape": shape, "datatype": datatype,
                                            "parameters": {"binary_data_size": size}}]}, blob)
    with pytest.raises(BadRequest, match=field):
        parse_infer(body, length)


def test_bytes_left_over_after_the_last_binary_input_are_refused():
    body, length = binary_body({"inputs": [{"name": "a", "shape": [1], "datatype": "INT8",
                                            "parameters": {"binary_data_size": 1}}]}, b"\x01\x02")
    with pytest.raises(BadRequest, match="1 binary bytes after the last"):
        parse_infer(body, length)


@pytest.mark.parametrize(("tensor", "field"), [
    ({"name": "x", "shape": [2], "datatype": "INT32", "data": [[1, 2], [3]]}, "unequal lengths"),
    ({"name": "x", "shape": [1], "datatype": "BOOL", "data": [1]}, "true/false"),
    ({"name": "x", "shape": [1], "datatype": "INT64", "data": [1.5]}, "numbers"),
    ({"name": "x", "shape": [1], "datatype": "FP32", "data": [None]}, "numbers"),
    ({"name": "x", "shape": [1], "datatype": "BYTES", "data": [3]}, "strings"),
    ({"name": "x", "shape": [-1], "datatype": "FP32", "data": [1]}, "non-negative"),
    ({"name": "x", "shape": [100000, 100000], "datatype": "FP32", "data": [1]}, "more than"),
])
def test_json_tensors_of_the_wrong_kind_are_refused_naming_the_field(tensor, field):
    with pytest.raises(BadRequest, match=r"inputs\[0\]") as e:
        parse_infer(json.dumps({"inputs": [tensor]}).encode(), None)
    assert field in str(e.value)


def test_a_response_with_a_binary_output_announces_its_json_length():
    body, length = encode_response("m", "1", "id-7", [("labels", np.array(["pos", "neg"], dtype=object), False),
                                                      ("p", np.array([[0.25, 0.75]]), True)])
    head = json.loads(body[:length])
    assert head["id"] == "id-7" and head["outputs"][0] == {"name": "labels", "datatype": "BYTES", "shape": [2],
                                                           "data": ["pos", "neg"]}
    assert head["outputs"][1]["parameters"] == {"binary_data_size": 16}
    assert np.frombuffer(body[length:], "<f8").tolist() == [0.25, 0.75]
