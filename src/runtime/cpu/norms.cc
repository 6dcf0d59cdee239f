// Softmax, LogSoftmax, Hardmax and the normalisation layers (LayerNormalization, RMS norm,
// BatchNormalization in inference mode, InstanceNormalization, GroupNormalization,
// MeanVarianceNormalization).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "isa_loops.h"
#include "kernels.h"
#include "vector_math.h"

namespace tpc::runtime::cpu {
absl::StatusOr<SoftmaxLines> ReadSoftmaxLines(const KernelContext& ctx, const Tensor& x) {
  const int64_t rank = x.rank();
  SoftmaxLines l;
  if (ctx.opset() < 13) {
    // Before opset 13 the input is coerced to 2-D at `axis` (default 1).
    TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 1),
                                                     std::max<int64_t>(rank, 1)));
    for (int64_t i = 0; i < rank; ++i) (i < axis ? l.outer : l.len) *= x.dim(i);
  } else {
    TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), rank));
    for (int64_t i = 0; i < rank; ++i)
      (i < axis ? l.outer : (i == axis ? l.len : l.inner)) *= x.dim(i);
  }
  return l;
}

namespace {

absl::Status SoftmaxImpl(KernelContext& ctx, bool log) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const SoftmaxLines lines, ReadSoftmaxLines(ctx, x));
  const int64_t outer = lines.outer, len = lines.len, inner = lines.inner;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(len, 1));
    if (inner == 1) {
      // Contiguous rows (the last axis): passes the vectorizer takes.
      ctx.pool().ParallelFor(outer, grain, [&](int64_t b, int64_t e) {
        if constexpr (std::is_same_v<T, float>) {
          SoftmaxRows(px + b * len, py + b * len, e - b, len, log);  // isa_loops.h
        } else {
          for (int64_t line = b; line < e; ++line)
            SoftmaxRow(px + line * len, py + line * len, len, log);
        }
      });
      return absl::OkStatus();
    }
    ctx.pool().ParallelFor(outer * inner, grain, [&](int64_t b, int64_t e) {
      for (int64_t line = b; line < e; ++line) {
        const int64_t base = (line / inner) * len * inner + line % inner;
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < len; ++j) mx = std::max(mx, px[base + j * inner]);
        double sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          const T ev = Exp(static_cast<T>(px[base + j * inner] - mx));
          if (!log) py[base + j * inner] = ev;
          sum += ev;
        }
        if (log) {
          const T lse = static_cast<T>(std::log(sum));
          for (int64_t j = 0; j < len; ++j) py[base + j * inner] = px[base + j * inner] - mx - lse;
        } else {
          const T inv = static_cast<T>(1.0 / sum);
          for (int64_t j = 0; j < len; ++j) py[base + j * inner] *= inv;
        }
      }
    });
    return absl::OkStatus();
  });
}

// y = (x - mean) / sqrt(var + eps) · g + b for each of `rows` rows of `cols` (rms: no mean
// subtraction, var the mean square); the mean and 1 / sqrt(var + eps) of each row into
// `mean` and `inv` when not null.
template <typename T>
void NormRows(ThreadPool& pool, const T* px, int64_t rows, int64_t cols, const T* g, const T* bv,
              bool rms, double eps, T* py, T* mean_out, T* inv_out) {
  pool.ParallelFor(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(cols, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t r = b; r < e; ++r) {
                       const T* row = px + r * cols;
                       // Sums in 8 double lanes: the vectorizer keeps their order.
                       constexpr int kLanes = 8;
                       double lanes[kLanes] = {};
                       double mean = 0;
                       int64_t j = 0;
                       if (!rms) {
                         for (; j + kLanes <= cols; j += kLanes)
                           for (int l = 0; l < kLanes; ++l) lanes[l] += row[j + l];
                         for (; j < cols; ++j) mean += row[j];
                         for (double v : lanes) mean += v;
                         mean /= static_cast<double>(cols);
                       }
                       double var = 0;
                       for (double& v : lanes) v = 0;
                       for (j = 0; j + kLanes <= cols; j += kLanes) {
                         for (int l = 0; l < kLanes; ++l) {
                           const double d = row[j + l] - mean;
                           lanes[l] += d * d;
                         }
                       }
                       for (; j < cols; ++j) var += (row[j] - mean) * (row[j] - mean);
                       for (double v : lanes) var += v;
                       var /= static_cast<double>(cols);
                       const double inv = 1.0 / std::sqrt(var + eps);
                       const T m = static_cast<T>(mean), s = static_cast<T>(inv);
                       T* out = py + r * cols;
                       for (j = 0; j < cols; ++j) out[j] = (row[j] - m) * s * g[j] + bv[j];
                       if (mean_out) mean_out[r] = static_cast<T>(mean);
                       if (inv_out) inv_out[r] = static_cast<T>(inv);
                     }
                   });
}

