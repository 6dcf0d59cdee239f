// report.html: the report as one page to look at. Self-contained: the style, the SVG
// bars and the little script (the value table's filter) are inline; nothing is fetched.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tpc/compile/report.h"

namespace tpc::compile {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Bytes(double b) {
  if (b >= 1024.0 * 1024 * 1024) return absl::StrFormat("%.2f GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return absl::StrFormat("%.2f MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return absl::StrFormat("%.1f KiB", b / 1024.0);
  return absl::StrFormat("%.0f B", b);
}

// The fraction of a weight one rank holds under `placement` ("R", "S(1)", "S(1/3)",
// "S(1@2)": split in 2 groups, each rank holding half).
double RankFraction(const std::string& placement, int64_t tp) {
  if (placement.empty() || placement[0] != 'S') return 1.0;
  const size_t at = placement.find('@');
  if (at != std::string::npos) {
    const int groups = std::atoi(placement.c_str() + at + 1);
    return groups > 0 ? 1.0 / groups : 1.0;
  }
  return 1.0 / static_cast<double>(tp);
}

const char* kKinds[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"};
const char* kColors[] = {"#d9480f", "#1971c2", "#2f9e44", "#7048e8"};

struct LayerRow {
  std::string name;
  std::map<std::string, std::pair<int, double>> by_kind;  // count, bytes
  double bytes = 0;
  double weight_total = 0;
  double weight_rank = 0;
};

const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;
max-width:1100px;padding:0 16px;color:#212529;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dee2e6;
padding-bottom:4px}.sub{color:#495057}.cards{display:flex;gap:12px;flex-wrap:wrap;margin:16px 0}
.card{border:1px solid #dee2e6;border-radius:6px;padding:10px 14px;min-width:160px}
.card b{display:block;font-size:20px}.card span{color:#495057;font-size:12px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{text-align:left;padding:3px 8px;
border-bottom:1px solid #f1f3f5;vertical-align:top}th{background:#f8f9fa;position:sticky;top:0}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}code,.mono{font-family:ui-monospace,
SFMono-Regular,Menlo,monospace;font-size:12px;word-break:break-all}.pl{font-weight:600}
.pl-R{color:#868e96}.legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;
width:10px;height:10px;margin-right:4px;border-radius:2px}input{font:inherit;padding:4px 8px;
width:320px;margin-bottom:8px}.note{color:#495057;font-size:12px}
)";

// The value table's filter (report.html#filter=TEXT opens the page filtered), and a mark
// that the script ran (the browser test reads it).
const char* kScript = R"(
(function(){
  var box=document.getElementById('filter'),rows=document.querySelectorAll('#values tbody tr'),
      shown=document.getElementById('shown');
  function apply(){var q=box.value.toLowerCase(),n=0;
    rows.forEach(function(r){var ok=!q||r.textContent.toLowerCase().indexOf(q)>=0;
      r.style.display=ok?'':'none';if(ok)n++;});shown.textContent=n+' of '+rows.length+' values';}
  var m=/[#&]filter=([^&]*)/.exec(location.hash);if(m)box.value=decodeURIComponent(m[1]);
  box.addEventListener('input',apply);apply();
  document.body.setAttribute('data-ready','1');
})();
)";

}  // namespace

std::string ReportHtml(const Report& r) {
  std::string h;
  absl::StrAppend(&h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n",
                  "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n",
                  "<title>tpc plan: ", Escape(r.model), " at tp=", r.tp, "</title>\n<style>",
                  kStyle, "</style></head>\n<body>\n");
  absl::StrAppend(&h, "<h1>", Escape(r.model), " → ", r.tp, " ranks</h1>\n<div class=\"sub\">",
                  "objective ", Escape(r.objective), ", ", Escape(r.dtype), ", device profile ",
                  Escape(r.device_profile), r.sequence_parallel ? ", sequence parallel" : "",
                  " · tpc ", Escape(r.tpc_version), "</div>\n");
  absl::StrAppend(&h, "<p class=\"note\">Collective bytes are whole-tensor bytes per forward at ",
                  Escape(DimsPhrase(r)),
                  r.dims.empty() ? " (tp-compile --dim NAME=SIZE sets them)" : "", ".</p>\n");

  // Cards: weights and collectives at a glance.
  const double ideal = r.weight_bytes_total / static_cast<double>(r.tp);
  int total_collectives = 0;
  double total_bytes = 0;
  for (const CollectiveSummary& s : r.collectives_per_forward) {
    total_collectives += s.count;
    total_bytes += s.bytes;
  }
  absl::StrAppend(&h, "<div class=\"cards\">");
  double per_rank = r.weight_bytes_per_rank;  // the files' bytes once written
  if (!r.per_rank_weight_bytes.empty()) {
    per_rank = static_cast<double>(
        *std::max_element(r.per_rank_weight_bytes.begin(), r.per_rank_weight_bytes.end()));
  }
  absl::StrAppend(&h, "<div class=\"card\" id=\"card-weights\"><b>", Bytes(per_rank),
                  "</b><span>weights per rank (total/N = ", Bytes(ideal), ", whole model ",
                  Bytes(r.weight_bytes_total), ")</span></div>");
  absl::StrAppend(&h, "<div class=\"card\" id=\"card-collectives\"><b>", total_collectives,
                  "</b><span>collectives per forward, ", Bytes(total_bytes), "</span></div>");
  absl::StrAppend(&h, "<div class=\"card\"><b>", r.ops_per_rank,
                  "</b><span>ops per rank</span></div>");
  absl::StrAppend(&h, "<div class=\"card\" id=\"card-fallbacks\"><b>", r.fallback_ops.size(),
                  "</b><span>ops with no sharding rule</span></div></div>\n");

  // Weight bytes per rank against total/N.
  absl::StrAppend(&h, "<h2>Weight bytes per rank</h2>\n");
  {
    double most = ideal;
    for (int64_t b : r.per_rank_weight_bytes) most = std::max(most, static_cast<double>(b));
    const int bar_h = 22, width = 700, label = 70;
    const int height = bar_h * static_cast<int>(r.per_rank_weight_bytes.size()) + 24;
    absl::StrAppend(&h, "<svg id=\"rank-weights\" width=\"", width + label + 120, "\" height=\"",
                    height, "\" role=\"img\" aria-label=\"weight bytes per rank\">");
    for (size_t i = 0; i < r.per_rank_weight_bytes.size(); ++i) {
      const double b = static_cast<double>(r.per_rank_weight_bytes[i]);
      const int w = most > 0 ? static_cast<int>(width * b / most) : 0;
      const int y = static_cast<int>(i) * bar_h;
      absl::StrAppend(&h, "<text x=\"0\" y=\"", y + 15, "\" font-size=\"12\">rank ", i,
                      "</text><rect class=\"bar\" x=\"", label, "\" y=\"", y + 3, "\" width=\"", w,
                      "\" height=\"", bar_h - 6, "\" fill=\"#4c6ef5\"><title>rank ", i, ": ",
                      Bytes(b), "</title></rect><text x=\"", label + w + 6, "\" y=\"", y + 15,
                      "\" font-size=\"12\">", Bytes(b), "</text>");
    }
    const int x = label + (most > 0 ? static_cast<int>(width * ideal / most) : 0);
    absl::StrAppend(&h, "<line x1=\"", x, "\" x2=\"", x, "\" y1=\"0\" y2=\"", height - 20,
                    "\" stroke=\"#212529\" stroke-dasharray=\"4 3\"/><text x=\"", x, "\" y=\"",
                    height - 6, "\" font-size=\"11\" text-anchor=\"middle\">total/N ", Bytes(ideal),
                    "</text></svg>\n");
  }

  // Per layer: the collectives and their bytes, and the layer's weights.
  std::vector<LayerRow> layers;
  std::map<std::string, size_t> index;
  auto row = [&](const std::string& name) -> LayerRow& {
    const std::string key = name.empty() ? "(outside layers)" : name;
    auto it = index.find(key);
    if (it != index.end()) return layers[it->second];
    index[key] = layers.size();
    layers.push_back(LayerRow{key, {}, 0, 0, 0});
    return layers.back();
  };
  for (const ReportValue& v : r.values) {
    LayerRow& l = row(v.layer);
    if (v.weight) {
      l.weight_total += static_cast<double>(v.bytes);
      l.weight_rank += static_cast<double>(v.bytes) * RankFraction(v.placement, r.tp);
    }
  }
  for (const ReportCollective& c : r.collectives) {
    LayerRow& l = row(c.layer);
    auto& k = l.by_kind[c.kind];
    ++k.first;
    k.second += c.bytes;
    l.bytes += c.bytes;
  }
  double most_bytes = 0;
  for (const LayerRow& l : layers) most_bytes = std::max(most_bytes, l.bytes);
  absl::StrAppend(&h, "<h2>Per layer</h2>\n<div class=\"legend\">");
  for (int k = 0; k < 4; ++k) {
    absl::StrAppend(&h, "<span><i class=\"sw\" style=\"background:", kColors[k], "\"></i>",
                    kKinds[k], "</span>");
  }
  absl::StrAppend(&h, "</div>\n<table id=\"layers\"><thead><tr><th>layer</th><th>collectives</th>",
                  "<th>bytes per forward</th><th class=\"num\">weights</th>",
                  "<th class=\"num\">per rank</th></tr></thead><tbody>\n");
  for (const LayerRow& l : layers) {
    std::string counts;
    for (int k = 0; k < 4; ++k) {
      auto it = l.by_kind.find(kKinds[k]);
      if (it == l.by_kind.end()) continue;
      absl::StrAppend(&counts, counts.empty() ? "" : ", ", it->second.first, " ", kKinds[k]);
    }
    const int width = 260;
    std::string svg = absl::StrCat("<svg class=\"bars\" width=\"", width + 80, "\" height=\"14\">");
    double x = 0;
    for (int k = 0; k < 4; ++k) {
      auto it = l.by_kind.find(kKinds[k]);
      if (it == l.by_kind.end() || most_bytes <= 0) continue;
      const double w = width * it->second.second / most_bytes;
      absl::StrAppend(
          &svg,
          absl::StrFormat("<rect class=\"bar\" x=\"%.1f\" y=\"1\" width=\"%.1f\" "
                          "height=\"12\" fill=\"%s\"><title>%s: %s</title></rect>",
                          x, std::max(w, 0.5), kColors[k], kKinds[k], Bytes(it->second.second)));
      x += w;
    }
    absl::StrAppend(&svg,
                    absl::StrFormat("<text x=\"%.1f\" y=\"11\" font-size=\"11\">%s</text>", x + 4,
                                    l.bytes > 0 ? Bytes(l.bytes) : ""),
                    "</svg>");
    absl::StrAppend(&h, "<tr><td class=\"mono\">", Escape(l.name), "</td><td>",
                    counts.empty() ? "none" : counts, "</td><td>", svg, "</td><td class=\"num\">",
                    Bytes(l.weight_total), "</td><td class=\"num\">", Bytes(l.weight_rank),
                    "</td></tr>\n");
  }
  absl::StrAppend(&h, "</tbody></table>\n");

  // Fallbacks.
  absl::StrAppend(&h, "<h2>Ops with no sharding rule</h2>\n");
  if (r.fallback_ops.empty()) {
    absl::StrAppend(&h, "<p id=\"fallbacks\">None: every op has a sharding rule.</p>\n");
  } else {
    absl::StrAppend(
        &h, "<p class=\"note\">These run replicated: their inputs are gathered first.</p>",
        "<table id=\"fallbacks\"><thead><tr><th>node</th><th>op</th></tr></thead><tbody>");
    for (const auto& [node, op] : r.fallback_ops) {
      absl::StrAppend(&h, "<tr><td class=\"mono\">", Escape(node), "</td><td>", Escape(op),
                      "</td></tr>");
    }
    absl::StrAppend(&h, "</tbody></table>\n");
  }

  // Every collective.
  absl::StrAppend(&h, "<h2>Collectives</h2>\n<details><summary>", r.collectives.size(),
                  " collectives per forward</summary><table id=\"collectives\"><thead><tr>",
                  "<th>layer</th><th>kind</th><th>value</th><th>to</th><th>consumer</th>",
                  "<th class=\"num\">bytes</th></tr></thead><tbody>\n");
  for (const ReportCollective& c : r.collectives) {
    absl::StrAppend(
        &h, "<tr><td class=\"mono\">", Escape(c.layer), "</td><td>", Escape(c.kind),
        c.reduce.empty() ? "" : absl::StrCat(" (", Escape(c.reduce), ")"),
        "</td><td class=\"mono\">", Escape(c.value), "</td><td>",
        c.inside_op ? "inside the op" : absl::StrCat(Escape(c.from), " → ", Escape(c.to)),
        "</td><td class=\"mono\">", c.consumer.empty() ? "graph output" : Escape(c.consumer),
        "</td><td class=\"num\">", Bytes(c.bytes), "</td></tr>\n");
  }
  absl::StrAppend(&h, "</tbody></table></details>\n");

  // Every value, in graph order.
  absl::StrAppend(
      &h, "<h2>Placements</h2>\n<p class=\"note\">R: whole on every rank; S(d): split ",
      "on dim d into N equal parts; S(d/k): dim d holds k blocks (a fused QKV), each ",
      "split into N; S(d@g): split into g parts, each on N/g ranks; P(sum): partial ",
      "sums, one per rank.</p>\n<input id=\"filter\" type=\"search\" ",
      "placeholder=\"filter: a name, an op, a placement\"> <span id=\"shown\"></span>\n",
      "<table id=\"values\"><thead><tr><th>value</th><th>produced by</th><th>type</th>",
      "<th>placement</th></tr></thead><tbody>\n");
  for (const ReportValue& v : r.values) {
    const std::string placement = v.placement.empty() ? "R" : v.placement;
    std::string producer =
        v.weight ? (v.used_by.empty() ? "weight" : absl::StrCat("weight of ", Escape(v.used_by)))
        : v.producer == "input"
            ? "graph input"
            : absl::StrCat(Escape(v.op), " <span class=\"mono\">", Escape(v.producer), "</span>");
    absl::StrAppend(&h, "<tr><td class=\"mono\">", Escape(v.name), "</td><td>", producer,
                    "</td><td class=\"mono\">", Escape(v.type), "</td><td class=\"pl",
                    placement == "R" ? " pl-R" : "", "\">", Escape(placement), "</td></tr>\n");
  }
  absl::StrAppend(&h, "</tbody></table>\n<script>", kScript, "</script>\n</body></html>\n");
  return h;
}

}  // namespace tpc::compile
