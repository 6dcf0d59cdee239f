// Hand-written scanner and recursive-descent parser for the IR text form (see printer.cc).
// Statements are read first and the graph is built afterwards, so that inputs may name
// values defined further down (the verifier then reports the order error).
#include "tpc/ir/parser.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "tpc/ir/text_escape.h"
#include "tpc/util/half.h"
#include "tpc/util/status_macros.h"

namespace tpc::ir {
namespace {

// Abseil here may have its own string_view type; pass std::string_view through this.
absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsIdentChar(char c) { return IsAlpha(c) || IsDigit(c); }
// Characters of numbers and literal words: `-1`, `1e-05`, `inf`, `-nan`, `true`.
bool IsWordChar(char c) { return IsIdentChar(c) || c == '.' || c == '-' || c == '+'; }

struct ParsedValue {
  std::string name;
  size_t pos = 0;
  TensorType type;
  std::optional<std::vector<Dim>> known_value;
  std::optional<Sharding> sharding;
};

struct ParsedInput {
  std::string name;  // empty: omitted (`_`)
  size_t pos = 0;
};

struct ParsedNode {
  NodeKind kind = NodeKind::kCall;
  std::vector<ParsedValue> outputs;
  Tensor tensor;
  std::string domain, op_type, name;
  Attributes attrs;
  std::vector<ParsedInput> inputs;
};

template <typename T>
void Append(std::string& bytes, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  bytes.append(buf, sizeof(T));
}

// Appends `v` as a T when it fits.
template <typename T>
bool AppendInt(std::string& bytes, int64_t v) {
  if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      v > static_cast<int64_t>(std::numeric_limits<T>::max())) {
    return false;
  }
  Append(bytes, static_cast<T>(v));
  return true;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  // The whole text as one dim.
  absl::StatusOr<Dim> ParseDimOnly() {
    TPC_ASSIGN_OR_RETURN(Dim d, ReadDim());
    if (!AtEnd()) return Error(absl::StrCat("unexpected ", Found(), " after the dim"));
    return d;
  }

  absl::StatusOr<std::unique_ptr<Graph>> Parse() {
    auto graph = std::make_unique<Graph>();
    TPC_RETURN_IF_ERROR(ExpectWord("graph"));
    TPC_ASSIGN_OR_RETURN(std::string name, ReadQuoted());
    graph->set_name(std::move(name));
    TPC_RETURN_IF_ERROR(ExpectWord("opsets"));
    TPC_RETURN_IF_ERROR(Expect('('));
    if (!Consume(')')) {
      do {
        size_t at = Skip();
        TPC_ASSIGN_OR_RETURN(std::string domain, ReadQuoted());
        TPC_RETURN_IF_ERROR(Expect(':'));
        TPC_ASSIGN_OR_RETURN(int64_t version, ReadInt());
        if (!graph->opsets().emplace(domain, version).second) {
          return ErrorAt(at, absl::StrCat("opset of domain ", QuoteName(domain), " given twice"));
        }
      } while (Consume(','));
      TPC_RETURN_IF_ERROR(Expect(')'));
    }
    TPC_RETURN_IF_ERROR(Expect('{'));

    std::vector<ParsedNode> nodes;
    std::optional<std::vector<ParsedInput>> outputs;
    while (!Consume('}')) {
      if (AtEnd()) return Error("expected '}' at end of graph");
      if (outputs) return Error("expected '}' after the output line");
      if (PeekWord() == "output") {
        ReadWord(IsIdentChar);
        TPC_RETURN_IF_ERROR(Expect('('));
        TPC_ASSIGN_OR_RETURN(outputs, ReadInputs());
        continue;
      }
      TPC_ASSIGN_OR_RETURN(ParsedNode node, ReadStatement());
      nodes.push_back(std::move(node));
    }
    if (Skip() != text_.size()) return Error("unexpected text after the graph");
    return Build(std::move(graph), std::move(nodes), std::move(outputs));
  }

 private:
  // ---- Scanner ----
  size_t Skip() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
    return pos_;
  }
  bool AtEnd() { return Skip() >= text_.size(); }
  char Peek() { return AtEnd() ? '\0' : text_[pos_]; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  bool ConsumeText(std::string_view s) {
    Skip();
    if (text_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }

  absl::Status ErrorAt(size_t at, std::string_view msg) const {
    int line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line, ":", at - line_start + 1, ": ", AV(msg)));
  }
  absl::Status Error(std::string_view msg) { return ErrorAt(Skip(), msg); }

