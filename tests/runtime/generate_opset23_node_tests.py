#!/usr/bin/env python3
"""Writes the ONNX backend node tests of the opset-23 operators into .cache/onnx-node-tests-23.

onnx 1.17.0's wheel, whose node tests `make deps` extracts, predates opset 23; newer wheels
no longer ship the data but still have the generators. This runs those of Attention,
RotaryEmbedding and RMSNormalization (or the operators named on the command line) with the
installed onnx package (1.18 or newer), keeping the models at opset 23 or lower (tpc reads up
to 23). tests/runtime/onnx_node_conformance_test.cc runs them when the folder exists.
"""
import argparse
import os
import sys

from onnx.backend.test import cmd_tools
from onnx.backend.test.case import node

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    ops = set(sys.argv[1:] or ["Attention", "RotaryEmbedding", "RMSNormalization"])

    def keep(case) -> bool:
        if case.model is None:
            return False
        opset = [o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")]
        return bool(opset) and opset[0] <= 23 and any(
            n.op_type in ops for n in case.model.graph.node)

    cases = [c for c in node.collect_testcases() if keep(c)]
    if not cases:
        sys.exit(f"no node tests of {sorted(ops)} in onnx {__import__('onnx').__version__}")
    cmd_tools.model_test.collect_testcases = lambda: cases
    out = os.path.join(ROOT, ".cache", "onnx-node-tests-23")
    cmd_tools.generate_data(argparse.Namespace(output=out))
    print(f"wrote {len(cases)} tests to {out}/node")


if __name__ == "__main__":
    main()
