// Elementwise operators: unary maps, broadcasting binary and variadic arithmetic,
// comparisons, logic, Where and casts. Known values are evaluated elementwise.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {
namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

using ValueFn = std::function<Dim(const std::vector<Dim>&)>;

// Output 0 of dtype `t` with the broadcast shape of every present input.
absl::Status SetBroadcastOutput(InferenceContext& ctx, int min_inputs, DType t) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, min_inputs));
  TPC_ASSIGN_OR_RETURN(std::optional<Dims> shape, BroadcastInputs(ctx));
  if (shape.has_value()) {
    ctx.set_output_type(0, TensorType(t, std::move(*shape)));
  } else {
    SetUnknownRank(ctx, 0, t);
  }
  return absl::OkStatus();
}

// Evaluates `fn` elementwise over the known values of every present input.
void EvaluateValues(InferenceContext& ctx, const ValueFn& fn) {
  std::vector<int> inputs;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) inputs.push_back(i);
  }
  std::optional<std::vector<Dims>> values = BroadcastValues(ctx, inputs);
  if (!values.has_value() || values->empty()) return;
  const size_t n = values->front().size();
  Dims out(n);
  std::vector<Dim> args(values->size());
  for (size_t k = 0; k < n; ++k) {
    bool any_unknown = false;
    Dim unknown;  // sized by the data when an unknown argument is
    for (size_t j = 0; j < values->size(); ++j) {
      args[j] = (*values)[j][k];
      any_unknown |= args[j].is_unknown();
      unknown = Dim::UnknownFrom(unknown, args[j]);
    }
    out[k] = any_unknown ? unknown : fn(args);
  }
  MaybeSetValue(ctx, 0, std::move(out));
}

absl::Status Broadcasting(InferenceContext& ctx, int min_inputs, DType t, const ValueFn& fn) {
  TPC_RETURN_IF_ERROR(SetBroadcastOutput(ctx, min_inputs, t));
  if (fn) EvaluateValues(ctx, fn);
  return absl::OkStatus();
}

DType InputDType(const InferenceContext& ctx, int i) {
  return ctx.has_input(i) ? ctx.input_type(i).dtype : DType::kUndefined;
}

// A lower bound of a symbolic dim (every symbol is at least 1), when all coefficients
// are positive.
std::optional<int64_t> LowerBound(const Dim& d) {
  if (d.is_unknown()) return std::nullopt;
  int64_t sum = 0;
  for (const Dim::Term& t : d.terms()) {
    if (t.coeff <= 0) return std::nullopt;
    sum += t.coeff / t.den;  // symbols are at least 1; floor keeps it a bound
  }
  return sum;
}

// Static comparison of two dims: a < b, when decidable.
std::optional<bool> StaticLess(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return a.value() < b.value();
  return std::nullopt;
}

Dim Bool(bool b) { return Dim(b ? 1 : 0); }

// Wraps a partial predicate: undecidable gives unknown.
ValueFn Predicate(std::function<std::optional<bool>(const Dim&, const Dim&)> p) {
  return [p](const std::vector<Dim>& a) {
    std::optional<bool> r = p(a[0], a[1]);
    return r.has_value() ? Bool(*r) : Dim();
  };
}

ValueFn StaticLogic(std::function<bool(bool, bool)> f) {
  return [f](const std::vector<Dim>& a) {
    if (!a[0].is_static() || !a[1].is_static()) return Dim();
    return Bool(f(a[0].value() != 0, a[1].value() != 0));
  };
}

}  // namespace

absl::Status InferUnary(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  ctx.set_output_type(0, ctx.input_type(0));
  return absl::OkStatus();
}

absl::Status InferUnaryBool(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  TensorType t = ctx.input_type(0);
  t.dtype = DType::kBool;
  ctx.set_output_type(0, std::move(t));
  return absl::OkStatus();
}

absl::Status InferNeg(InferenceContext& ctx) {
  return Broadcasting(ctx, 1, InputDType(ctx, 0),
                      [](const std::vector<Dim>& a) { return Dim(0) - a[0]; });
}

