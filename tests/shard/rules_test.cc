// The per-rule golden (tests/golden/rules.txt): one line per operator record, its rule's
// text form for a one-node example. And the registry cross-check: the records are
// sorted and unique, every record has its golden line, and every operator with a
// sharding rule has a shape rule and a CPU kernel (so it imports and runs).
#include <catch2/catch.hpp>

#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "test_util.h"
#include "tpc/ir/parser.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/runtime/backend.h"
#include "tpc/shard/op_record.h"

namespace tpc::shard {
namespace {

constexpr const char* kGolden = "tests/golden/rules.txt";

// `Op(t0, t1 = [v], _) {attrs} -> k`, parsed.
struct Example {
  std::string domain;
  std::string op_type;
  std::vector<std::string> inputs;  // IR types, `type = [values]`, or `_`
  std::string attrs;                // `{...}` or empty
  int outputs = 1;
};

// Splits on commas outside brackets and braces.
std::vector<std::string> SplitTopLevel(absl::string_view s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '[' || c == '{' || c == '(') ++depth;
    if (c == ']' || c == '}' || c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.emplace_back(absl::StripAsciiWhitespace(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!absl::StripAsciiWhitespace(cur).empty()) out.emplace_back(absl::StripAsciiWhitespace(cur));
  return out;
}

Example ParseExample(absl::string_view text) {
  Example e;
  const size_t open = text.find('(');
  REQUIRE(open != absl::string_view::npos);
  size_t close = open;
  for (int depth = 0; close < text.size(); ++close) {
    if (text[close] == '(') ++depth;
    if (text[close] == ')' && --depth == 0) break;
  }
  REQUIRE(close < text.size());
  std::string name(text.substr(0, open));
  if (const size_t colons = name.find("::"); colons != std::string::npos) {
    e.domain = name.substr(0, colons);
    name = name.substr(colons + 2);
  }
  e.op_type = name;
  e.inputs = SplitTopLevel(text.substr(open + 1, close - open - 1));
  absl::string_view rest = absl::StripAsciiWhitespace(text.substr(close + 1));
  if (absl::StartsWith(rest, "{")) {
    const size_t end = rest.find('}');
    REQUIRE(end != absl::string_view::npos);
    e.attrs = std::string(rest.substr(0, end + 1));
    rest = absl::StripAsciiWhitespace(rest.substr(end + 1));
  }
  if (absl::ConsumePrefix(&rest, "->")) e.outputs = std::stoi(std::string(rest));
  return e;
}

// The example as a graph, shape-inferred.
std::unique_ptr<ir::Graph> BuildGraph(const Example& e) {
  std::ostringstream ir;
  ir << "graph \"rule\" opsets(\"\": 18, \"com.microsoft\": 1) {\n";
  std::vector<std::string> args;
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const std::string& in = e.inputs[i];
    if (in == "_") {
      args.push_back("_");
      continue;
    }
    const std::string name = absl::StrCat("%x", i);
    args.push_back(name);
    const size_t eq = in.find('=');
    if (eq == std::string::npos) {
      ir << "  " << name << ": " << in << " = placeholder\n";
    } else {
      ir << "  " << name << ": " << absl::StripAsciiWhitespace(in.substr(0, eq)) << " = constant "
         << absl::StripAsciiWhitespace(in.substr(eq + 1)) << "\n";
    }
  }
  std::vector<std::string> outs;
  for (int o = 0; o < e.outputs; ++o) outs.push_back(absl::StrCat("%y", o));
  std::vector<std::string> decls;
  for (const std::string& o : outs) decls.push_back(o + ": f32[*]");
  ir << "  " << absl::StrJoin(decls, ", ") << " = " << (e.domain.empty() ? "" : e.domain + "::")
     << e.op_type << "(" << absl::StrJoin(args, ", ") << ")"
     << (e.attrs.empty() ? "" : " " + e.attrs) << "\n";
  ir << "  output(" << absl::StrJoin(outs, ", ") << ")\n}\n";
  auto graph = ir::ParseGraph(ir.str());
  INFO(ir.str());
  INFO(graph.status().ToString());
  REQUIRE(graph.ok());
  const absl::Status inferred = onnx::InferShapes(**graph);
  INFO(inferred.ToString());
  REQUIRE(inferred.ok());
  return std::move(graph).value();
}

// The rule's text for the example's node at N = 2 (b and s divisible).
std::string RuleText(const ir::Graph& graph, const OpRecord& record) {
  ShardOptions options = tpc::testing::TpOptions(2);
  options.divisible = {"b", "s"};
  for (ir::Node* n : graph.nodes()) {
    if (!n->is_call()) continue;
    std::vector<std::string> notes;
    RuleContext ctx(*n, options);
    ctx.set_text_sink(&notes);
    std::vector<Strategy> strategies;
    record.rule(ctx, &strategies);
    return notes.empty() ? "none" : absl::StrJoin(notes, " + ");
  }
  return "no node";
}

std::string RecordName(std::string_view domain, std::string_view op) {
  return domain.empty() ? std::string(op) : std::string(domain) + "::" + std::string(op);
}

TEST_CASE("golden: the text form of every operator's sharding rule", "[shard][golden][rules]") {
  const std::string old_text = tpc::testing::ReadFile(tpc::testing::SourcePath(kGolden));
  std::string text;
  std::set<std::string> covered;
  for (absl::string_view line : absl::StrSplit(old_text, '\n')) {
    if (line.empty() || line[0] == '#') {
      absl::StrAppend(&text, line, "\n");
      continue;
    }
    const size_t arrow = line.find(" => ");
    INFO(line);
    REQUIRE(arrow != absl::string_view::npos);
    const absl::string_view example = line.substr(0, arrow);
    const Example e = ParseExample(example);
    const OpRecord* record = FindOpRecord(e.domain, e.op_type);
    INFO("no record for " << RecordName(e.domain, e.op_type));
    REQUIRE(record != nullptr);
    CHECK(covered.insert(RecordName(e.domain, e.op_type)).second);
    std::string rule = "no rule";
    if (record->rule != nullptr) rule = RuleText(*BuildGraph(e), *record);
    absl::StrAppend(&text, example, " => ", rule, "\n");
  }
  if (!text.empty()) text.pop_back();  // the split gave a last empty piece
  bool rewritten = false;
  const std::string diff = tpc::testing::CheckGolden(kGolden, text, &rewritten);
  if (rewritten) WARN("rewrote " << kGolden);
  INFO(diff);
  CHECK(diff.empty());
  // One line per record.
  for (const OpRecord& r : OpRecords()) {
    INFO(RecordName(r.domain, r.op_type) << " has no line in " << kGolden);
    CHECK(covered.count(RecordName(r.domain, r.op_type)) == 1);
  }
}

TEST_CASE("registry: records are sorted and unique and each has shape inference and a CPU kernel",
          "[shard][rules]") {
  const std::span<const OpRecord> records = OpRecords();
  REQUIRE(records.size() > 50);
  const auto backend = runtime::MakeCpuBackend(1);
  for (size_t i = 0; i < records.size(); ++i) {
    const OpRecord& r = records[i];
    const std::string name = RecordName(r.domain, r.op_type);
    INFO(name);
    if (i > 0) {
      const OpRecord& p = records[i - 1];
      CHECK((p.domain < r.domain || (p.domain == r.domain && p.op_type < r.op_type)));
    }
    CHECK(FindOpRecord(r.domain, r.op_type) == &r);
    CHECK(r.rule != nullptr);
    CHECK(onnx::CanInferShapes(r.domain, r.op_type, 23));
    CHECK(backend->FindKernel(r.domain, r.op_type) != nullptr);
  }
  CHECK(FindOpRecord("ai.onnx", "MatMul") == FindOpRecord("", "MatMul"));
  CHECK(FindOpRecord("", "NoSuchOp") == nullptr);
  CHECK(FindOpRecord("com.example", "MatMul") == nullptr);
}

}  // namespace
}  // namespace tpc::shard
