// libFuzzer entry points of tpc, as plain functions so that the fuzzers and the
// regression test (tests/fuzz/fuzz_regression_test.cc) run the very same code.
//
// Each one takes arbitrary bytes, returns 0, and must never crash, hang or leak: an
// absl::Status error is the expected outcome for bad bytes. Files they need go to a
// fresh folder under $TMPDIR (else /tmp), unique per process, removed before they
// return.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tpc::fuzz {

// The bytes are an ONNX model file, imported with tpc::onnx::ImportModel.
int FuzzImportModel(const uint8_t* data, size_t size);

// A fixed valid model whose one initializer is external data. Layout of the bytes
// (every part optional; short input just ends early):
//   [1 byte: location selector] [1 byte n][n bytes: "offset"] [1 byte m][m bytes: "length"]
//   [rest: contents of the external data file]
// n or m == 0xFF leaves that key out of the model's external_data entries.
int FuzzExternalData(const uint8_t* data, size_t size);

// The bytes are IR text: parsed; when it parses, verified, printed, and the printed
// text parsed again (that must succeed and print the same; a failure is reported on
// stderr with the tag "tpc-fuzz: round-trip").
int FuzzIrParser(const uint8_t* data, size_t size);

// tp-run's reading of a plan folder (tpc::runtime::LoadPlan). The bytes are up to three
// parts, each a 4-byte little-endian length and that many bytes (a length past the end
// takes the rest), written as plan.json, rank0.onnx, rank0.weights; a part that does not
// even have its 4-byte length is not written at all. A folder that fails to load is
// loaded again without the hash check (tp-run --no-verify), so that mutated rank files
// reach the importer.
int FuzzPlanLoader(const uint8_t* data, size_t size);

// Round-trip failures FuzzIrParser saw in this process (the regression test checks 0).
int IrRoundTripFailures();

}  // namespace tpc::fuzz
