"""onnxruntime's GroupQueryAttention with fused per-head Q/K norms, unfused for its CPU.

onnxruntime-genai's CUDA (and WebGPU) exports of Qwen 3 and the like pass the per-head
RMS norms' weights to GroupQueryAttention (inputs 14 and 15, q_norm_weight and
k_norm_weight); onnxruntime implements them only on those EPs, and its CPU refuses the node.
`unfuse(model)` returns the equivalent graph its CPU runs, which onnxruntime's schema names:
the query (and key) input reshaped to [batch, seq, heads, head_size], each Q and K head
through SimplifiedLayerNormalization (packed Q/K/V: split into Q's, K's and V's heads
first), reshaped back, and the node without those inputs and their epsilons.
`cpu_session(path)` is onnxruntime's CPU session of a model file, unfused when it needs to
be. The references of tpc's tests (the contrib node tests, tools/make_genai_exports.py,
python.real_exports' greedy decoding) come from them.
"""
from onnx import TensorProto, helper

MS = "com.microsoft"
NORM_ATTRS = ("qk_norm_epsilon", "q_norm_epsilon", "k_norm_epsilon")


def shape_of(graph, name):
    """The dims of initializer or typed value `name` of `graph`."""
    for t in graph.initializer:
        if t.name == name:
            return list(t.dims)
    for v in list(graph.input) + list(graph.value_info):
        if v.name == name:
            return [d.dim_value for d in v.type.tensor_type.shape.dim]
    raise ValueError(f"no shape for {name}")


def fused(model):
    """Whether a GroupQueryAttention node of `model` takes the fused Q/K norms."""
    return any(n.op_type == "GroupQueryAttention" and n.domain == MS and len(n.input) > 14 and
               n.input[14] for n in model.graph.node)


def cpu_session(path):
    """onnxruntime's CPU session of the model at `path`, its fused Q/K norms unfused and its
    GeGLU experts written out (unfuse_geglu_moe.py), the nodes its CPU refuses."""
    import onnx
    import onnxruntime as ort
    import unfuse_geglu_moe
    model = onnx.load(path)
    if not fused(model) and not unfuse_geglu_moe.geglu(model):
        return ort.InferenceSession(path, providers=["CPUExecutionProvider"])  # as it is
    if fused(model):
        model = unfuse(model)
    if unfuse_geglu_moe.geglu(model):
        model = unfuse_geglu_moe.unfuse(model)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def unfuse(model):
    """A copy of `model` whose GroupQueryAttention nodes take no q_norm_weight/k_norm_weight."""
    out = type(model)()
    out.CopyFrom(model)
    g = out.graph
    nodes = []
    for node in g.node:
        ins = list(node.input) + [""] * (16 - len(node.input))
        if node.op_type != "GroupQueryAttention" or node.domain != MS or not ins[14]:
            nodes.append(node)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        both = attrs.get("qk_norm_epsilon", 1e-6)
        eps = {"q": attrs.get("q_norm_epsilon", both), "k": attrs.get("k_norm_epsilon", both)}
        weight = {"q": ins[14], "k": ins[15]}
        hd = shape_of(g, weight["q"])[0]
        hq, hkv = attrs["num_heads"], attrs["kv_num_heads"]
        p = node.name or node.output[0]
        heads_shape, flat_shape = f"{p}/unfuse/heads_shape", f"{p}/unfuse/flat_shape"
        g.initializer.extend([
            helper.make_tensor(heads_shape, TensorProto.INT64, [4], [0, 0, -1, hd]),
            helper.make_tensor(flat_shape, TensorProto.INT64, [3], [0, 0, -1])])

        def norm(x, which, tag):
            y = f"{p}/unfuse/{tag}_normed"
            nodes.append(helper.make_node("SimplifiedLayerNormalization", [x, weight[which]], [y],
                                          name=f"{p}/unfuse/{tag}_norm", axis=-1,
                                          epsilon=float(eps[which])))
            return y

        def heads(x, tag):
            y = f"{p}/unfuse/{tag}_heads"
            nodes.append(helper.make_node("Reshape", [x, heads_shape], [y]))
            return y

        def flat(x, tag):
            y = f"{p}/unfuse/{tag}_flat"
            nodes.append(helper.make_node("Reshape", [x, flat_shape], [y]))
            return y

        if ins[1]:  # Q, K and V apart
            ins[0] = flat(norm(heads(ins[0], "q"), "q", "q"), "q")
            ins[1] = flat(norm(heads(ins[1], "k"), "k", "k"), "k")
        else:  # packed in the query: Q's heads, K's, V's
            sizes = f"{p}/unfuse/sizes"
            g.initializer.append(helper.make_tensor(sizes, TensorProto.INT64, [3],
                                                    [hq, hkv, hkv]))
            parts = [f"{p}/unfuse/{t}" for t in ("q", "k", "v")]
            nodes.append(helper.make_node("Split", [heads(ins[0], "qkv"), sizes], parts, axis=2))
            joined = f"{p}/unfuse/qkv_normed"
            nodes.append(helper.make_node(
                "Concat", [norm(parts[0], "q", "q"), norm(parts[1], "k", "k"), parts[2]],
                [joined], axis=2))
            ins[0] = flat(joined, "qkv")
        kept = list(ins)
        kept[14] = kept[15] = ""
        while kept and not kept[-1]:
            kept.pop()
        nodes.append(helper.make_node(
            node.op_type, kept, list(node.output), name=node.name, domain=MS,
            **{k: v for k, v in attrs.items() if k not in NORM_ATTRS}))
    del g.node[:]
    g.node.extend(nodes)
    return out
