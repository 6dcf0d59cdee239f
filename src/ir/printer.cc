#include "tpc/ir/printer.h"

#include <charconv>
#include <cstring>
#include <sstream>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tpc/ir/text_escape.h"
#include "tpc/util/half.h"

namespace tpc::ir {
namespace {

std::string ValueName(const Value* v) {
  if (v == nullptr) return "_";
  const std::string& n = v->name();
  bool bare = !n.empty();
  for (char c : n) bare = bare && IsBareValueChar(c);
  return bare ? absl::StrCat("%", n) : absl::StrCat("%", Quote(n));
}

std::string DomainText(const std::string& d) {
  bool bare = !d.empty();
  for (char c : d) bare = bare && IsBareDomainChar(c);
  return bare ? d : Quote(d);
}

// Shortest round-trip text; `.0` appended to integral values so floats read as floats.
template <typename T>
std::string FloatText(T v) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, ptr);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}

std::string ElementText(const Tensor& t, int64_t i) {
  const uint8_t* p = t.data() + i * DTypeSize(t.dtype());
  switch (t.dtype()) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, sizeof(f));
      return FloatText(f);
    }
    case DType::kF64: {
      double d;
      std::memcpy(&d, p, sizeof(d));
      return FloatText(d);
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p, sizeof(h));
      return FloatText(t.dtype() == DType::kF16 ? HalfToFloat(h) : BFloat16ToFloat(h));
    }
    case DType::kBool:
      return *p != 0 ? "true" : "false";
    case DType::kU64: {
      uint64_t u;
      std::memcpy(&u, p, sizeof(u));
      return absl::StrCat(u);
    }
    default:
      return absl::StrCat(t.ElementAsInt64(i));
  }
}

bool Inlinable(const Tensor& t, const PrintOptions& options) {
  return t.has_data() && t.dtype() != DType::kString && t.dtype() != DType::kUndefined &&
         t.num_elements() <= options.max_inline_elements;
}

std::string TensorValuesText(const Tensor& t) {
  std::string out = "[";
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (i > 0) out += ", ";
    out += ElementText(t, i);
  }
  out += "]";
  return out;
}

std::string AttrText(const AttrValue& value, const PrintOptions& options) {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return absl::StrCat(v);
        } else if constexpr (std::is_same_v<T, float>) {
          return FloatText(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return Quote(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          if (v.empty()) return "ints[]";
          return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          if (v.empty()) return "floats[]";
          return absl::StrCat(
              "[",
              absl::StrJoin(v, ", ", [](std::string* out, float f) { out->append(FloatText(f)); }),
              "]");
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          if (v.empty()) return "strings[]";
          return absl::StrCat(
              "[",
              absl::StrJoin(v, ", ",
                            [](std::string* out, const std::string& s) { out->append(Quote(s)); }),
              "]");
        } else {
          std::vector<Dim> dims(v.shape().begin(), v.shape().end());
          std::string head =
              absl::StrCat("tensor<", TensorType(v.dtype(), std::move(dims)).ToString(), ">");
          if (Inlinable(v, options)) return absl::StrCat(head, TensorValuesText(v));
          return absl::StrCat(head, " elided");
        }
      },
      value);
}

std::string ValueDecl(const Value* v) {
  std::string out = absl::StrCat(ValueName(v), ": ", v->type().ToString());
  if (v->known_value()) absl::StrAppend(&out, " value=", DimsToString(*v->known_value()));
  if (v->sharding()) absl::StrAppend(&out, " sharding(", v->sharding()->ToString(), ")");
  return out;
}

void PrintNode(const Node* n, std::ostream& out, const PrintOptions& options) {
  out << "  ";
  if (n->kind() == NodeKind::kOutput) {
    out << "output(";
    for (int i = 0; i < n->num_inputs(); ++i) {
      if (i > 0) out << ", ";
      out << ValueName(n->input(i));
    }
    out << ")\n";
    return;
  }
  if (n->num_outputs() == 0) out << "_";
  for (int i = 0; i < n->num_outputs(); ++i) {
    if (i > 0) out << ", ";
    out << ValueDecl(n->output(i));
  }
  out << " = ";
  switch (n->kind()) {
    case NodeKind::kPlaceholder:
      out << "placeholder";
      break;
    case NodeKind::kConstant: {
      const Tensor& t = n->tensor();
      out << "constant " << (Inlinable(t, options) ? TensorValuesText(t) : "elided");
      break;
    }
    case NodeKind::kCall: {
      if (!n->domain().empty()) out << DomainText(n->domain()) << "::";
      out << QuoteIfNeeded(n->op_type()) << "(";
      for (int i = 0; i < n->num_inputs(); ++i) {
        if (i > 0) out << ", ";
        out << ValueName(n->input(i));
      }
      out << ")";
      if (!n->attrs().empty()) {
        out << " {";
        bool first = true;
        for (const auto& [key, value] : n->attrs()) {
          if (!first) out << ", ";
          first = false;
          out << QuoteIfNeeded(key) << "=" << AttrText(value, options);
        }
        out << "}";
      }
      if (!n->name().empty()) out << " name=" << Quote(n->name());
      break;
    }
    case NodeKind::kOutput:
      break;
  }
  out << "\n";
}

}  // namespace

void PrintGraph(const Graph& graph, std::ostream& out, const PrintOptions& options) {
  out << "graph " << Quote(graph.name()) << " opsets(";
  bool first = true;
  for (const auto& [domain, version] : graph.opsets()) {
    if (!first) out << ", ";
    first = false;
    out << Quote(domain) << ": " << version;
  }
  out << ") {\n";
  for (const Node* n : graph.nodes()) PrintNode(n, out, options);
  out << "}\n";
}

std::string PrintGraph(const Graph& graph, const PrintOptions& options) {
  std::ostringstream out;
  PrintGraph(graph, out, options);
  return out.str();
}

}  // namespace tpc::ir