// Normalises each row of the trailing dims from `axis`; rms: no mean subtraction.
absl::Status NormImpl(KernelContext& ctx, bool rms) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* bias = rms ? nullptr : ctx.optional_input(2);
  const int64_t rank = x.rank();
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), rank));
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  int64_t rows = 1, cols = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? rows : cols) *= x.dim(i);
  const Shape norm_shape(x.shape().begin() + axis, x.shape().end());
  // Scale and bias broadcast to the normalised shape.
  TPC_ASSIGN_OR_RETURN(Shape ss, BroadcastShapes(ctx, {scale.shape(), norm_shape}));
  if (ss != norm_shape ||
      (bias && BroadcastShapes(ctx, {bias->shape(), norm_shape}).value_or(Shape{}) != norm_shape)) {
    return ctx.Error("scale or bias does not broadcast to the normalised dims");
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  Shape stat_shape(x.shape().begin(), x.shape().begin() + axis);
  stat_shape.resize(static_cast<size_t>(rank), 1);
  Tensor* mean_out = nullptr;
  Tensor* inv_out = nullptr;
  const int inv_index = rms ? 1 : 2;
  if (!rms && ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(mean_out, ctx.Output(1, stat_shape));
  }
  if (ctx.wants_output(inv_index)) {
    TPC_ASSIGN_OR_RETURN(inv_out, ctx.Output(inv_index, stat_shape));
  }
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    // Scale and bias as full rows (they are usually exactly the normalised shape).
    std::vector<T> g(static_cast<size_t>(cols)), bv(static_cast<size_t>(cols), T(0));
    ForEachBroadcast<1>(ctx.pool(), norm_shape, {scale.shape()},
                        [&](int64_t i, const std::array<int64_t, 1>& o) {
                          g[static_cast<size_t>(i)] = scale.data<T>()[o[0]];
                        });
    if (bias) {
      ForEachBroadcast<1>(ctx.pool(), norm_shape, {bias->shape()},
                          [&](int64_t i, const std::array<int64_t, 1>& o) {
                            bv[static_cast<size_t>(i)] = bias->data<T>()[o[0]];
                          });
    }
    NormRows<T>(ctx.pool(), x.data<T>(), rows, cols, g.data(), bv.data(), rms, eps, y->data<T>(),
                mean_out ? mean_out->data<T>() : nullptr, inv_out ? inv_out->data<T>() : nullptr);
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status Softmax(KernelContext& ctx) { return SoftmaxImpl(ctx, false); }

// 1 at the first maximum of each line, 0 elsewhere.
absl::Status Hardmax(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const SoftmaxLines l, ReadSoftmaxLines(ctx, x));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    for (int64_t line = 0; line < l.outer * l.inner; ++line) {
      const int64_t base = (line / l.inner) * l.len * l.inner + line % l.inner;
      int64_t best = 0;
      for (int64_t j = 0; j < l.len; ++j) {
        if (px[base + j * l.inner] > px[base + best * l.inner]) best = j;
        py[base + j * l.inner] = T(0);
      }
      if (l.len > 0) py[base + best * l.inner] = T(1);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<ChannelNormShape> ReadChannelNorm(const KernelContext& ctx, bool instance) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.Error("the input needs a channel dim");
  ChannelNormShape sh;
  sh.n = x.dim(0);
  sh.channels = x.dim(1);
  sh.plane = sh.channels == 0 || sh.n == 0 ? 0 : x.num_elements() / (sh.n * sh.channels);
  sh.epsilon = ctx.node().attr_float("epsilon", 1e-5f);
  sh.training = !instance && ctx.node().attr_int("training_mode", 0) != 0;
  for (int i = 1; i < (instance ? 3 : 5); ++i) {
    if (ctx.input(i).dtype() != x.dtype() || ctx.input(i).num_elements() != sh.channels) {
      return ctx.Error(absl::StrCat("input ", i, " must have one ", ir::DTypeName(x.dtype()),
                                    " per channel (", sh.channels, ")"));
    }
  }
  return sh;
}

absl::StatusOr<GroupNormShape> ReadGroupNorm(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.Error("the input needs a channel dim");
  GroupNormShape sh;
  sh.groups = ctx.node().attr_int("num_groups", 0);
  sh.n = x.dim(0);
  sh.channels = x.dim(1);
  if (sh.groups < 1 || sh.channels % sh.groups != 0) {
    return ctx.Error(
        absl::StrCat(sh.channels, " channels do not split into num_groups = ", sh.groups));
  }
  sh.per_channel = ctx.opset() >= 21;
  const int64_t per = sh.per_channel ? sh.channels : sh.groups;
  for (int i = 1; i < 3; ++i) {
    if (ctx.input(i).dtype() != x.dtype() || ctx.input(i).num_elements() != per) {
      return ctx.Error(absl::StrCat("input ", i, " must have ", per, " elements of x's type"));
    }
  }
  sh.plane = sh.n * sh.channels == 0 ? 0 : x.num_elements() / (sh.n * sh.channels);
  sh.epsilon = ctx.node().attr_float("epsilon", 1e-5f);
  return sh;
}

namespace {

// y = (x - mean) / sqrt(var + epsilon) * scale + bias per channel (dim 1), with per-channel
// statistics: `stats` (BatchNormalization's running mean and variance) or those of each
// (image, channel) plane (InstanceNormalization).
absl::Status ChannelNorm(KernelContext& ctx, bool instance) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const ChannelNormShape sh, ReadChannelNorm(ctx, instance));
  const int64_t n = sh.n, c = sh.channels, plane = sh.plane;
  const double eps = sh.epsilon;
  // BatchNormalization's training mode (opset 14+): the statistics of the batch, and the
  // running statistics moved towards them as outputs 1 and 2.
  const bool training = sh.training;
  const double momentum = ctx.node().attr_float("momentum", 0.9f);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    const T* scale = ctx.input(1).data<T>();
    const T* bias = ctx.input(2).data<T>();
    // Per-channel statistics over the batch (training) or the running ones (inference).
    std::vector<double> ch_mean(static_cast<size_t>(c)), ch_var(static_cast<size_t>(c));
    if (!instance) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const size_t u = static_cast<size_t>(ch);
        if (!training) {
          ch_mean[u] = ctx.input(3).data<T>()[ch];
          ch_var[u] = ctx.input(4).data<T>()[ch];
          continue;
        }
        const double count = static_cast<double>(std::max<int64_t>(n * plane, 1));
        for (int64_t b = 0; b < n; ++b) {
          for (int64_t k = 0; k < plane; ++k) ch_mean[u] += px[(b * c + ch) * plane + k];
        }
        ch_mean[u] /= count;
        for (int64_t b = 0; b < n; ++b) {
          for (int64_t k = 0; k < plane; ++k) {
            const double d = px[(b * c + ch) * plane + k] - ch_mean[u];
            ch_var[u] += d * d;
          }
        }
        ch_var[u] /= count;
      }
    }
    if (training) {
      for (int o = 1; o < 3; ++o) {
        if (!ctx.wants_output(o)) continue;
        TPC_ASSIGN_OR_RETURN(Tensor * r, ctx.Output(o, {c}, x.dtype()));
        const T* running = ctx.input(o + 2).data<T>();
        const std::vector<double>& batch = o == 1 ? ch_mean : ch_var;
        for (int64_t ch = 0; ch < c; ++ch) {
          r->data<T>()[ch] = static_cast<T>(running[ch] * momentum +
                                            batch[static_cast<size_t>(ch)] * (1 - momentum));
        }
      }
    }
    ctx.pool().ParallelFor(n * c, 1, [&](int64_t b, int64_t e) {
      for (int64_t nc = b; nc < e; ++nc) {
        const int64_t ch = nc % c;
        const T* xp = px + nc * plane;
        T* yp = py + nc * plane;
        double mean = 0, var = 0;
        if (instance) {
          for (int64_t k = 0; k < plane; ++k) mean += xp[k];
          mean /= static_cast<double>(std::max<int64_t>(plane, 1));
          for (int64_t k = 0; k < plane; ++k) var += (xp[k] - mean) * (xp[k] - mean);
          var /= static_cast<double>(std::max<int64_t>(plane, 1));
        } else {
          mean = ch_mean[static_cast<size_t>(ch)];
          var = ch_var[static_cast<size_t>(ch)];
        }
        const double a = scale[ch] / std::sqrt(var + eps);
        const double bb = bias[ch] - mean * a;
        for (int64_t k = 0; k < plane; ++k) yp[k] = static_cast<T>(xp[k] * a + bb);
      }
    });
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status LogSoftmax(KernelContext& ctx) { return SoftmaxImpl(ctx, true); }
absl::Status LayerNormalization(KernelContext& ctx) { return NormImpl(ctx, false); }
absl::Status BatchNormalization(KernelContext& ctx) { return ChannelNorm(ctx, false); }