  std::string Found() {
    if (AtEnd()) return "end of input";
    return absl::StrCat("'", AV(text_.substr(pos_, 1)), "'");
  }
  absl::Status Expect(char c) {
    if (Consume(c)) return absl::OkStatus();
    return Error(absl::StrCat("expected '", std::string(1, c), "', found ", Found()));
  }

  template <typename Pred>
  std::string_view ReadWord(Pred pred) {
    size_t start = Skip();
    while (pos_ < text_.size() && pred(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  std::string_view PeekWord() {
    size_t save = pos_;
    std::string_view w = ReadWord(IsIdentChar);
    pos_ = save;
    return w;
  }
  absl::Status ExpectWord(std::string_view word) {
    size_t at = Skip();
    if (ReadWord(IsIdentChar) == word) return absl::OkStatus();
    return ErrorAt(at, absl::StrCat("expected '", AV(word), "'"));
  }

  absl::StatusOr<std::string> ReadQuoted() {
    size_t start = Skip();
    if (Peek() != '"') return Error(absl::StrCat("expected a quoted string, found ", Found()));
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\n') {
      if (text_[pos_] == '\\') ++pos_;
      ++pos_;
    }
    if (pos_ >= text_.size() || text_[pos_] != '"') {
      return ErrorAt(start, "unterminated string");
    }
    ++pos_;
    std::string out, error;
    if (!absl::CUnescape(AV(text_.substr(start + 1, pos_ - start - 2)), &out, &error)) {
      return ErrorAt(start, absl::StrCat("bad escape in string: ", error));
    }
    return out;
  }
  // An identifier, or a quoted string for names that are not identifiers.
  absl::StatusOr<std::string> ReadName(std::string_view what) {
    if (Peek() == '"') return ReadQuoted();
    size_t at = Skip();
    if (!IsAlpha(Peek())) return ErrorAt(at, absl::StrCat("expected ", AV(what)));
    return std::string(ReadWord(IsIdentChar));
  }
  absl::StatusOr<int64_t> ReadInt() {
    size_t at = Skip();
    std::string_view w = ReadWord(IsWordChar);
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (w.empty() || ec != std::errc() || ptr != w.data() + w.size()) {
      return ErrorAt(at, absl::StrCat("expected an integer, found '", AV(w), "'"));
    }
    return v;
  }
  static std::string QuoteName(std::string_view s) { return absl::StrCat("\"", AV(s), "\""); }

  // ---- Types ----
  absl::StatusOr<Dim> ReadFactor() {
    size_t at = Skip();
    char c = Peek();
    if (c == '"') {
      TPC_ASSIGN_OR_RETURN(std::string sym, ReadQuoted());
      return Dim::Symbol(sym);
    }
    if (IsAlpha(c)) return Dim::Symbol(ReadWord(IsIdentChar));
    if (IsDigit(c)) {
      std::string_view w = ReadWord(IsDigit);
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
      if (ec != std::errc()) return ErrorAt(at, "dim out of range");
      return Dim(v);
    }
    return ErrorAt(at, absl::StrCat("expected a dim, found ", Found()));
  }
  absl::StatusOr<Dim> ReadDim() {
    if (Consume('?')) return Dim::Unknown();
    Dim result(0);
    Dim sign(Consume('-') ? -1 : 1);
    while (true) {
      TPC_ASSIGN_OR_RETURN(Dim term, ReadFactor());
      while (true) {
        if (Consume('*')) {
          TPC_ASSIGN_OR_RETURN(Dim f, ReadFactor());
          term = term * f;
        } else if (Consume('/')) {
          TPC_ASSIGN_OR_RETURN(Dim f, ReadFactor());
          if (!f.is_static() || f.value() <= 0)
            return Error("a dim divides only by a positive integer");
          term = term.DivideBy(f.value());
        } else {
          break;
        }
      }
      result = result + sign * term;
      if (Consume('+')) {
        sign = Dim(1);
      } else if (Consume('-')) {
        sign = Dim(-1);
      } else {
        return result;
      }
    }
  }
  absl::StatusOr<std::vector<Dim>> ReadDims() {
    TPC_RETURN_IF_ERROR(Expect('['));
    std::vector<Dim> dims;
    if (Consume(']')) return dims;
    do {
      TPC_ASSIGN_OR_RETURN(Dim d, ReadDim());
      dims.push_back(std::move(d));
    } while (Consume(','));
    TPC_RETURN_IF_ERROR(Expect(']'));
    return dims;
  }
  absl::StatusOr<TensorType> ReadType() {
    size_t at = Skip();
    std::string_view name = ReadWord(IsIdentChar);
    std::optional<DType> dtype = DTypeFromName(name);
    if (!dtype) return ErrorAt(at, absl::StrCat("unknown dtype '", AV(name), "'"));
    TensorType type;
    type.dtype = *dtype;
    if (Peek() == '[' && text_.substr(pos_, 3) == "[*]") {
      pos_ += 3;
      return type;
    }
    TPC_ASSIGN_OR_RETURN(type.shape, ReadDims());
    return type;
  }

  // ---- Tensor literals ----
  // `[v0, v1, ...]` of `dtype` with `shape`, or `elided`.
  absl::StatusOr<Tensor> ReadTensorData(const TensorType& type, size_t type_pos) {
    std::vector<int64_t> shape;
    if (!type.shape) return ErrorAt(type_pos, "a constant needs a known shape");
    for (const Dim& d : *type.shape) {
      if (!d.is_static() || d.value() < 0) {
        return ErrorAt(type_pos, "a constant needs a static shape");
      }
      shape.push_back(d.value());
    }
    if (PeekWord() == "elided") {
      ReadWord(IsIdentChar);
      return Tensor::Elided(type.dtype, std::move(shape));
    }
    size_t list_pos = Skip();
    TPC_RETURN_IF_ERROR(Expect('['));
    std::string bytes;
    int64_t count = 0;
    if (!Consume(']')) {
      do {
        TPC_RETURN_IF_ERROR(AppendElement(type.dtype, bytes));
        ++count;
      } while (Consume(','));
      TPC_RETURN_IF_ERROR(Expect(']'));
    }
    Tensor t = Tensor::FromBytes(type.dtype, std::move(shape), std::move(bytes));
    if (count != t.num_elements()) {
      return ErrorAt(list_pos, absl::StrCat("expected ", t.num_elements(),
                                            " values for the type, found ", count));
    }
    return t;
  }

  absl::Status AppendElement(DType dtype, std::string& bytes) {
    size_t at = Skip();
    std::string_view w = ReadWord(IsWordChar);
    const char* end = w.data() + w.size();
    auto bad = [&] {
      return ErrorAt(at, absl::StrCat("invalid ", AV(DTypeName(dtype)), " value '", AV(w), "'"));
    };
    if (w.empty()) return bad();
    switch (dtype) {
      case DType::kBool:
        if (w != "true" && w != "false") return bad();
        Append<uint8_t>(bytes, w == "true" ? 1 : 0);
        return absl::OkStatus();
      case DType::kF64: {
        double d = 0;
        auto [ptr, ec] = std::from_chars(w.data(), end, d);
        if (ec != std::errc() || ptr != end) return bad();
        Append(bytes, d);
        return absl::OkStatus();
      }
      case DType::kF32:
      case DType::kF16:
      case DType::kBF16: {
        float f = 0;
        auto [ptr, ec] = std::from_chars(w.data(), end, f);
        if (ec != std::errc() || ptr != end) return bad();
        if (dtype == DType::kF32) Append(bytes, f);
        if (dtype == DType::kF16) Append(bytes, FloatToHalf(f));
        if (dtype == DType::kBF16) Append(bytes, FloatToBFloat16(f));
        return absl::OkStatus();
      }
      case DType::kU64: {
        uint64_t u = 0;
        auto [ptr, ec] = std::from_chars(w.data(), end, u);
        if (ec != std::errc() || ptr != end) return bad();
        Append(bytes, u);
        return absl::OkStatus();
      }
      case DType::kString:
      case DType::kUndefined:
        return ErrorAt(at, absl::StrCat("constants of type ", AV(DTypeName(dtype)),
                                        " cannot be written inline"));
      default:
        break;
    }
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(w.data(), end, v);
    if (ec != std::errc() || ptr != end) return bad();
    bool ok = false;
    switch (dtype) {
      case DType::kI64:
        ok = AppendInt<int64_t>(bytes, v);
        break;
      case DType::kI32:
        ok = AppendInt<int32_t>(bytes, v);
        break;
      case DType::kU32:
        ok = AppendInt<uint32_t>(bytes, v);
        break;
      case DType::kI16:
        ok = AppendInt<int16_t>(bytes, v);
        break;
      case DType::kU16:
        ok = AppendInt<uint16_t>(bytes, v);
        break;
      case DType::kI8:
        ok = AppendInt<int8_t>(bytes, v);
        break;
      case DType::kU8:
        ok = AppendInt<uint8_t>(bytes, v);
        break;
      default:
        break;
    }
    return ok ? absl::OkStatus() : bad();
  }

  // ---- Attributes ----
  static bool LooksFloat(std::string_view w) {
    return w.find_first_of(".eEni") != std::string_view::npos;
  }
  absl::StatusOr<float> ReadFloatWord(std::string_view w, size_t at) {
    float f = 0;
    auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), f);
    if (w.empty() || ec != std::errc() || ptr != w.data() + w.size()) {
      return ErrorAt(at, absl::StrCat("invalid float '", AV(w), "'"));
    }
    return f;
  }
  absl::StatusOr<int64_t> ReadIntWord(std::string_view w, size_t at) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (w.empty() || ec != std::errc() || ptr != w.data() + w.size()) {
      return ErrorAt(at, absl::StrCat("invalid attribute value '", AV(w), "'"));
    }
    return v;
  }

  absl::StatusOr<AttrValue> ReadAttrValue() {
    size_t at = Skip();
    if (Peek() == '"') {
      TPC_ASSIGN_OR_RETURN(std::string s, ReadQuoted());
      return AttrValue(std::move(s));
    }
    if (Consume('[')) {
      if (Peek() == ']') {
        return ErrorAt(at, "an empty list is written ints[], floats[] or strings[]");
      }
      if (Peek() == '"') {
        std::vector<std::string> strings;
        do {
          TPC_ASSIGN_OR_RETURN(std::string s, ReadQuoted());
          strings.push_back(std::move(s));
        } while (Consume(','));
        TPC_RETURN_IF_ERROR(Expect(']'));
        return AttrValue(std::move(strings));
      }
      std::vector<std::pair<std::string_view, size_t>> words;
      bool floats = false;
      do {
        size_t wat = Skip();
        words.emplace_back(ReadWord(IsWordChar), wat);
        floats = floats || LooksFloat(words.back().first);
      } while (Consume(','));
      TPC_RETURN_IF_ERROR(Expect(']'));
      if (floats) {
        std::vector<float> values;
        for (auto [w, wat] : words) {
          TPC_ASSIGN_OR_RETURN(float f, ReadFloatWord(w, wat));
          values.push_back(f);
        }
        return AttrValue(std::move(values));
      }
      std::vector<int64_t> values;
      for (auto [w, wat] : words) {
        TPC_ASSIGN_OR_RETURN(int64_t v, ReadIntWord(w, wat));
        values.push_back(v);
      }
      return AttrValue(std::move(values));
    }
    std::string_view w = ReadWord(IsWordChar);
    if (w == "ints" || w == "floats" || w == "strings") {
      if (!ConsumeText("[]")) return Error("expected '[]'");
      if (w == "ints") return AttrValue(std::vector<int64_t>{});
      if (w == "floats") return AttrValue(std::vector<float>{});
      return AttrValue(std::vector<std::string>{});
    }
    if (w == "tensor") {
      TPC_RETURN_IF_ERROR(Expect('<'));
      size_t type_pos = Skip();
      TPC_ASSIGN_OR_RETURN(TensorType type, ReadType());
      TPC_RETURN_IF_ERROR(Expect('>'));
      TPC_ASSIGN_OR_RETURN(Tensor t, ReadTensorData(type, type_pos));
      return AttrValue(std::move(t));
    }
    if (w.empty()) return ErrorAt(at, absl::StrCat("expected an attribute value, found ", Found()));
    if (LooksFloat(w)) {
      TPC_ASSIGN_OR_RETURN(float f, ReadFloatWord(w, at));
      return AttrValue(f);
    }
    TPC_ASSIGN_OR_RETURN(int64_t v, ReadIntWord(w, at));
    return AttrValue(v);
  }

  // ---- Statements ----
  absl::StatusOr<std::string> ReadValueName() {
    size_t at = Skip();
    if (!Consume('%')) return ErrorAt(at, absl::StrCat("expected a value, found ", Found()));
    if (pos_ < text_.size() && text_[pos_] == '"') return ReadQuoted();
    size_t start = pos_;
    while (pos_ < text_.size() && IsBareValueChar(text_[pos_])) ++pos_;
    if (pos_ == start) return ErrorAt(at, "expected a value name after '%'");
    return std::string(text_.substr(start, pos_ - start));
  }

  // Inputs up to and including the closing ')'.
  absl::StatusOr<std::vector<ParsedInput>> ReadInputs() {
    std::vector<ParsedInput> inputs;
    if (Consume(')')) return inputs;
    do {
      size_t at = Skip();
      if (Peek() == '_') {
        ++pos_;
        inputs.push_back({"", at});
        continue;
      }
      TPC_ASSIGN_OR_RETURN(std::string name, ReadValueName());
      inputs.push_back({std::move(name), at});
    } while (Consume(','));
    TPC_RETURN_IF_ERROR(Expect(')'));
    return inputs;
  }

  absl::StatusOr<ParsedValue> ReadValueDecl() {
    ParsedValue v;
    v.pos = Skip();
    TPC_ASSIGN_OR_RETURN(v.name, ReadValueName());
    if (!defined_.insert(v.name).second) {
      return ErrorAt(v.pos, absl::StrCat("value %", v.name, " is defined twice"));
    }
    TPC_RETURN_IF_ERROR(Expect(':'));
    type_pos_ = Skip();
    TPC_ASSIGN_OR_RETURN(v.type, ReadType());
    if (PeekWord() == "value") {
      ReadWord(IsIdentChar);
      TPC_RETURN_IF_ERROR(Expect('='));
      TPC_ASSIGN_OR_RETURN(v.known_value, ReadDims());
    }
    if (PeekWord() == "sharding") {
      ReadWord(IsIdentChar);
      TPC_RETURN_IF_ERROR(Expect('('));
      Sharding sharding;
      if (!Consume(')')) {
        do {
          size_t at = Skip();
          ReadWord(IsIdentChar);
          if (Consume('(')) {
            // `S(1/3)`, `S(0/batch)`, `S(0/2*batch)`
            ReadWord([](char c) { return IsWordChar(c) || c == '/' || c == '*'; });
            TPC_RETURN_IF_ERROR(Expect(')'));
          }
          std::string_view text = text_.substr(at, pos_ - at);
          std::optional<Placement> p = Placement::Parse(text, /*symbolic=*/true);
          if (!p) return ErrorAt(at, absl::StrCat("invalid placement '", AV(text), "'"));
          sharding.placements.push_back(*p);
        } while (Consume(','));
        TPC_RETURN_IF_ERROR(Expect(')'));
      }
      v.sharding = std::move(sharding);
    }
    return v;
  }

  absl::StatusOr<ParsedNode> ReadStatement() {
    ParsedNode node;
    size_t stmt_pos = Skip();
    if (Peek() == '_') {
      ++pos_;
    } else {
      do {
        TPC_ASSIGN_OR_RETURN(ParsedValue v, ReadValueDecl());
        node.outputs.push_back(std::move(v));
      } while (Consume(','));
    }
    TPC_RETURN_IF_ERROR(Expect('='));
    size_t at = Skip();
    std::string word;
    bool quoted = Peek() == '"';
    if (quoted) {
      TPC_ASSIGN_OR_RETURN(word, ReadQuoted());
    } else {
      word = std::string(ReadWord(IsBareDomainChar));
      if (word.empty()) return ErrorAt(at, absl::StrCat("expected an operator, found ", Found()));
    }
    bool is_call = Peek() == '(' || text_.substr(pos_, 2) == "::";
    if (!quoted && !is_call && (word == "placeholder" || word == "constant")) {
      node.kind = word == "placeholder" ? NodeKind::kPlaceholder : NodeKind::kConstant;
      if (node.outputs.size() != 1) {
        return ErrorAt(stmt_pos, absl::StrCat("a ", word, " has exactly one output"));
      }
      if (node.kind == NodeKind::kConstant) {
        TPC_ASSIGN_OR_RETURN(node.tensor, ReadTensorData(node.outputs[0].type, type_pos_));
      }
      return node;
    }
    node.kind = NodeKind::kCall;
    if (ConsumeText("::")) {
      node.domain = std::move(word);
      TPC_ASSIGN_OR_RETURN(node.op_type, ReadName("an operator type"));
    } else {
      node.op_type = std::move(word);
    }
    TPC_RETURN_IF_ERROR(Expect('('));
    TPC_ASSIGN_OR_RETURN(node.inputs, ReadInputs());
    if (Consume('{')) {
      do {
        size_t key_pos = Skip();
        TPC_ASSIGN_OR_RETURN(std::string key, ReadName("an attribute name"));
        TPC_RETURN_IF_ERROR(Expect('='));
        TPC_ASSIGN_OR_RETURN(AttrValue value, ReadAttrValue());
        if (!node.attrs.emplace(key, std::move(value)).second) {
          return ErrorAt(key_pos, absl::StrCat("attribute '", key, "' given twice"));
        }
      } while (Consume(','));
      TPC_RETURN_IF_ERROR(Expect('}'));
    }
    if (PeekWord() == "name") {
      ReadWord(IsIdentChar);
      TPC_RETURN_IF_ERROR(Expect('='));
      TPC_ASSIGN_OR_RETURN(node.name, ReadQuoted());
    }
    return node;
  }

  // ---- Building ----
  static void SetInfo(Value* v, ParsedValue& p) {
    v->set_type(std::move(p.type));
    v->set_known_value(std::move(p.known_value));
    v->set_sharding(std::move(p.sharding));
  }

  absl::StatusOr<Value*> Resolve(const Graph& g, const ParsedInput& in) const {
    if (in.name.empty()) return nullptr;
    Value* v = g.FindValue(in.name);
    if (v == nullptr) return ErrorAt(in.pos, absl::StrCat("undefined value %", in.name));
    return v;
  }

  absl::StatusOr<std::unique_ptr<Graph>> Build(std::unique_ptr<Graph> g,
                                               std::vector<ParsedNode> nodes,
                                               std::optional<std::vector<ParsedInput>> outputs) {
    std::vector<Node*> built;
    built.reserve(nodes.size());
    for (ParsedNode& p : nodes) {
      if (p.kind == NodeKind::kPlaceholder) {
        Value* v = g->AddPlaceholder(p.outputs[0].name, {});
        SetInfo(v, p.outputs[0]);
        built.push_back(v->producer());
      } else if (p.kind == NodeKind::kConstant) {
        Value* v = g->AddConstant(p.outputs[0].name, std::move(p.tensor));
        SetInfo(v, p.outputs[0]);
        built.push_back(v->producer());
      } else {
        std::vector<std::string> names;
        for (const ParsedValue& o : p.outputs) names.push_back(o.name);
        Node* n = g->AddCall(std::move(p.domain), std::move(p.op_type), {}, std::move(names),
                             std::move(p.attrs), std::move(p.name));
        for (size_t i = 0; i < p.outputs.size(); ++i) {
          SetInfo(n->output(static_cast<int>(i)), p.outputs[i]);
        }
        built.push_back(n);
      }
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (const ParsedInput& in : nodes[i].inputs) {
        TPC_ASSIGN_OR_RETURN(Value * v, Resolve(*g, in));
        built[i]->AddInput(v);
      }
    }
    if (outputs) {
      std::vector<Value*> values;
      for (const ParsedInput& in : *outputs) {
        TPC_ASSIGN_OR_RETURN(Value * v, Resolve(*g, in));
        values.push_back(v);
      }
      g->SetOutputs(std::move(values));
    }
    return g;
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t type_pos_ = 0;
  std::set<std::string> defined_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(std::string_view text) {
  return Parser(text).Parse();
}

absl::StatusOr<Dim> ParseDim(std::string_view text) { return Parser(text).ParseDimOnly(); }

}  // namespace tpc::ir
