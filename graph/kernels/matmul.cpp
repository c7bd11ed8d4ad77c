/// \file matmul.cpp
/// Reference kernels for matrix products: Gemm / FusedGemm (Gemm-13) and MatMul / FusedMatMul
/// (MatMul-13, numpy.matmul semantics). Products accumulate in double; the i-k-j loop order
/// keeps the output row innermost so that it vectorises.

#include <algorithm>

#include "kernels.hpp"

namespace webtune::graph::kernels {
namespace {

/// acc[M,N] += A[M,K] · B[K,N], all row-major.
void accumulate_product(const float* a, const float* b, double* acc, int64_t m_size, int64_t k_size,
                        int64_t n_size) {
  for (int64_t m = 0; m < m_size; ++m) {
    double* row = acc + m * n_size;
    for (int64_t k = 0; k < k_size; ++k) {
      const double av = a[m * k_size + k];
      const float* brow = b + k * n_size;
      for (int64_t n = 0; n < n_size; ++n) row[n] += av * brow[n];
    }
  }
}

/// `rows` × `cols` row-major matrix `m` transposed.
std::vector<float> transposed(const float* m, int64_t rows, int64_t cols) {
  std::vector<float> t(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = m[r * cols + c];
  return t;
}

/// Reads a fused node's epilogue inputs (after its two main inputs) and writes
/// y[i] = epilogue.apply(acc[i], bias[i % channels], residual[i]) with the channel the output's
/// last dimension.
void finish_fused(KernelContext& ctx, const std::vector<double>& acc,
                  const std::vector<int64_t>& out_shape) {
  const Epilogue& epilogue = ctx.node.epilogue;
  epilogue.validate();
  if (ctx.node.inputs.size() != 2 + static_cast<size_t>(epilogue.extra_inputs()))
    fail("has " + std::to_string(ctx.node.inputs.size()) + " inputs; its epilogue '" +
         epilogue.suffix() + "' needs " + std::to_string(2 + epilogue.extra_inputs()));
  const int64_t channels = out_shape.empty() ? 1 : out_shape.back();
  const auto [bias, residual] =
      epilogue_inputs(ctx, epilogue, channels, out_shape, " (the output's last dimension)");
  Value& y = ctx.outputs[0];
  y.shape = out_shape;
  y.data.resize(acc.size());
  for (size_t i = 0; i < acc.size(); ++i)
    y.data[i] = static_cast<float>(
        epilogue.apply(acc[i], bias ? bias[static_cast<int64_t>(i) % channels] : 0.0,
                       residual ? static_cast<double>(residual[i]) : 0.0));
}

}  // namespace

void gemm(KernelContext& ctx) {
  const Node& node = ctx.node;
  const bool fused = node.op_type == "FusedGemm";
  const Value& a = ctx.float_input(0, "A");
  const Value& b = ctx.float_input(1, "B");
  if (a.shape.size() != 2 || b.shape.size() != 2)
    fail("A " + shape_text(a.shape) + " and B " + shape_text(b.shape) + " must be matrices");
  const int64_t trans_a = node.get_int("transA", 0), trans_b = node.get_int("transB", 0);
  if ((trans_a != 0 && trans_a != 1) || (trans_b != 0 && trans_b != 1))
    fail("transA / transB must be 0 or 1");
  const double alpha = node.get_float("alpha", 1.0f), beta = node.get_float("beta", 1.0f);
  const int64_t m_size = trans_a ? a.shape[1] : a.shape[0];
  const int64_t k_size = trans_a ? a.shape[0] : a.shape[1];
  const int64_t n_size = trans_b ? b.shape[0] : b.shape[1];
  if ((trans_b ? b.shape[1] : b.shape[0]) != k_size)
    fail("A " + shape_text(a.shape) + (trans_a ? " (transposed)" : "") + " and B " +
         shape_text(b.shape) + (trans_b ? " (transposed)" : "") +
         " have different inner dimensions");
  std::vector<float> at, bt;
  const float* ap = a.data.data();
  const float* bp = b.data.data();
  if (trans_a) ap = (at = transposed(ap, k_size, m_size)).data();
  if (trans_b) bp = (bt = transposed(bp, n_size, k_size)).data();
  std::vector<double> acc(static_cast<size_t>(m_size * n_size), 0.0);
  accumulate_product(ap, bp, acc.data(), m_size, k_size, n_size);
  const std::vector<int64_t> out_shape = {m_size, n_size};

  if (fused) {
    // The fusion pass moved C into the epilogue's bias and scaled nothing (COMMON convention).
    if (alpha != 1.0 || beta != 1.0)
      fail("alpha and beta must be 1 in a fused Gemm (the epilogue adds its bias unscaled)");
    finish_fused(ctx, acc, out_shape);
    return;
  }
  const Value* c = ctx.optional_input(2);
  std::vector<int64_t> c_strides = {0, 0};  // C's strides over [M, N]; 0 where broadcast
  if (c) {
    if (!c->is_float()) fail("C is " + std::string(data_type_name(c->type)) + ", not float32");
    if (c->shape.size() > 2)
      fail("C has shape " + shape_text(c->shape) +
           "; it must broadcast to [M, N] = " + shape_text(out_shape));
    const size_t off = 2 - c->shape.size();
    int64_t stride = 1;
    for (size_t i = 2; i-- > off;) {
      const int64_t dim = c->shape[i - off];
      if (dim != 1 && dim != out_shape[i])
        fail("C has shape " + shape_text(c->shape) +
             "; it must broadcast to [M, N] = " + shape_text(out_shape));
      c_strides[i] = dim == 1 ? 0 : stride;
      stride *= dim;
    }
  }
  Value& y = ctx.outputs[0];
  y.shape = out_shape;
  y.data.resize(acc.size());
  for (int64_t m = 0; m < m_size; ++m)
    for (int64_t n = 0; n < n_size; ++n) {
      double v = alpha * acc[m * n_size + n];
      if (c) v += beta * static_cast<double>(c->data[m * c_strides[0] + n * c_strides[1]]);
      y.data[m * n_size + n] = static_cast<float>(v);
    }
}

void matmul(KernelContext& ctx) {
  const bool fused = ctx.node.op_type == "FusedMatMul";
  const Value& a = ctx.float_input(0, "A");
  const Value& b = ctx.float_input(1, "B");
  if (a.shape.empty() || b.shape.empty()) fail("MatMul's inputs must have rank 1 or more");
  // numpy.matmul: a 1-D A is [1, K] and a 1-D B is [K, 1]; the added dimension is removed from
  // the result. Batch dimensions (all but the last two) broadcast.
  std::vector<int64_t> as = a.shape, bs = b.shape;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m_size = as[as.size() - 2], k_size = as.back(), n_size = bs.back();
  if (bs[bs.size() - 2] != k_size)
    fail("A " + shape_text(a.shape) + " and B " + shape_text(b.shape) +
         " have different inner dimensions");
  const size_t batch_rank = std::max(as.size(), bs.size()) - 2;
  std::vector<int64_t> batch(batch_rank), a_strides(batch_rank, 0), b_strides(batch_rank, 0);
  int64_t a_stride = m_size * k_size, b_stride = k_size * n_size;
  for (size_t i = batch_rank; i-- > 0;) {
    // Right-aligned: dimension i of the batch is A's (i - (batch_rank - (rank_a - 2))).
    const int64_t ai = static_cast<int64_t>(i) - static_cast<int64_t>(batch_rank - (as.size() - 2));
    const int64_t bi = static_cast<int64_t>(i) - static_cast<int64_t>(batch_rank - (bs.size() - 2));
    const int64_t ad = ai >= 0 ? as[ai] : 1, bd = bi >= 0 ? bs[bi] : 1;
    if (ad != bd && ad != 1 && bd != 1)
      fail("the batch dimensions of A " + shape_text(a.shape) + " and B " + shape_text(b.shape) +
           " do not broadcast");
    batch[i] = std::max(ad, bd);
    if (ad != 1) a_strides[i] = a_stride;
    if (bd != 1) b_strides[i] = b_stride;
    a_stride *= ad;
    b_stride *= bd;
  }
  const int64_t batches = product(batch, 0, batch.size());
  std::vector<double> acc(static_cast<size_t>(batches * m_size * n_size), 0.0);
  std::vector<int64_t> index(batch_rank, 0);
  for (int64_t t = 0; t < batches; ++t) {
    int64_t a_off = 0, b_off = 0;
    for (size_t i = 0; i < batch_rank; ++i) {
      a_off += index[i] * a_strides[i];
      b_off += index[i] * b_strides[i];
    }
    accumulate_product(a.data.data() + a_off, b.data.data() + b_off,
                       acc.data() + t * m_size * n_size, m_size, k_size, n_size);
    next_index(index, batch);
  }
  std::vector<int64_t> out_shape = batch;
  if (a.shape.size() > 1) out_shape.push_back(m_size);
  if (b.shape.size() > 1) out_shape.push_back(n_size);
  if (fused) {
    finish_fused(ctx, acc, out_shape);
    return;
  }
  Value& y = ctx.outputs[0];
  y.shape = out_shape;
  y.data.resize(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) y.data[i] = static_cast<float>(acc[i]);
}

}  // namespace webtune::graph::kernels
