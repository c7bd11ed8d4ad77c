/// \file glue_bodies_linear.cpp
/// GPU op-kernel bodies (glue_code.hpp) of the naive Conv / FusedConv (groups, dilations, 1–3
/// spatial dims), Gemm / FusedGemm and MatMul / FusedMatMul (batched, broadcast), for nodes no
/// tuned workload fits; fused nodes apply their epilogue (codegen/epilogue.hpp); and a gathered
/// ConvTranspose (groups, strides, dilations, pads, output_shape, output_padding).
/// Semantics are graph/kernels' (the reference executor), attribute by attribute.
#include <algorithm>
#include <string>
#include <vector>

#include "codegen/epilogue.hpp"
#include "glue_code.hpp"
#include "graph/window_plan.hpp"

namespace webtune::deploy::glue {
namespace {

// ---------------------------------------------------------------------------------------------
// Naive Conv / Gemm / MatMul (for nodes no tuned workload fits)
// ---------------------------------------------------------------------------------------------

/// Applies the node's epilogue (fused nodes) or Conv's / Gemm's own bias to the accumulator
/// `acc`; `channel` is the output channel's index expression. Fused: webtune_epilogue(acc,
/// bias[channel], residual[o]) from codegen/epilogue.hpp's functions.
void epilogue_store(Code& c, const OpContext& ctx, size_t bias_input, const std::string& channel,
                    bool fused) {
  if (fused && !ctx.node.epilogue.empty()) {
    const Epilogue& e = ctx.node.epilogue;
    std::string bias = "0.0", residual = "0.0";
    int next = static_cast<int>(bias_input);
    if (e.bias) bias = ctx.ld(next++, channel);
    if (e.residual != Residual::kNone) residual = ctx.ld(next, "o");
    c.assign("v", "webtune_epilogue(acc, " + bias + ", " + residual + ")");
    return;
  }
  c.assign("v", "acc");
  if (static_cast<int>(ctx.inputs.size()) > static_cast<int>(bias_input))
    c.assign("v", "v + " + ctx.ld(static_cast<int>(bias_input), channel));
}

void conv_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const bool fused = node.op_type == "FusedConv";
  const std::vector<int64_t>& x = ctx.shape_of(0);
  const std::vector<int64_t>& w = ctx.shape_of(1);
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size())
    ctx.fail("X " + shape_text(x) + " and W " + shape_text(w) + " must be [N, C, spatial...]");
  const int64_t group = node.get_int("group", 1);
  if (group < 1 || x[1] % group != 0 || w[0] % group != 0 || w[1] * group != x[1])
    ctx.fail("group " + num(group) + " does not fit X and W");
  if (fused) {
    node.epilogue.validate();
    if (ctx.inputs.size() != 2 + static_cast<size_t>(node.epilogue.extra_inputs()))
      ctx.fail("the epilogue's inputs do not match");
  }
  const std::vector<int64_t> kernel(w.begin() + 2, w.end());
  const Window g = pool_geometry(ctx, x, kernel, false);
  const size_t r = g.in.size();
  const int64_t cg = x[1] / group, mg = w[0] / group;
  const int64_t out_size = product(g.out), in_size = product(g.in), taps = product(kernel);
  std::vector<int64_t> expected = {x[0], w[0]};
  expected.insert(expected.end(), g.out.begin(), g.out.end());
  if (expected != ctx.out_shape) ctx.fail("the graph's output shape differs from the window's");
  c.let_int("plane", "o / " + num(out_size));
  c.let_int("rest", "o - plane * " + num(out_size));
  c.let_int("n", "plane / " + num(w[0]));
  c.let_int("m", "plane % " + num(w[0]));
  c.let_int("c0", "(m / " + num(mg) + ") * " + num(cg));
  decode(c, "rest", "q", g.out);
  c.var_float("acc", "0.0");
  c.for_("ci", num(cg));
  c.let_int("xbase", "(n * " + num(x[1]) + " + c0 + ci) * " + num(in_size));
  c.let_int("wbase", "(m * " + num(cg) + " + ci) * " + num(taps));
  for (size_t j = 0; j < r; ++j) {
    const std::string kj = "k" + num(static_cast<int64_t>(j)),
                      ij = "i" + num(static_cast<int64_t>(j));
    c.for_(kj, num(g.k[j]));
    c.let_int(ij, tap(g, j, "q" + num(static_cast<int64_t>(j)), kj));
    c.if_(ij + " >= 0 && " + ij + " < " + num(g.in[j]));
  }
  c.assign("acc", "acc + " + ctx.ld(0, "xbase + " + dot("i", row_major_strides(g.in))) + " * " +
                      ctx.ld(1, "wbase + " + dot("k", row_major_strides(kernel))));
  for (size_t j = 0; j < r; ++j) {
    c.close();
    c.close();
  }
  c.close();
  epilogue_store(c, ctx, 2, "m", fused);
}

