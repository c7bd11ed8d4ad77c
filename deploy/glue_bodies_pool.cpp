/// \file glue_bodies_pool.cpp
/// GPU op-kernel bodies (glue_code.hpp) of the pools: MaxPool, AveragePool (1–3 spatial dims,
/// pads, strides, dilations, ceil_mode, auto_pad, count_include_pad), GlobalAveragePool,
/// GlobalMaxPool; and
/// the window geometry the convolution body shares (conv_pool.cpp's rule).
/// Semantics are graph/kernels' (the reference executor), attribute by attribute.
#include <algorithm>
#include <string>
#include <vector>

#include "glue_code.hpp"

namespace webtune::deploy::glue {

Window pool_geometry(const OpContext& ctx, const std::vector<int64_t>& x_shape,
                     const std::vector<int64_t>& kernel, bool pool) {
  const Node& node = ctx.node;
  const size_t r = x_shape.size() - 2;
  if (kernel.size() != r)
    ctx.fail("kernel_shape " + shape_text(kernel) + " does not match the input's " + num(r) +
             " spatial dimensions");
  auto ints = [&](const char* key, size_t size, int64_t fill) {
    std::vector<int64_t> v = node.get_ints(key, std::vector<int64_t>(size, fill));
    if (v.size() != size)
      ctx.fail(std::string("attribute '") + key + "' " + shape_text(v) + " needs " + num(size) +
               " values");
    return v;
  };
  const auto strides = ints("strides", r, 1);
  const auto dilations = ints("dilations", r, 1);
  const auto pads = ints("pads", 2 * r, 0);
  const std::string auto_pad = node.get_string("auto_pad", "NOTSET");
  const int64_t ceil_mode = pool ? node.get_int("ceil_mode", 0) : 0;
  if (ceil_mode != 0 && ceil_mode != 1) ctx.fail("ceil_mode " + num(ceil_mode) + " is not 0 or 1");
  Window g;
  for (size_t j = 0; j < r; ++j) {
    const int64_t in = x_shape[2 + j], k = kernel[j], s = strides[j], d = dilations[j];
    if (k < 1 || s < 1 || d < 1) ctx.fail("kernel, strides and dilations must be positive");
    const int64_t eff = (k - 1) * d + 1;
    int64_t pb = 0, pe = 0, out = 0;
    if (auto_pad == "NOTSET") {
      pb = pads[j];
      pe = pads[j + r];
      if (pb < 0 || pe < 0) ctx.fail("pads " + shape_text(pads) + " has a negative value");
      const int64_t span = in + pb + pe - eff;
      if (span < 0) ctx.fail("the window is larger than the padded input");
      if (ceil_mode) {
        out = (span + s - 1) / s + 1;
        if ((out - 1) * s >= in + pb) --out;
      } else {
        out = span / s + 1;
      }
    } else if (auto_pad == "VALID") {
      if (in < eff) ctx.fail("the window is larger than the input with auto_pad VALID");
      out = (in - eff) / s + 1;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + eff - in);
      const int64_t small = total / 2;
      pb = auto_pad == "SAME_UPPER" ? small : total - small;
      pe = total - pb;
    } else {
      ctx.fail("auto_pad '" + auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
    }
    g.in.push_back(in);
    g.k.push_back(k);
    g.s.push_back(s);
    g.d.push_back(d);
    g.pb.push_back(pb);
    g.pe.push_back(pe);
    g.out.push_back(out);
  }
  return g;
}

/// Input position of tap `k` of output position `o` along axis j: "o·s − pb + k·d".
std::string tap(const Window& g, size_t j, const std::string& o, const std::string& k) {
  std::string text = g.s[j] == 1 ? o : o + " * " + num(g.s[j]);
  if (g.pb[j] != 0) text += " - " + num(g.pb[j]);
  text += " + " + (g.d[j] == 1 ? k : k + " * " + num(g.d[j]));
  return text;
}

namespace {

void pool_body(Code& c, const OpContext& ctx, bool max) {
  const Node& node = ctx.node;
  const std::vector<int64_t>& x = ctx.shape_of(0);
  if (x.size() < 3 || x.size() > 5)
    ctx.fail("X has shape " + shape_text(x) + "; a pool needs [N, C, spatial...] of 1 to 3 dims");
  if (!node.has("kernel_shape")) ctx.fail("needs the attribute kernel_shape");
  if (max && node.outputs.size() > 1 && !node.outputs[1].empty())
    ctx.fail("the Indices output is not computed by the glue kernel");
  const int64_t include_pad = max ? 0 : node.get_int("count_include_pad", 0);
  if (include_pad != 0 && include_pad != 1)
    ctx.fail("count_include_pad " + num(include_pad) + " is not 0 or 1");
  const Window g = pool_geometry(ctx, x, node.get_ints("kernel_shape", {}), true);
  std::vector<int64_t> expected = {x[0], x[1]};
  expected.insert(expected.end(), g.out.begin(), g.out.end());
  if (expected != ctx.out_shape)
    ctx.fail("the graph's output shape " + shape_text(ctx.out_shape) + " differs from the " +
             shape_text(expected) + " of the window");
  const size_t r = g.in.size();
  const int64_t out_size = product(g.out), in_size = product(g.in);
  c.let_int("p", "o / " + num(out_size));
  c.let_int("rest", "o - p * " + num(out_size));
  decode(c, "rest", "q", g.out);
  if (max) {
    c.var_float("best", "0.0");
    c.var_bool("found", "false");
  } else {
    c.var_float("sum", "0.0");
    c.var_int("count", "0");
  }
  // Nested loops over the taps; an axis's tap is skipped when outside the input (max, and the
  // average's sum) or outside the counted range (the average's divisor, conv_pool.cpp).
  std::string in_range;
  for (size_t j = 0; j < r; ++j) {
    const std::string kj = "k" + num(static_cast<int64_t>(j)),
                      ij = "i" + num(static_cast<int64_t>(j));
    c.for_(kj, num(g.k[j]));
    c.let_int(ij, tap(g, j, "q" + num(static_cast<int64_t>(j)), kj));
    const std::string inside = ij + " >= 0 && " + ij + " < " + num(g.in[j]);
    if (max || !include_pad) {
      c.if_(inside);
    } else {
      c.if_(ij + " >= " + num(-g.pb[j]) + " && " + ij + " < " + num(g.in[j] + g.pe[j]));
      in_range += (in_range.empty() ? "" : " && ") + inside;
    }
  }
  std::vector<int64_t> in_strides = row_major_strides(g.in);
  const std::string index = "p * " + num(in_size) + " + " + dot("i", in_strides);
  if (max) {
    c.let_float("x", ctx.ld(0, index));
    c.if_("!found || x > best");  // the first maximum wins, as in the reference
    c.assign("best", "x");
    c.assign("found", "true");
    c.close();
  } else {
    c.assign("count", "count + 1");
    if (!in_range.empty()) c.if_(in_range);
    c.assign("sum", "sum + " + ctx.ld(0, index));
    if (!in_range.empty()) c.close();
  }
  for (size_t j = 0; j < r; ++j) {
    c.close();  // if
    c.close();  // for
  }
  if (max) {
    c.if_("found");
    c.assign("v", "best");
    c.otherwise();
    c.assign("v", c.negative_infinity());
    c.close();
  } else {
    c.if_("count > 0");
    c.assign("v", "sum / " + c.to_float("count"));
    c.close();
  }
}

void global_average_pool_body(Code& c, const OpContext& ctx) {
  const std::vector<int64_t>& x = ctx.shape_of(0);
  if (x.size() < 3) ctx.fail("X has shape " + shape_text(x) + "; it needs [N, C, spatial...]");
  const int64_t size = product(x, 2);
  c.var_float("sum", "0.0");
  c.let_int("base", "o * " + num(size));
  c.for_("i", num(size));
  c.assign("sum", "sum + " + ctx.ld(0, "base + i"));
  c.close();
  c.assign("v", "sum / " + Code::lit(static_cast<double>(size)));
}

/// GlobalMaxPool: -inf, then each larger value (NaN never is, as std::max in the reference).
void global_max_pool_body(Code& c, const OpContext& ctx) {
  const std::vector<int64_t>& x = ctx.shape_of(0);
  if (x.size() < 3) ctx.fail("X has shape " + shape_text(x) + "; it needs [N, C, spatial...]");
  const int64_t size = product(x, 2);
  c.var_float("best", c.negative_infinity());
  c.let_int("base", "o * " + num(size));
  c.for_("i", num(size));
  c.let_float("x", ctx.ld(0, "base + i"));
  c.if_("x > best");
  c.assign("best", "x");
  c.close();
  c.close();
  c.assign("v", "best");
}

void max_pool_body(Code& c, const OpContext& ctx) {
  pool_body(c, ctx, true);
}
void average_pool_body(Code& c, const OpContext& ctx) {
  pool_body(c, ctx, false);
}

}  // namespace

std::vector<BodyEntry> pool_bodies() {
  return {
      {"MaxPool", max_pool_body},
      {"AveragePool", average_pool_body},
      {"GlobalAveragePool", global_average_pool_body},
      {"GlobalMaxPool", global_max_pool_body},
  };
}

}  // namespace webtune::deploy::glue