absl::Status InferAbs(InferenceContext& ctx) {
  return Broadcasting(ctx, 1, InputDType(ctx, 0), [](const std::vector<Dim>& a) {
    if (a[0].is_static()) return Dim(std::abs(a[0].value()));
    return LowerBound(a[0]).has_value() ? a[0] : Dim();
  });
}

absl::Status InferAdd(InferenceContext& ctx) {
  return Broadcasting(ctx, 2, InputDType(ctx, 0),
                      [](const std::vector<Dim>& a) { return a[0] + a[1]; });
}

absl::Status InferSub(InferenceContext& ctx) {
  return Broadcasting(ctx, 2, InputDType(ctx, 0),
                      [](const std::vector<Dim>& a) { return a[0] - a[1]; });
}

absl::Status InferMul(InferenceContext& ctx) {
  return Broadcasting(ctx, 2, InputDType(ctx, 0),
                      [](const std::vector<Dim>& a) { return a[0] * a[1]; });
}

absl::Status InferDiv(InferenceContext& ctx) {
  const bool integer = ir::IsInteger(InputDType(ctx, 0));
  return Broadcasting(ctx, 2, InputDType(ctx, 0), [integer](const std::vector<Dim>& a) {
    if (!integer) return Dim();
    if (a[0].is_static() && a[1].is_static()) {
      // Integer division truncates toward zero, as C++ does.
      return a[1].value() == 0 ? Dim() : Dim(a[0].value() / a[1].value());
    }
    return a[0].DivExact(a[1]).value_or(Dim::UnknownFrom(a[0], a[1]));
  });
}

// Integer Mod of known values (swin's padding, `(window - size % window) % window`): fmod=0
// takes the divisor's sign, as Python's %, fmod=1 the dividend's, as C's.
absl::Status InferMod(InferenceContext& ctx) {
  const bool integer = ir::IsInteger(InputDType(ctx, 0));
  const bool fmod = ctx.node().attr_int("fmod", 0) != 0;
  return Broadcasting(ctx, 2, InputDType(ctx, 0), [integer, fmod](const std::vector<Dim>& a) {
    if (!integer || !a[0].is_static() || !a[1].is_static() || a[1].value() == 0) return Dim();
    if (a[1].value() == -1) return Dim(0);  // INT64_MIN % -1 overflows
    int64_t r = a[0].value() % a[1].value();
    if (!fmod && r != 0 && (r < 0) != (a[1].value() < 0)) r += a[1].value();
    return Dim(r);
  });
}

absl::Status InferBinary(InferenceContext& ctx) {
  return Broadcasting(ctx, 2, InputDType(ctx, 0), nullptr);
}

absl::Status InferMax(InferenceContext& ctx) {
  return Broadcasting(ctx, 1, InputDType(ctx, 0), [](const std::vector<Dim>& a) {
    int64_t m = INT64_MIN;
    for (const Dim& d : a) {
      if (!d.is_static()) return Dim();
      m = std::max(m, d.value());
    }
    return Dim(m);
  });
}

absl::Status InferMin(InferenceContext& ctx) {
  return Broadcasting(ctx, 1, InputDType(ctx, 0), [](const std::vector<Dim>& a) {
    int64_t m = INT64_MAX;
    for (const Dim& d : a) {
      if (!d.is_static()) return Dim();
      m = std::min(m, d.value());
    }
    return Dim(m);
  });
}

absl::Status InferSum(InferenceContext& ctx) {
  return Broadcasting(ctx, 1, InputDType(ctx, 0), [](const std::vector<Dim>& a) {
    Dim s(0);
    for (const Dim& d : a) s = s + d;
    return s;
  });
}

absl::Status InferVariadic(InferenceContext& ctx) {
  return Broadcasting(ctx, 1, InputDType(ctx, 0), nullptr);
}

