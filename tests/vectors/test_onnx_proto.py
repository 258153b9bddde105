"""The ONNX protobuf writer (cqa_search.vectors._onnx_proto) against the oracle, the
``onnx`` package: every message's bytes equal ``onnx.helper``'s, and the encoder's whole
graph parses, passes onnx's checker with shape inference, and serializes back to the
same bytes."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from cqa_search.vectors import _bert_onnx  # noqa: E402
from cqa_search.vectors import _onnx_proto as proto  # noqa: E402

ARRAYS = [np.array(1e30, np.float32), np.array(0, np.int64), np.array([-1, 0, 7], np.int64),
          np.arange(12, dtype=np.float32).reshape(3, 4),
          np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(1, 0, 2),   # not C order
          np.zeros((0, 5), np.float32)]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
def test_a_tensor_is_the_bytes_of_numpy_helper(array):
    assert bytes(proto.tensor("w", array)) == \
        numpy_helper.from_array(array, "w").SerializeToString()


@pytest.mark.parametrize("attrs,domain", [
    ({}, None), ({"axis": -1, "epsilon": 1e-12}, None), ({"perm": [0, 2, 1, 3]}, None),
    ({"keepdims": 0, "num_outputs": 3, "alpha": 0.5}, "com.microsoft")])
def test_a_node_is_the_bytes_of_make_node(attrs, domain):
    want = helper.make_node("Op", ["a", "", "b"], ["y", "z"], name="n", domain=domain,
                            **attrs)
    assert bytes(proto.node("Op", ["a", "", "b"], ["y", "z"], "n", domain=domain,
                            **attrs)) == want.SerializeToString()


def test_value_infos_graphs_and_models_are_the_bytes_of_helper():
    inputs = [proto.value_info("x", proto.FLOAT, ["b", 4]),
              proto.value_info("ids", proto.INT64, [2, "n"])]
    h_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4]),
                helper.make_tensor_value_info("ids", TensorProto.INT64, [2, "n"])]
    assert [bytes(m) for m in inputs] == [m.SerializeToString() for m in h_inputs]
    w = np.ones((4, 3), np.float32)
    graph = proto.graph([proto.node("MatMul", ["x", "w"], ["y"], "y")], "g", inputs[:1],
                        [proto.value_info("y", proto.FLOAT, ["b", 3])], [proto.tensor("w", w)])
    h_graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="y")], "g", h_inputs[:1],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 3])],
        [numpy_helper.from_array(w, "w")])
    assert bytes(graph) == h_graph.SerializeToString()
    h_model = helper.make_model(h_graph, producer_name="p", opset_imports=[
        helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)])
    h_model.ir_version = proto.IR_VERSION
    assert proto.model(graph, {"": 20, "com.microsoft": 1}, producer_name="p") == \
        h_model.SerializeToString()


def test_unsupported_values_are_refused():
    with pytest.raises(TypeError, match="tensor w: unsupported dtype float64"):
        proto.tensor("w", np.zeros(2))
    with pytest.raises(TypeError, match="attribute mode: unsupported value 'x'"):
        proto.node("Op", [], [], "n", mode="x")


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_the_encoders_graph_passes_onnxs_checker_and_round_trips(tmp_path, pooling):
    pytest.importorskip("safetensors")
    pytest.importorskip("tokenizers")
    from cqa_search.vectors.encoder import SentenceEncoder

    from .test_encoder import write_model

    write_model(tmp_path / "m", pooling=pooling)
    weights = SentenceEncoder.load(tmp_path / "m", backend="numpy")._weights
    data = _bert_onnx.build_graph(weights, pooling=pooling)
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model, full_check=True)
    assert model.SerializeToString() == data
    assert [o.name for o in model.graph.output] == ["pooled"]
    assert numpy_helper.to_array(next(t for t in model.graph.initializer
                                      if t.name == "l0_qkv")).tolist() == \
        weights.layers[0]["qkv"].tolist()
