// Helpers shared by the tests: paths of the source tree and committed models.
#pragma once

#include <string>

namespace tpc::testing {

// Absolute path of a file in the source tree, e.g. SourcePath("models/gpt2.onnx").
std::string SourcePath(const std::string& relative);
// A fresh empty temporary folder, removed when the test process ends.
std::string TempDir(const std::string& tag);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& contents);

}  // namespace tpc::testing