absl::Status InferEqual(InferenceContext& ctx) {
  return Broadcasting(ctx, 2, DType::kBool, Predicate([](const Dim& a, const Dim& b) {
                        if (a == b) return std::optional<bool>(true);
                        if (a.is_static() && b.is_static()) return std::optional<bool>(false);
                        // A symbolic dim is at least the sum of its (positive) coefficients.
                        if (a.is_static() && LowerBound(b).value_or(INT64_MIN) > a.value()) {
                          return std::optional<bool>(false);
                        }
                        if (b.is_static() && LowerBound(a).value_or(INT64_MIN) > b.value()) {
                          return std::optional<bool>(false);
                        }
                        return std::optional<bool>();
                      }));
}

absl::Status InferLess(InferenceContext& ctx) {
  return Broadcasting(ctx, 2, DType::kBool, Predicate(StaticLess));
}

absl::Status InferLessOrEqual(InferenceContext& ctx) {
  return Broadcasting(ctx, 2, DType::kBool, Predicate([](const Dim& a, const Dim& b) {
                        std::optional<bool> r = StaticLess(b, a);
                        return r.has_value() ? std::optional<bool>(!*r) : r;
                      }));
}

absl::Status InferGreater(InferenceContext& ctx) {
  return Broadcasting(ctx, 2, DType::kBool,
                      Predicate([](const Dim& a, const Dim& b) { return StaticLess(b, a); }));
}

absl::Status InferGreaterOrEqual(InferenceContext& ctx) {
  return Broadcasting(ctx, 2, DType::kBool, Predicate([](const Dim& a, const Dim& b) {
                        std::optional<bool> r = StaticLess(a, b);
                        return r.has_value() ? std::optional<bool>(!*r) : r;
                      }));
}

absl::Status InferAnd(InferenceContext& ctx) {
  return Broadcasting(ctx, 2, DType::kBool, StaticLogic([](bool a, bool b) { return a && b; }));
}

absl::Status InferOr(InferenceContext& ctx) {
  return Broadcasting(ctx, 2, DType::kBool, StaticLogic([](bool a, bool b) { return a || b; }));
}

absl::Status InferXor(InferenceContext& ctx) {
  return Broadcasting(ctx, 2, DType::kBool, StaticLogic([](bool a, bool b) { return a != b; }));
}

absl::Status InferNot(InferenceContext& ctx) {
  return Broadcasting(ctx, 1, DType::kBool, [](const std::vector<Dim>& a) {
    return a[0].is_static() ? Bool(a[0].value() == 0) : Dim();
  });
}

absl::Status InferWhere(InferenceContext& ctx) {
  return Broadcasting(ctx, 3, InputDType(ctx, 1), [](const std::vector<Dim>& a) {
    return a[0].is_static() ? (a[0].value() != 0 ? a[1] : a[2]) : Dim();
  });
}

absl::Status InferCast(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  if (!ctx.node().has_attr("to")) return ctx.Error("missing attribute 'to'");
  const int64_t to = ctx.node().attr_int("to", 0);
  if (to > INT32_MAX || to < 0 || !ir::IsKnownOnnxDType(static_cast<int32_t>(to))) {
    return ctx.Error(absl::StrCat("unsupported target type ", to));
  }
  const DType t = static_cast<DType>(to);
  TensorType type = ctx.input_type(0);
  const DType from = type.dtype;
  type.dtype = t;
  ctx.set_output_type(0, std::move(type));
  if (TracksValues(from) && ctx.input_value(0).has_value()) {
    Dims value = *ctx.input_value(0);
    if (t == DType::kBool) {
      for (Dim& d : value) d = d.is_static() ? Bool(d.value() != 0) : Dim();
    }
    MaybeSetValue(ctx, 0, std::move(value));
  }
  return absl::OkStatus();
}

absl::Status InferCastLike(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  TensorType type = ctx.input_type(0);
  type.dtype = ctx.input_type(1).dtype;
  ctx.set_output_type(0, std::move(type));
  if (TracksValues(ctx.input_type(0).dtype) && ctx.input_value(0).has_value() &&
      ir::IsInteger(ctx.input_type(1).dtype)) {
    MaybeSetValue(ctx, 0, *ctx.input_value(0));
  }
  return absl::OkStatus();
}

}  // namespace tpc::onnx::shape_rules