// Local response normalisation across `size` neighbouring channels of [N, C, ...].
absl::Status LRN(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.Error("the input needs a channel dim");
  const int64_t size = ctx.node().attr_int("size", 0);
  if (size <= 0) return ctx.Error("size must be positive");
  const double alpha = ctx.node().attr_float("alpha", 1e-4f);
  const double beta = ctx.node().attr_float("beta", 0.75f);
  const double bias = ctx.node().attr_float("bias", 1.0f);
  const int64_t n = x.dim(0), c = x.dim(1),
                plane = c == 0 || n == 0 ? 0 : x.num_elements() / (n * c);
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t k = 0; k < plane; ++k) {
          double sum = 0;
          for (int64_t j = std::max<int64_t>(0, ch - lo); j <= std::min(c - 1, ch + hi); ++j) {
            const double v = px[(b * c + j) * plane + k];
            sum += v * v;
          }
          const int64_t i = (b * c + ch) * plane + k;
          py[i] = static_cast<T>(px[i] /
                                 std::pow(bias + alpha / static_cast<double>(size) * sum, beta));
        }
      }
    }
    return absl::OkStatus();
  });
}
absl::Status InstanceNormalization(KernelContext& ctx) { return ChannelNorm(ctx, true); }

// y = (x - mean) / sqrt(var + epsilon) * scale + bias over each (image, group of C /
// num_groups channels); scale and bias per channel (opset 21) or per group (opset 18).
absl::Status GroupNormalization(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const GroupNormShape sh, ReadGroupNorm(ctx));
  const int64_t groups = sh.groups, n = sh.n, c = sh.channels;
  const int64_t per = sh.per_channel ? c : groups;
  const int64_t plane = sh.plane;
  const int64_t cg = c / groups, len = cg * plane;
  const double eps = sh.epsilon;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    const T* scale = ctx.input(1).data<T>();
    const T* bias = ctx.input(2).data<T>();
    ctx.pool().ParallelFor(n * groups, 1, [&](int64_t b, int64_t e) {
      for (int64_t ng = b; ng < e; ++ng) {
        const T* xp = x.data<T>() + ng * len;
        T* yp = y->data<T>() + ng * len;
        double mean = 0, var = 0;
        for (int64_t k = 0; k < len; ++k) mean += xp[k];
        mean /= static_cast<double>(std::max<int64_t>(len, 1));
        for (int64_t k = 0; k < len; ++k) var += (xp[k] - mean) * (xp[k] - mean);
        var /= static_cast<double>(std::max<int64_t>(len, 1));
        const double inv = 1 / std::sqrt(var + eps);
        for (int64_t j = 0; j < cg; ++j) {
          const int64_t ch = (ng % groups) * cg + j, at = per == c ? ch : ng % groups;
          const double a = scale[at] * inv, bb = bias[at] - mean * a;
          for (int64_t k = j * plane; k < (j + 1) * plane; ++k) {
            yp[k] = static_cast<T>(xp[k] * a + bb);
          }
        }
      }
    });
    return absl::OkStatus();
  });
}

