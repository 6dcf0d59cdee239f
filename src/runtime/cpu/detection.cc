// Object-detection operators: NonMaxSuppression (greedy selection of boxes by score, per
// batch and class; its output length depends on the data) and RoiAlign (bilinear pooling of
// regions of interest), both as onnxruntime computes them.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "kernels.h"

namespace tpc::runtime::cpu {
namespace {

// A box as its corners, lower before upper on both axes.
struct Box {
  double y1, x1, y2, x2;
  double area() const { return (y2 - y1) * (x2 - x1); }
};

Box ReadBox(const double* v, bool center_point) {
  if (center_point) {  // [x_center, y_center, width, height]
    return {v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
  }
  // [y1, x1, y2, x2], any diagonal pair of corners.
  return {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]), std::max(v[1], v[3])};
}

// Intersection over union; 0 when either box is empty.
double Iou(const Box& a, const Box& b) {
  if (a.area() <= 0 || b.area() <= 0) return 0;
  const double h = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const double w = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (h <= 0 || w <= 0) return 0;
  const double inter = h * w;
  return inter / (a.area() + b.area() - inter);
}

std::vector<double> AsDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = ElementAsDouble(t, static_cast<int64_t>(i));
  return v;
}

}  // namespace

// boxes [batches, boxes, 4], scores [batches, classes, boxes], max_output_boxes_per_class,
// iou_threshold, score_threshold (all optional scalars) -> selected_indices [selected, 3]
// of (batch, class, box): per batch and class, the boxes scoring above score_threshold in
// decreasing score (ties: the lower index first), each kept unless it overlaps a kept box
// by more than iou_threshold, at most max_output_boxes_per_class of them.
absl::Status NonMaxSuppression(KernelContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4 || scores.rank() != 3 ||
      scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1)) {
    return ctx.Error(absl::StrCat("boxes ", boxes.TypeString(), " and scores ", scores.TypeString(),
                                  " do not fit: expected [batches, boxes, 4] and [batches, "
                                  "classes, boxes]"));
  }
  int64_t max_out = 0;
  if (const Tensor* t = ctx.optional_input(2); t != nullptr && t->num_elements() > 0) {
    TPC_ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInts(ctx, *t));
    max_out = v[0];
  }
  double iou_threshold = 0;
  if (const Tensor* t = ctx.optional_input(3); t != nullptr && t->num_elements() > 0) {
    iou_threshold = ElementAsDouble(*t, 0);
  }
  const Tensor* score_t = ctx.optional_input(4);
  const bool has_score_threshold = score_t != nullptr && score_t->num_elements() > 0;
  const double score_threshold = has_score_threshold ? ElementAsDouble(*score_t, 0) : 0;
  const bool center_point = ctx.node().attr_int("center_point_box", 0) != 0;
  const int64_t batches = boxes.dim(0), n = boxes.dim(1), classes = scores.dim(1);
  const std::vector<double> bv = AsDoubles(boxes), sv = AsDoubles(scores);

  std::vector<int64_t> selected;  // (batch, class, box) triples
  for (int64_t b = 0; b < batches && max_out > 0; ++b) {
    std::vector<Box> bx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      bx[static_cast<size_t>(i)] = ReadBox(bv.data() + (b * n + i) * 4, center_point);
    }
    for (int64_t c = 0; c < classes; ++c) {
      const double* s = sv.data() + (b * classes + c) * n;
      std::vector<int64_t> order;
      for (int64_t i = 0; i < n; ++i) {
        if (!has_score_threshold || s[i] > score_threshold) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t l, int64_t r) { return s[l] > s[r]; });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t k : kept) {
          if (Iou(bx[static_cast<size_t>(i)], bx[static_cast<size_t>(k)]) > iou_threshold) {
            keep = false;
            break;
          }
        }
        if (!keep) continue;
        kept.push_back(i);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  const auto count = static_cast<int64_t>(selected.size() / 3);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {count, 3}, ir::DType::kI64));
  std::copy(selected.begin(), selected.end(), y->data<int64_t>());
  return absl::OkStatus();
}