/// Gemm (transA, transB, alpha, beta, C broadcast) and FusedGemm: Y[M, N].
void gemm_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const bool fused = node.op_type == "FusedGemm";
  const std::vector<int64_t>& a = ctx.shape_of(0);
  const std::vector<int64_t>& b = ctx.shape_of(1);
  if (a.size() != 2 || b.size() != 2) ctx.fail("A and B must be 2-D");
  const bool ta = node.get_int("transA", 0) != 0, tb = node.get_int("transB", 0) != 0;
  const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
  const int64_t n = tb ? b[0] : b[1];
  if ((tb ? b[1] : b[0]) != k) ctx.fail("A and B do not multiply");
  if (ctx.out_shape != std::vector<int64_t>{m, n}) ctx.fail("the output is not [M, N]");
  if (fused) {
    node.epilogue.validate();
    if (ctx.inputs.size() != 2 + static_cast<size_t>(node.epilogue.extra_inputs()))
      ctx.fail("the epilogue's inputs do not match");
  }
  c.let_int("row", "o / " + num(n));
  c.let_int("col", "o % " + num(n));
  c.var_float("acc", "0.0");
  c.for_("kk", num(k));
  const std::string ai = ta ? "kk * " + num(m) + " + row" : "row * " + num(k) + " + kk";
  const std::string bi = tb ? "col * " + num(k) + " + kk" : "kk * " + num(n) + " + col";
  c.assign("acc", "acc + " + ctx.ld(0, ai) + " * " + ctx.ld(1, bi));
  c.close();
  if (fused) {
    epilogue_store(c, ctx, 2, "col", true);
    return;
  }
  const double alpha = node.get_float("alpha", 1.0f), beta = node.get_float("beta", 1.0f);
  c.assign("v", Code::lit(alpha) + " * acc");
  if (ctx.inputs.size() > 2) {
    const std::vector<int64_t> strides = broadcast_strides(ctx, ctx.shape_of(2), {m, n});
    std::string index;
    if (strides[0]) index = "row" + (strides[0] == 1 ? "" : " * " + num(strides[0]));
    if (strides[1]) index += (index.empty() ? "" : " + ") + std::string("col");
    c.assign("v", "v + " + Code::lit(beta) + " * " + ctx.ld(2, index.empty() ? "0" : index));
  }
}

/// MatMul / FusedMatMul with numpy's batch broadcasting over the leading axes.
void matmul_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const bool fused = node.op_type == "FusedMatMul";
  std::vector<int64_t> a = ctx.shape_of(0), b = ctx.shape_of(1);
  if (a.empty() || b.empty()) ctx.fail("A and B must not be scalars");
  // 1-D operands: A [K] is [1, K], B [K] is [K, 1]; their axes are dropped from the output.
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  if (b[b.size() - 2] != k) ctx.fail("A and B do not multiply");
  const size_t batch_rank = std::max(a.size(), b.size()) - 2;
  std::vector<int64_t> batch(batch_rank, 1);
  for (size_t i = 0; i < batch_rank; ++i) {
    const size_t ia = i + (a.size() - 2) - batch_rank, ib = i + (b.size() - 2) - batch_rank;
    const int64_t da = i + a.size() - 2 >= batch_rank ? a[ia] : 1;
    const int64_t db = i + b.size() - 2 >= batch_rank ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) ctx.fail("batch axes do not broadcast");
    batch[i] = da == 1 ? db : da;
  }
  if (product(batch) * m * n != ctx.out_elements) ctx.fail("the output size does not match");
  if (fused) {
    node.epilogue.validate();
    if (ctx.inputs.size() != 2 + static_cast<size_t>(node.epilogue.extra_inputs()))
      ctx.fail("the epilogue's inputs do not match");
  }
  const std::vector<int64_t> a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  const std::vector<int64_t> sa = broadcast_strides(ctx, a_batch, batch);
  const std::vector<int64_t> sb = broadcast_strides(ctx, b_batch, batch);
  c.let_int("bi", "o / " + num(m * n));
  c.let_int("row", "(o / " + num(n) + ") % " + num(m));
  c.let_int("col", "o % " + num(n));
  decode(c, "bi", "q", batch);
  std::vector<int64_t> sa_scaled = sa, sb_scaled = sb;
  for (auto& s : sa_scaled) s *= m * k;
  for (auto& s : sb_scaled) s *= k * n;
  c.let_int("abase", dot("q", sa_scaled));
  c.let_int("bbase", dot("q", sb_scaled));
  c.var_float("acc", "0.0");
  c.for_("kk", num(k));
  c.assign("acc", "acc + " + ctx.ld(0, "abase + row * " + num(k) + " + kk") + " * " +
                      ctx.ld(1, "bbase + kk * " + num(n) + " + col"));
  c.close();
  if (fused)
    epilogue_store(c, ctx, 2, "col", true);
  else
    c.assign("v", "acc");
}

