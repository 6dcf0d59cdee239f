"""onnxruntime's MoE with GeGLU experts, written out in standard operators for its CPU.

onnxruntime-genai's builder writes Gemma 4's experts as com.microsoft MoE (and QMoE) nodes
with activation_type "geglu" (gelu_tanh(gate) · linear, FC1's gate and linear rows
interleaved, swiglu_fusion = 1); onnxruntime implements it on CUDA only, and its CPU
refuses the node. `unfuse(model)` returns the equivalent graph its CPU runs (opset 20;
QMoE's constant codes dequantized into f32 weights first, as tpc computes them):
the router's softmax, its top k (renormalized when the node asks) scattered into a dense
[tokens, experts] weight, every expert applied to every token (Einsum), the weighted sum.
Exact for routers without ties (onnxruntime's MoE gives a tie to the higher index, TopK to
the lower). The references of tpc's tests (the contrib node tests, the builder's Gemma 4
export in tools/make_genai_exports.py, python.real_exports' greedy decoding) come from it,
through unfuse_gqa_norms.cpu_session.
"""
import numpy as np
from onnx import helper, numpy_helper

from unfuse_gqa_norms import shape_of

MS = "com.microsoft"


def _is_geglu(node):
    return node.op_type in ("MoE", "QMoE") and node.domain == MS and \
        any(a.name == "activation_type" and a.s == b"geglu" for a in node.attribute)


def geglu(model):
    """Whether `model` has a GeGLU MoE or QMoE node."""
    return any(_is_geglu(n) for n in model.graph.node)


def _dequantized(graph, codes, scales, bits, block):
    """QMoE's expert weights [E, rows, cols] from their constant codes [E, rows, cols ·
    bits / 8] (low nibble first) and scales [E, rows, cols / block] or [E, rows]:
    (code - 2^(bits - 1)) · scale."""
    init = {t.name: t for t in graph.initializer}
    c = numpy_helper.to_array(init[codes]).astype(np.int32)
    s = numpy_helper.to_array(init[scales]).astype(np.float32)
    if bits == 4:
        c = np.stack([c & 15, c >> 4], axis=-1).reshape(c.shape[0], c.shape[1], -1)
    w = (c - (1 << (bits - 1))).astype(np.float32)
    cols = w.shape[2]
    per = block if block > 0 else cols
    s = s.reshape(s.shape[0], s.shape[1], -1)
    return w * np.repeat(s, per, axis=2)[:, :, :cols]


def _written_out(graph, node, p):
    """The nodes and constants of one GeGLU MoE node in standard operators, names prefixed p."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    ins = list(node.input) + [""] * (8 - len(node.input))
    consts = []

    def const(name, values):
        consts.append(numpy_helper.from_array(np.array(values), p + name))
        return p + name

    if node.op_type == "QMoE":  # the codes dequantized into constant f32 weights
        bits = attrs.get("expert_weight_bits", 4)
        block = attrs.get("block_size", 0)
        x, router, b1, b2 = ins[0], ins[1], ins[4], ins[7]
        w1 = const("fc1_weights", _dequantized(graph, ins[2], ins[3],
                                               attrs.get("fc1_expert_weight_bits", bits), block))
        w2 = const("fc2_weights", _dequantized(graph, ins[5], ins[6],
                                               attrs.get("fc2_expert_weight_bits", bits), block))
        hidden = consts[0].dims[2]
    else:
        x, router, w1, b1, w2, b2 = ins[:6]
        hidden = shape_of(graph, w1)[2]

    nodes = [
        helper.make_node("Shape", [x], [p + "shape"]),
        helper.make_node("Reshape", [x, const("rows", np.array([-1, hidden], np.int64))],
                         [p + "x"]),
        helper.make_node("Softmax", [router], [p + "probs"], axis=-1),
        helper.make_node("TopK", [p + "probs", const("k", np.array([attrs.get("k", 1)], np.int64))],
                         [p + "top", p + "top_index"], axis=-1),
    ]
    top = p + "top"
    if attrs.get("normalize_routing_weights", 0):
        nodes += [helper.make_node("ReduceSum", [top, const("last", np.array([-1], np.int64))],
                                   [p + "top_sum"], keepdims=1),
                  helper.make_node("Div", [top, p + "top_sum"], [p + "top_normalized"])]
        top = p + "top_normalized"
    nodes += [
        helper.make_node("Mul", [p + "probs", const("zero", np.zeros((), np.float32))],
                         [p + "zeros"]),
        helper.make_node("ScatterElements", [p + "zeros", p + "top_index", top], [p + "route"],
                         axis=1),
        helper.make_node("Einsum", [p + "x", w1], [p + "fc1"], equation="th,erh->ter"),
    ]
    fc1 = p + "fc1"
    if b1:
        nodes.append(helper.make_node("Add", [fc1, b1], [p + "fc1_bias"]))
        fc1 = p + "fc1_bias"
    end = const("end", np.array([1 << 30], np.int64))
    axis = const("axis", np.array([2], np.int64))
    step = const("step", np.array([2], np.int64))
    nodes += [
        helper.make_node("Slice", [fc1, const("even", np.array([0], np.int64)), end, axis, step],
                         [p + "gate"]),
        helper.make_node("Slice", [fc1, const("odd", np.array([1], np.int64)), end, axis, step],
                         [p + "linear"]),
        helper.make_node("Gelu", [p + "gate"], [p + "gate_gelu"], approximate="tanh"),
        helper.make_node("Mul", [p + "gate_gelu", p + "linear"], [p + "act"]),
        helper.make_node("Einsum", [p + "act", w2], [p + "fc2"], equation="tei,ehi->teh"),
    ]
    fc2 = p + "fc2"
    if b2:
        nodes.append(helper.make_node("Add", [fc2, b2], [p + "fc2_bias"]))
        fc2 = p + "fc2_bias"
    nodes += [helper.make_node("Einsum", [p + "route", fc2], [p + "y"], equation="te,teh->th"),
              helper.make_node("Reshape", [p + "y", p + "shape"], [node.output[0]])]
    return nodes, consts


def unfuse(model):
    """A copy of `model` whose GeGLU MoE nodes are written out in standard operators."""
    out = type(model)()
    out.CopyFrom(model)
    g = out.graph
    nodes, consts = [], []
    for k, node in enumerate(g.node):
        if _is_geglu(node):
            written, c = _written_out(g, node, f"{node.name or node.output[0]}/geglu{k}/")
            nodes += written
            consts += c
        else:
            nodes.append(node)
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(consts)
    for o in out.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = max(o.version, 20)
    out.ir_version = max(out.ir_version, 9)  # opset 20's
    return out