absl::StatusOr<math::RoiAlignParams> ReadRoiAlign(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& batch_indices = ctx.input(2);
  if (x.rank() != 4 || rois.rank() != 2 || rois.dim(1) != 4) {
    return ctx.Error("expected X [N, C, H, W] and rois [R, 4]");
  }
  if (batch_indices.num_elements() != rois.dim(0)) {
    return ctx.Error("batch_indices must have one index per region");
  }
  const ir::Node& node = ctx.node();
  const std::string mode = node.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") return ctx.Error(absl::StrCat("unknown mode '", mode, "'"));
  const std::string coord = node.attr_string(
      "coordinate_transformation_mode", ctx.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  if (coord != "half_pixel" && coord != "output_half_pixel") {
    return ctx.Error(absl::StrCat("unknown coordinate_transformation_mode '", coord, "'"));
  }
  math::RoiAlignParams p;
  p.half_pixel = coord == "half_pixel";
  p.max = mode == "max";
  p.out_h = node.attr_int("output_height", 1);
  p.out_w = node.attr_int("output_width", 1);
  p.ratio = node.attr_int("sampling_ratio", 0);
  p.scale = node.attr_float("spatial_scale", 1.0f);
  if (p.out_h < 1 || p.out_w < 1 || p.ratio < 0) {
    return ctx.Error("output_height and output_width must be positive, sampling_ratio >= 0");
  }
  p.channels = x.dim(1);
  p.height = x.dim(2);
  p.width = x.dim(3);
  if (rois.dim(0) * p.channels > 0 && (p.height == 0 || p.width == 0)) {
    return ctx.Error(absl::StrCat("X ", x.TypeString(), " has no pixel to sample"));
  }
  return p;
}

// X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch_indices [R] -> [R, C, out_h, out_w]:
// each output cell the average (or the maximum) of sampling_ratio^2 (adaptive when 0)
// bilinear samples of its bin of the region; a cell's samples found once for every channel.
absl::Status RoiAlign(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  TPC_ASSIGN_OR_RETURN(const math::RoiAlignParams p, ReadRoiAlign(ctx));
  TPC_ASSIGN_OR_RETURN(std::vector<int64_t> batch_of, ReadInts(ctx, ctx.input(2)));
  const int64_t num_rois = rois.dim(0), channels = p.channels;
  const std::vector<double> rv = AsDoubles(rois);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {num_rois, channels, p.out_h, p.out_w}));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    std::vector<math::RoiSample> samples;
    for (int64_t r = 0; r < num_rois; ++r) {
      const int64_t b = batch_of[static_cast<size_t>(r)];
      if (b < 0 || b >= x.dim(0)) return ctx.Error("a batch index is out of range");
      const math::RoiBins bins = math::RoiAlignBins(p, rv.data() + r * 4);
      for (int64_t ph = 0; ph < p.out_h; ++ph) {
        for (int64_t pw = 0; pw < p.out_w; ++pw) {
          samples.clear();
          for (int64_t iy = 0; iy < bins.grid_h; ++iy) {
            for (int64_t ix = 0; ix < bins.grid_w; ++ix) {
              samples.push_back(math::RoiAlignSample(p, bins, ph, pw, iy, ix));
            }
          }
          for (int64_t c = 0; c < channels; ++c) {
            const T* plane = x.data<T>() + (b * channels + c) * p.height * p.width;
            const auto load = [&](int64_t at) { return static_cast<double>(plane[at]); };
            double v = 0;
            for (size_t k = 0; k < samples.size(); ++k) {
              v = math::RoiAlignFold(p.max, v, static_cast<int64_t>(k), samples[k], load);
            }
            if (!p.max) v /= bins.count;
            y->data<T>()[((r * channels + c) * p.out_h + ph) * p.out_w + pw] = static_cast<T>(v);
          }
        }
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