/// ConvTranspose, gathered: output position q of channel m sums, over the input channels of
/// m's group and the kernel taps t, x[c, i] · w[c, m mod (M/group), t] for every axis's
/// i = (q + pad_begin − t·d) / s where that divides exactly and lands inside X; plus B[m].
/// The geometry is graph::conv_transpose_geometry, the reference's own.
void conv_transpose_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const std::vector<int64_t>& x = ctx.shape_of(0);
  const std::vector<int64_t>& w = ctx.shape_of(1);
  graph::ConvTransposeGeometry g;
  try {
    g = graph::conv_transpose_geometry(node, x, w);
  } catch (const graph::GraphError& e) {
    ctx.fail(e.what());
  }
  const size_t r = g.in.size();
  const int64_t mg = w[1], filters = mg * g.group, cg = x[1] / g.group;
  std::vector<int64_t> expected = {x[0], filters};
  expected.insert(expected.end(), g.out.begin(), g.out.end());
  if (expected != ctx.out_shape)
    ctx.fail("the graph's output shape " + shape_text(ctx.out_shape) + " differs from the " +
             shape_text(expected) + " of the window");
  if (ctx.inputs.size() > 2 && ctx.shape_of(2) != std::vector<int64_t>{filters})
    ctx.fail("B is not [" + num(filters) + "]");
  const int64_t out_size = product(g.out), in_size = product(g.in), taps = product(g.k);
  c.let_int("plane", "o / " + num(out_size));
  c.let_int("rest", "o - plane * " + num(out_size));
  c.let_int("n", "plane / " + num(filters));
  c.let_int("m", "plane % " + num(filters));
  c.let_int("c0", "(m / " + num(mg) + ") * " + num(cg));
  c.let_int("ml", "m % " + num(mg));
  decode(c, "rest", "q", g.out);
  c.var_float("acc", "0.0");
  c.for_("ci", num(cg));
  c.let_int("xbase", "(n * " + num(x[1]) + " + c0 + ci) * " + num(in_size));
  c.let_int("wbase", "((c0 + ci) * " + num(mg) + " + ml) * " + num(taps));
  for (size_t j = 0; j < r; ++j) {
    const std::string jn = num(static_cast<int64_t>(j));
    c.for_("k" + jn, num(g.k[j]));
    std::string reach = "q" + jn;
    if (g.pad_begin[j] != 0) reach += " + " + num(g.pad_begin[j]);
    if (g.d[j] == 1)
      reach += " - k" + jn;
    else
      reach += " - k" + jn + " * " + num(g.d[j]);
    c.let_int("u" + jn, reach);
    c.if_("u" + jn + " >= 0 && u" + jn + " % " + num(g.s[j]) + " == 0 && u" + jn + " / " +
          num(g.s[j]) + " < " + num(g.in[j]));
    c.let_int("i" + jn, "u" + jn + " / " + num(g.s[j]));
  }
  c.assign("acc", "acc + " + ctx.ld(0, "xbase + " + dot("i", row_major_strides(g.in))) + " * " +
                      ctx.ld(1, "wbase + " + dot("k", row_major_strides(g.k))));
  for (size_t j = 0; j < r; ++j) {
    c.close();
    c.close();
  }
  c.close();
  c.assign("v", "acc");
  if (ctx.inputs.size() > 2) c.assign("v", "v + " + ctx.ld(2, "m"));
}

}  // namespace

std::vector<BodyEntry> linear_bodies() {
  return {
      {"Conv", conv_body},
      {"FusedConv", conv_body},
      {"Gemm", gemm_body},
      {"FusedGemm", gemm_body},
      {"MatMul", matmul_body},
      {"FusedMatMul", matmul_body},
      {"ConvTranspose", conv_transpose_body},
  };
}

}  // namespace webtune::deploy::glue