// y = (x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9) over `axes` (default 0, 2, 3), as
// ONNX's function body computes it.
absl::Status MeanVarianceNormalization(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes =
      ctx.node().has_attr("axes") ? ctx.node().attr_ints("axes") : std::vector<int64_t>{0, 2, 3};
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), false);
  for (int64_t a : axes) {
    TPC_ASSIGN_OR_RETURN(const int64_t d, NormalizeAxis(ctx, a, x.rank()));
    reduced[static_cast<size_t>(d)] = true;
  }
  // Statistics per element of the kept dims.
  Shape kept_shape;
  for (int64_t d = 0; d < x.rank(); ++d) kept_shape.push_back(reduced[d] ? 1 : x.dim(d));
  const int64_t groups = NumElements(kept_shape);
  const double count =
      static_cast<double>(std::max<int64_t>(groups == 0 ? 0 : x.num_elements() / groups, 1));
  const Shape kept_strides = Strides(kept_shape);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    const T* px = x.data<T>();
    std::vector<double> sum(static_cast<size_t>(groups)), sq(static_cast<size_t>(groups));
    std::vector<int64_t> group(static_cast<size_t>(x.num_elements()));
    Shape idx(static_cast<size_t>(x.rank()), 0);
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      int64_t g = 0;
      for (size_t d = 0; d < idx.size(); ++d) g += reduced[d] ? 0 : idx[d] * kept_strides[d];
      group[static_cast<size_t>(i)] = g;
      sum[static_cast<size_t>(g)] += px[i];
      sq[static_cast<size_t>(g)] += static_cast<double>(px[i]) * px[i];
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < x.dim(static_cast<int64_t>(d))) break;
        idx[d] = 0;
      }
    }
    T* py = y->data<T>();
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      const auto g = static_cast<size_t>(group[static_cast<size_t>(i)]);
      const double mean = sum[g] / count;
      const double sd = std::sqrt(std::max(0.0, sq[g] / count - mean * mean));
      py[i] = static_cast<T>((px[i] - mean) / (sd + 1e-9));
    }
    return absl::OkStatus();
  });
}
absl::Status RMSNormalization(KernelContext& ctx) { return NormImpl(ctx, true); }

// onnxruntime's SkipLayerNormalization(input, skip, gamma, beta?, bias?) and
// SkipSimplifiedLayerNormalization(input, skip, gamma, bias?): the norm of
// s = input + skip + bias over the last dim. Outputs: output, mean, inv_std_var (each
// [..., 1]; the simplified form's mean is 0, as onnxruntime's), input_skip_bias_sum (s).
absl::Status SkipLayerNormalization(KernelContext& ctx) {
  const bool rms = ctx.node().op_type() == "SkipSimplifiedLayerNormalization";
  const Tensor& x = ctx.input(0);
  const Tensor& skip = ctx.input(1);
  const Tensor& gamma = ctx.input(2);
  const Tensor* beta = rms ? nullptr : ctx.optional_input(3);
  const Tensor* bias = ctx.optional_input(rms ? 3 : 4);
  if (x.rank() < 1) return ctx.Error("the input needs a hidden dim");
  const int64_t cols = x.dim(x.rank() - 1);
  const int64_t rows = cols == 0 ? 0 : x.num_elements() / cols;
  auto is_row = [&](const Tensor* t) {
    return t == nullptr || (t->dtype() == x.dtype() && t->num_elements() == cols);
  };
  if (!is_row(&gamma) || !is_row(beta) || !is_row(bias)) {
    return ctx.Error(absl::StrCat("gamma, beta and bias must hold ", cols,
                                  " elements (the hidden dim) of the input's type"));
  }
  TPC_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(ctx, {x.shape(), skip.shape()}));
  if (shape != x.shape() || skip.dtype() != x.dtype()) {
    return ctx.Error(absl::StrCat("skip ", skip.TypeString(), " does not broadcast to the input ",
                                  x.TypeString()));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  Shape stat_shape = x.shape();
  stat_shape.back() = 1;
  Tensor* mean_out = nullptr;
  Tensor* inv_out = nullptr;
  Tensor* sum_out = nullptr;
  if (ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(mean_out, ctx.Output(1, stat_shape));
  }
  if (ctx.wants_output(2)) {
    TPC_ASSIGN_OR_RETURN(inv_out, ctx.Output(2, stat_shape));
  }
  if (ctx.wants_output(3)) {
    TPC_ASSIGN_OR_RETURN(sum_out, ctx.Output(3, x.shape(), x.dtype()));
  }
  const double eps = ctx.node().attr_float("epsilon", 1e-12f);
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    std::vector<T> scratch;
    T* ps = nullptr;
    if (sum_out != nullptr) {
      ps = sum_out->data<T>();
    } else {
      scratch.resize(static_cast<size_t>(x.num_elements()));
      ps = scratch.data();
    }
    const T* px = x.data<T>();
    const T* pk = skip.data<T>();
    const T* pb = bias ? bias->data<T>() : nullptr;
    ForEachBroadcast<2>(ctx.pool(), shape, {x.shape(), skip.shape()},
                        [&](int64_t i, const std::array<int64_t, 2>& o) {
                          T v = static_cast<T>(px[o[0]] + pk[o[1]]);
                          if (pb != nullptr) v = static_cast<T>(v + pb[i % cols]);
                          ps[i] = v;
                        });
    std::vector<T> zeros;
    const T* pbeta = beta ? beta->data<T>() : nullptr;
    if (pbeta == nullptr) {
      zeros.assign(static_cast<size_t>(cols), T(0));
      pbeta = zeros.data();
    }
    NormRows<T>(ctx.pool(), ps, rows, cols, gamma.data<T>(), pbeta, rms, eps, y->data<T>(),
                mean_out ? mean_out->data<T>() : nullptr, inv_out ? inv_out->data<T>() : nullptr);
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
