/// \file wasm_module_builder.cpp
/// Builds a wasm kernel (wasm_kernel.hpp) with LLVM's C++ API and links it with lld in process.
///
/// Compiled with LLVM's include paths and definitions only (codegen/CMakeLists.txt); no Boost
/// here, and nothing throws: LLVM and lld report through return values and error streams, which
/// come back as WasmBuildResult::error.
///
/// The generated `run(tid)` is, with nb = ceil(N/NR) column blocks and [b0, b1) = this thread's
/// blocks (b0 = tid·nb/T; with split_rows every thread has all nb, and its row blocks are
/// [tid·rb/T, (tid+1)·rb/T) of rb = ceil(M/MR) instead of all of them; with steal, the loop
/// over the split blocks claims them instead, claimed_loop below):
///
///     for b in 0 .. batch:
///       pack(jb) = panel block [kk][0..NR) of B_b[kk][jb·NR + 0..NR)  (im2col gathers it from
///                  X_b; columns past N are 0)
///       rows_outer: pack every block of the thread (with pack_b), then for ib over the thread's
///                  row blocks, for lb over b1−b0 column blocks: tile(ib, lb)
///       cols_outer: for lb: pack(b0+lb) into one panel block (with pack_b), then for ib: tile
///       tile:
///         acc[MR][NR/w] = 0                       (w = 4 with simd: f32x4 locals, else f32)
///         for kk in 0 .. K step unroll_k:  (unroll_k copies of)
///           a_i = A[min(i0+i, M−1)][kk]           (splat to f32x4 with simd)
///           b_j = B row kk, columns j·w .. j·w+w  (v128 load with simd: panel or B_b itself)
///           acc[i][j] += a_i · b_j               (mul then add; one relaxed_madd with fma)
///         C_b[i0+i][col0 + ..] = acc             (rows ≥ M and columns ≥ N skipped)
///
/// Accumulators are SSA values carried by phi nodes across the K loop, so they become wasm
/// locals (the backend has unlimited locals and never spills to the shadow stack, which the
/// ABI forbids). Edge tiles: rows past M read row M−1 (clamped) and are not stored; columns past
/// N are zero in a panel, or read the neighbouring memory without packing (lanes are
/// independent, the memory layout leaves slack past every tensor) and are not stored.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "lld/Common/Driver.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/IntrinsicsWebAssembly.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "wasm_kernel.hpp"

// lld 15's wasm driver keeps its well-known symbols in static pointers (lld::wasm::WasmSym, in
// lld/wasm/Symbols.h, a header Debian does not install) and sets some of them only under some
// options: a link with --shared-memory sets WasmSym::initMemory and the TLS symbols, and the next
// link without it finds them still set, pointing into the freed context, and crashes in
// Writer::createFunction. Before each link every one of them is reset to null, as a fresh
// process has them; these declarations name the 24 pointers by their mangled names
// (`nm liblldWasm.a`), all of them plain pointers. LLVM 17 moved them into a context.
extern void* lld_wasm_sym_globalBase __asm__("_ZN3lld4wasm7WasmSym10globalBaseE");
extern void* lld_wasm_sym_initMemory __asm__("_ZN3lld4wasm7WasmSym10initMemoryE");
extern void* lld_wasm_sym_memoryBase __asm__("_ZN3lld4wasm7WasmSym10memoryBaseE");
extern void* lld_wasm_sym_tableBase32 __asm__("_ZN3lld4wasm7WasmSym11tableBase32E");
extern void* lld_wasm_sym_stackPointer __asm__("_ZN3lld4wasm7WasmSym12stackPointerE");
extern void* lld_wasm_sym_startFunction __asm__("_ZN3lld4wasm7WasmSym13startFunctionE");
extern void* lld_wasm_sym_initMemoryFlag __asm__("_ZN3lld4wasm7WasmSym14initMemoryFlagE");
extern void* lld_wasm_sym_applyDataRelocs __asm__("_ZN3lld4wasm7WasmSym15applyDataRelocsE");
extern void* lld_wasm_sym_definedTableBase __asm__("_ZN3lld4wasm7WasmSym16definedTableBaseE");
extern void* lld_wasm_sym_applyGlobalRelocs __asm__("_ZN3lld4wasm7WasmSym17applyGlobalRelocsE");
extern void* lld_wasm_sym_definedMemoryBase __asm__("_ZN3lld4wasm7WasmSym17definedMemoryBaseE");
extern void* lld_wasm_sym_definedTableBase32 __asm__("_ZN3lld4wasm7WasmSym18definedTableBase32E");
extern void* lld_wasm_sym_applyGlobalTLSRelocs __asm__(
    "_ZN3lld4wasm7WasmSym20applyGlobalTLSRelocsE");
extern void* lld_wasm_sym_indirectFunctionTable __asm__(
    "_ZN3lld4wasm7WasmSym21indirectFunctionTableE");
extern void* lld_wasm_sym_dataEnd __asm__("_ZN3lld4wasm7WasmSym7dataEndE");
extern void* lld_wasm_sym_initTLS __asm__("_ZN3lld4wasm7WasmSym7initTLSE");
extern void* lld_wasm_sym_tlsBase __asm__("_ZN3lld4wasm7WasmSym7tlsBaseE");
extern void* lld_wasm_sym_tlsSize __asm__("_ZN3lld4wasm7WasmSym7tlsSizeE");
extern void* lld_wasm_sym_heapBase __asm__("_ZN3lld4wasm7WasmSym8heapBaseE");
extern void* lld_wasm_sym_tlsAlign __asm__("_ZN3lld4wasm7WasmSym8tlsAlignE");
extern void* lld_wasm_sym_callCtors __asm__("_ZN3lld4wasm7WasmSym9callCtorsE");
extern void* lld_wasm_sym_callDtors __asm__("_ZN3lld4wasm7WasmSym9callDtorsE");
extern void* lld_wasm_sym_dsoHandle __asm__("_ZN3lld4wasm7WasmSym9dsoHandleE");
extern void* lld_wasm_sym_tableBase __asm__("_ZN3lld4wasm7WasmSym9tableBaseE");

namespace webtune {

namespace {

using llvm::BasicBlock;
using llvm::Value;

/// Writes the kernel's IR into one function `run(i32 tid)`.
class KernelWriter {
 public:
  KernelWriter(const WasmKernelSpec& spec, llvm::Module& module)
      : s_(spec), module_(module), ctx_(module.getContext()), b_(ctx_) {
    i32_ = b_.getInt32Ty();
    f32_ = b_.getFloatTy();
    v4_ = llvm::FixedVectorType::get(f32_, 4);
    ptr_ = llvm::PointerType::get(ctx_, 0);
  }

  void write() {
    auto* type = llvm::FunctionType::get(b_.getVoidTy(), {i32_}, false);
    fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "run", module_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    BasicBlock* entry = BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry);
    if (s_.kind == WasmKernelSpec::kDepthwise) {
      fn_->addFnAttr("no-builtins");  // the padded copy's loops must not become memcpy calls
      write_depthwise(fn_->getArg(0));
    } else {
      write_gemm(fn_->getArg(0));
    }
    b_.CreateRetVoid();
  }

 private:
  void write_gemm(Value* tid) {
    const int64_t nb = (s_.n + s_.nr - 1) / s_.nr;
    const int64_t row_blocks = (s_.m + s_.mr - 1) / s_.mr;
    // Static split: of the column blocks, thread t owning [t·nb/T, (t+1)·nb/T) and every row
    // block; or with split_rows of the row blocks, every column block.
    auto share = [&](int64_t blocks, bool split) -> std::pair<Value*, Value*> {
      if (!split) return {c(0), c(blocks)};
      return {b_.CreateUDiv(b_.CreateMul(tid, c(blocks)), c(s_.threads)),
              b_.CreateUDiv(b_.CreateMul(b_.CreateAdd(tid, c(1)), c(blocks)), c(s_.threads))};
    };
    const std::pair<Value*, Value*> cols = share(nb, !s_.split_rows);
    const std::pair<Value*, Value*> rows = share(row_blocks, s_.split_rows);
    Value* b0 = cols.first;
    Value* b1 = cols.second;
    Value* r0 = rows.first;
    Value* r1 = rows.second;
    Value* panel =
        addr(b_.CreateAdd(c(s_.scratch_offset), b_.CreateMul(tid, c(s_.scratch_bytes_per_thread))));
    loop(c(0), c(s_.batch), 1, [&](Value* image) {
      Value* bsrc = addr(b_.CreateAdd(c(s_.b_offset), b_.CreateMul(image, c(s_.b_batch_bytes))));
      Value* cdst = addr(b_.CreateAdd(c(s_.c_offset), b_.CreateMul(image, c(s_.c_batch_bytes))));
      // The residual lies like the output: the same image stride.
      Value* rdst = has_residual() ? addr(b_.CreateAdd(c(s_.epilogue.residual_offset),
                                                       b_.CreateMul(image, c(s_.c_batch_bytes))))
                                   : nullptr;
      Value* local_blocks = b_.CreateSub(b1, b0);
      // Packs (or gathers) global column block jb into panel block `slot`.
      auto pack = [&](Value* jb, Value* slot) {
        Value* dst = at(panel, b_.CreateMul(slot, c(s_.k * s_.nr)));
        if (s_.im2col)
          write_im2col_block(bsrc, dst, jb);
        else
          write_pack_block(bsrc, dst, jb);
      };
      auto tile = [&](Value* ib, Value* lb, Value* slot) {
        write_micro_tile(bsrc, cdst, rdst, panel, b_.CreateMul(ib, c(s_.mr)), b_.CreateAdd(b0, lb),
                         slot);
      };
      const bool claims = s_.steal && s_.threads > 1 && s_.batch == 1;
      if (s_.cols_outer) {
        // Pack one column block, then use it for every row block while it is hot in L1/L2:
        // one panel block of scratch per thread.
        auto column = [&](Value* lb) {
          if (s_.pack_b) pack(b_.CreateAdd(b0, lb), c(0));
          loop(r0, r1, 1, [&](Value* ib) { tile(ib, lb, c(0)); });
        };
        if (claims && !s_.split_rows)
          claimed_loop(tid, b0, b1, nb, [&](Value* jb) { column(b_.CreateSub(jb, b0)); });
        else
          loop(c(0), local_blocks, 1, column);
      } else {
        // Rows outer sweeps every column block per row strip: the whole panel first.
        if (s_.pack_b)
          loop(c(0), local_blocks, 1, [&](Value* lb) { pack(b_.CreateAdd(b0, lb), lb); });
        auto strip = [&](Value* ib) {
          loop(c(0), local_blocks, 1, [&](Value* lb) { tile(ib, lb, lb); });
        };
        if (claims && s_.split_rows)
          claimed_loop(tid, r0, r1, row_blocks, strip);
        else
          loop(r0, r1, 1, strip);
      }
    });
  }

  Value* c(int64_t v) { return b_.getInt32(static_cast<uint32_t>(v)); }
  /// acc + a·b: one f32x4.relaxed_madd with fma (a fused multiply-add where the engine has one:
  /// V8 on x86-64 with FMA3, on ARM64), else mul then add (an f32 or f32x4 pair, what SIMD128
  /// alone has; XNNPACK's wasmsimd kernels do the same).
  Value* madd(Value* a, Value* b, Value* acc) {
    if (s_.fma && a->getType() == v4_) {
      llvm::Function* fma =
          llvm::Intrinsic::getDeclaration(&module_, llvm::Intrinsic::wasm_fma, {v4_});
      return b_.CreateCall(fma, {a, b, acc});
    }
    return b_.CreateFAdd(acc, b_.CreateFMul(a, b));
  }
  Value* addr(Value* byte_offset) { return b_.CreateIntToPtr(byte_offset, ptr_); }
  Value* at(Value* base, Value* index) { return b_.CreateInBoundsGEP(f32_, base, index); }
  Value* load_f32(Value* base, Value* index) {
    return b_.CreateAlignedLoad(f32_, at(base, index), llvm::Align(4));
  }
  void store_f32(Value* v, Value* base, Value* index) {
    b_.CreateAlignedStore(v, at(base, index), llvm::Align(4));
  }
  int width() const { return s_.simd ? 4 : 1; }

  /// for (iv = start; iv < end; iv += step) body(iv): a top-tested loop, so empty ranges run
  /// nothing. `carried` values flow through phi nodes; body returns their next values.
  std::vector<Value*> loop_carried(
      Value* start, Value* end, int64_t step, const std::vector<Value*>& carried,
      const std::function<std::vector<Value*>(Value*, const std::vector<Value*>&)>& body) {
    BasicBlock* pre = b_.GetInsertBlock();
    BasicBlock* head = BasicBlock::Create(ctx_, "loop", fn_);
    BasicBlock* inner = BasicBlock::Create(ctx_, "body", fn_);
    BasicBlock* exit = BasicBlock::Create(ctx_, "exit", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* iv = b_.CreatePHI(i32_, 2);
    iv->addIncoming(start, pre);
    std::vector<llvm::PHINode*> phis;
    std::vector<Value*> current;
    for (Value* v : carried) {
      llvm::PHINode* phi = b_.CreatePHI(v->getType(), 2);
      phi->addIncoming(v, pre);
      phis.push_back(phi);
      current.push_back(phi);
    }
    b_.CreateCondBr(b_.CreateICmpSLT(iv, end), inner, exit);
    b_.SetInsertPoint(inner);
    std::vector<Value*> next = body(iv, current);
    Value* iv_next = b_.CreateAdd(iv, c(step), "", /*HasNUW=*/true, /*HasNSW=*/true);
    BasicBlock* latch = b_.GetInsertBlock();
    b_.CreateBr(head);
    iv->addIncoming(iv_next, latch);
    for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(next[i], latch);
    b_.SetInsertPoint(exit);
    return current;
  }
  void loop(Value* start, Value* end, int64_t step, const std::function<void(Value*)>& body) {
    loop_carried(start, end, step, {}, [&](Value* iv, const std::vector<Value*>&) {
      body(iv);
      return std::vector<Value*>{};
    });
  }
  /// body(u) for every unit u of [u0, u1) (this thread's share of `units`), then for units of
  /// the other threads' shares that they have not claimed yet. Thread t's word at
  /// kWasmClaimWordsAt + 4t holds its unclaimed range as front | back << 16: the owner sets it
  /// at the start and claims from the front, the others claim from the back, one
  /// compare-exchange per unit. Every execution ends with every word empty (front = back), so
  /// a word still holding a finished execution's state offers nothing. A unit taken from a word
  /// must be < units (a word that another kernel of the same memory left behind is never used
  /// to write out of range; a unit computed twice writes the same values).
  void claimed_loop(Value* tid, Value* u0, Value* u1, int64_t units,
                    const std::function<void(Value*)>& body) {
    if (units >= (1 << 16)) {  // a word holds two 16-bit unit numbers
      loop(u0, u1, 1, body);
      return;
    }
    Value* words = addr(c(kWasmClaimWordsAt));
    auto word_of = [&](Value* t) { return b_.CreateInBoundsGEP(i32_, words, t); };
    Value* mine = word_of(tid);
    auto* init =
        b_.CreateAlignedStore(b_.CreateOr(u0, b_.CreateShl(u1, c(16))), mine, llvm::Align(4));
    init->setAtomic(llvm::AtomicOrdering::SequentiallyConsistent);
    // Claims units from `word` until it is empty; from the front or the back.
    auto drain = [&](Value* word, bool front) {
      BasicBlock* head = BasicBlock::Create(ctx_, "claim", fn_);
      BasicBlock* take = BasicBlock::Create(ctx_, "take", fn_);
      BasicBlock* run = BasicBlock::Create(ctx_, "claimed", fn_);
      BasicBlock* exit = BasicBlock::Create(ctx_, "drained", fn_);
      b_.CreateBr(head);
      b_.SetInsertPoint(head);
      auto* w = b_.CreateAlignedLoad(i32_, word, llvm::Align(4));
      w->setAtomic(llvm::AtomicOrdering::SequentiallyConsistent);
      Value* f = b_.CreateAnd(w, c(0xffff));
      Value* bk = b_.CreateLShr(w, c(16));
      b_.CreateCondBr(b_.CreateICmpULT(f, bk), take, exit);
      b_.SetInsertPoint(take);
      Value* next = front ? b_.CreateAdd(w, c(1)) : b_.CreateSub(w, c(1 << 16));
      Value* unit = front ? f : b_.CreateSub(bk, c(1));
      auto* cas = b_.CreateAtomicCmpXchg(word, w, next, llvm::MaybeAlign(4),
                                         llvm::AtomicOrdering::SequentiallyConsistent,
                                         llvm::AtomicOrdering::SequentiallyConsistent);
      Value* won = b_.CreateExtractValue(cas, 1);
      b_.CreateCondBr(b_.CreateAnd(won, b_.CreateICmpULT(unit, c(units))), run, head);
      b_.SetInsertPoint(run);
      body(unit);
      b_.CreateBr(head);
      b_.SetInsertPoint(exit);
    };
    drain(mine, true);
    for (int k = 1; k < s_.threads; ++k)
      drain(word_of(b_.CreateURem(b_.CreateAdd(tid, c(k)), c(s_.threads))), false);
  }

  /// if (cond) then(); no else.
  void when(Value* cond, const std::function<void()>& then) {
    BasicBlock* yes = BasicBlock::Create(ctx_, "then", fn_);
    BasicBlock* done = BasicBlock::Create(ctx_, "endif", fn_);
    b_.CreateCondBr(cond, yes, done);
    b_.SetInsertPoint(yes);
    then();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  /// Depthwise conv2d: thread tid owns tasks [tid·nt/T, (tid+1)·nt/T) of nt = ceil(P/tile_c)
  /// tasks, task t the planes [t·tile_c, min((t+1)·tile_c, P)) of the P = N·C planes. The
  /// thread's scratch plane (padded_h × padded_w) is filled with the padding value once per
  /// run: the halo and the part past the last whole micro-tile are the same for every plane
  /// and no copy writes them. Per plane: copy X_p into the plane's interior, then micro-tiles
  /// of tile_h rows × tile_w columns of Y_p, each accumulating over R·S in locals and storing
  /// with the epilogue (rows past OH and columns past OW skipped).
  void write_depthwise(Value* tid) {
    const int64_t planes = s_.batch * s_.channels;
    const int64_t tasks = (planes + s_.tile_c - 1) / s_.tile_c;
    const int64_t rs = s_.kernel_h * s_.kernel_w;
    Value* t0 = b_.CreateUDiv(b_.CreateMul(tid, c(tasks)), c(s_.threads));
    Value* t1 = b_.CreateUDiv(b_.CreateMul(b_.CreateAdd(tid, c(1)), c(tasks)), c(s_.threads));
    Value* padded =
        addr(b_.CreateAdd(c(s_.scratch_offset), b_.CreateMul(tid, c(s_.scratch_bytes_per_thread))));
    Value* x = addr(c(s_.b_offset));
    const bool vec = s_.simd;
    llvm::Type* acc_type = vec ? static_cast<llvm::Type*>(v4_) : f32_;
    const int nv = s_.tile_w / width();
    fill_padded_plane(padded);
    auto each_task = [&](Value* t_begin, Value* t_end, const std::function<void(Value*)>& body) {
      if (s_.steal && s_.threads > 1)
        claimed_loop(tid, t_begin, t_end, tasks, body);
      else
        loop(t_begin, t_end, 1, body);
    };
    each_task(t0, t1, [&](Value* task) {
      Value* p_begin = b_.CreateMul(task, c(s_.tile_c));
      Value* p_end = b_.CreateAdd(p_begin, c(s_.tile_c));
      if (planes % s_.tile_c != 0)  // the last task's tail
        p_end = b_.CreateSelect(b_.CreateICmpSLT(p_end, c(planes)), p_end, c(planes));
      loop(p_begin, p_end, 1, [&](Value* p) {
        Value* ch = b_.CreateURem(p, c(s_.channels));
        Value* xplane = b_.CreateMul(p, c(s_.height * s_.width));
        write_padded_plane(x, xplane, padded);
        Value* wbase = b_.CreateMul(ch, c(rs));
        auto weight = [&](Value* r, Value* q) -> Value* {
          if (s_.max_pool) return nullptr;  // a max pool has no weight
          Value* index = b_.CreateAdd(wbase, b_.CreateAdd(b_.CreateMul(r, c(s_.kernel_w)), q));
          return splat_if(load_f32(addr(c(s_.a_offset)), index), vec);
        };
        // Fully unrolled R·S: the plane's R·S weights are loaded once, into locals.
        std::vector<Value*> weights;
        if (s_.unroll_rs)
          for (int64_t r = 0; r < s_.kernel_h; ++r)
            for (int64_t q = 0; q < s_.kernel_w; ++q) weights.push_back(weight(c(r), c(q)));
        Value* bias =
            s_.epilogue.bias ? splat_if(load_at(f32_, s_.epilogue.bias_offset, ch), vec) : nullptr;
        Value* yplane = b_.CreateMul(p, c(s_.out_h * s_.out_w));
        const int64_t tiles_h = (s_.out_h + s_.tile_h - 1) / s_.tile_h;
        const int64_t tiles_w = (s_.out_w + s_.tile_w - 1) / s_.tile_w;
        loop(c(0), c(tiles_h), 1, [&](Value* th) {
          loop(c(0), c(tiles_w), 1, [&](Value* tw) {
            write_depthwise_tile(padded, yplane, b_.CreateMul(th, c(s_.tile_h)),
                                 b_.CreateMul(tw, c(s_.tile_w)), weights, weight, bias, acc_type,
                                 nv);
          });
        });
      });
    });
  }

  /// The padding value: 0 for a convolution, −∞ for a max pool (no padded element can be the
  /// max of a window that holds an input element, which every window does: pad < kernel).
  Value* padding_value() { return llvm::ConstantFP::get(f32_, s_.max_pool ? -INFINITY : 0.0); }

  /// Fills the whole scratch plane with the padding value (v128 stores with simd). The kernel
  /// carries "no-builtins", so this loop stays a loop and never becomes a call to memset, which
  /// a module without libc cannot link.
  void fill_padded_plane(Value* padded) {
    const int64_t n = s_.padded_h * s_.padded_w;
    int64_t v_end = 0;
    if (s_.simd) {
      v_end = n / 4 * 4;
      Value* v = b_.CreateVectorSplat(4, padding_value());
      loop(c(0), c(v_end), 4,
           [&](Value* i) { b_.CreateAlignedStore(v, at(padded, i), llvm::Align(4)); });
    }
    if (v_end < n)
      loop(c(v_end), c(n), 1, [&](Value* i) { store_f32(padding_value(), padded, i); });
  }

  /// The padded copy: padded[y][x] = X_p[y − pad][x − pad] for the x, y inside X_p, each padded
  /// row stored as `stride` phase rows (phase φ, element k: padded column k·stride + φ); every
  /// other element keeps the padding of fill_padded_plane. Per input row and phase, the
  /// elements [k_lo, k_hi) of that phase that hold input columns are copied: stride 1 by v128
  /// loads and stores; stride 2 with simd by two v128 loads of 8 consecutive floats and one
  /// shuffle keeping the lanes of the phase (the deinterleave of XNNPACK's stride-2 wasmsimd
  /// kernels); both in chunks of 4 elements, the last chunk ending at k_hi and overlapping the
  /// one before instead of a scalar tail (a small plane's rows are a few chunks long). Other
  /// strides, scalar kernels and runs shorter than 4 copy element by element.
  void write_padded_plane(Value* x, Value* xplane, Value* padded) {
    const int64_t st = s_.stride;
    const int64_t pw = s_.padded_w, phase_w = pw / st, pad = std::min(s_.pad, pw);
    // A row copies at most the columns the tiles read: with stride > 1 the padded width can
    // end before the input row does; likewise the rows.
    const int64_t w = std::min(s_.width, pw - pad);
    const int64_t rows = std::min(s_.height, s_.padded_h - pad);
    if (w <= 0 || rows <= 0) return;
    loop(c(0), c(rows), 1, [&](Value* iy) {
      Value* src = at(x, b_.CreateAdd(xplane, b_.CreateMul(iy, c(s_.width))));
      Value* dst_row = at(padded, b_.CreateMul(b_.CreateAdd(iy, c(pad)), c(pw)));
      for (int64_t phase = 0; phase < st; ++phase) {
        Value* dst = at(dst_row, c(phase * phase_w));
        // Element k holds input column k·st + phase − pad: the copied k are [k_lo, k_hi).
        const int64_t k_lo = std::min(phase_w, (pad - phase + st - 1) / st);
        const int64_t k_hi = std::max(
            k_lo, std::min(phase_w, pad + w - phase <= 0 ? 0 : (pad + w - 1 - phase) / st + 1));
        auto src_col = [&](Value* k) {
          return b_.CreateSub(b_.CreateMul(k, c(st)), c(pad - phase));
        };
        if (s_.simd && (st == 1 || st == 2) && k_hi - k_lo >= 4) {
          auto chunk = [&](Value* k) {
            Value* from = at(src, src_col(k));
            Value* v = b_.CreateAlignedLoad(v4_, from, llvm::Align(4));
            if (st == 2) {
              // The 8th float may lie one past the row: the next row's first, or the tensor's
              // slack after the last row of the last plane.
              Value* hi = b_.CreateAlignedLoad(v4_, at(from, c(4)), llvm::Align(4));
              v = b_.CreateShuffleVector(v, hi, llvm::ArrayRef<int>{0, 2, 4, 6});
            }
            b_.CreateAlignedStore(v, at(dst, k), llvm::Align(4));
          };
          const int64_t whole = k_lo + (k_hi - k_lo) / 4 * 4;
          loop(c(k_lo), c(whole), 4, chunk);
          if (whole < k_hi) chunk(c(k_hi - 4));
        } else {
          loop(c(k_lo), c(k_hi), 1,
               [&](Value* k) { store_f32(load_f32(src, src_col(k)), dst, k); });
        }
      }
    });
  }

  /// One tile_h × tile_w micro-tile of Y_p at (oh0, ow0). With simd each row holds tile_w/4
  /// f32x4 accumulators over 4 adjacent ow. The inputs of tap (r, q) for 4 adjacent outputs are
  /// contiguous in the padded plane's phase q mod stride, from element ow + q div stride
  /// (write_padded_plane's polyphase layout): one unaligned v128 load at any stride. The weight
  /// is splat.
  void write_depthwise_tile(Value* padded, Value* yplane, Value* oh0, Value* ow0,
                            const std::vector<Value*>& weights,
                            const std::function<Value*(Value*, Value*)>& weight, Value* bias,
                            llvm::Type* acc_type, int nv) {
    const int w = width();
    const int64_t st = s_.stride, phase_w = s_.padded_w / st;
    auto step = [&](Value* r, Value* q, Value* wv, std::vector<Value*>& acc) {
      // Tap q reads phase q mod st at element offset q div st (both constant when unrolled).
      Value* phase_col =
          b_.CreateAdd(b_.CreateMul(b_.CreateURem(q, c(st)), c(phase_w)), b_.CreateUDiv(q, c(st)));
      for (int i = 0; i < s_.tile_h; ++i) {
        Value* row = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(oh0, c(i)), c(st)), r);
        Value* rowbase = b_.CreateAdd(b_.CreateMul(row, c(s_.padded_w)), phase_col);
        for (int j = 0; j < nv; ++j) {
          Value* index = b_.CreateAdd(rowbase, b_.CreateAdd(ow0, c(j * w)));
          Value* in = b_.CreateAlignedLoad(acc_type, at(padded, index), llvm::Align(4));
          Value*& slot = acc[static_cast<size_t>(i * nv + j)];
          slot = s_.max_pool ? b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, slot, in)
                             : madd(in, wv, slot);
        }
      }
    };
    Value* init = s_.max_pool ? static_cast<Value*>(llvm::ConstantFP::get(acc_type, -INFINITY))
                              : llvm::Constant::getNullValue(acc_type);
    std::vector<Value*> acc(static_cast<size_t>(s_.tile_h * nv), init);
    if (s_.unroll_rs) {
      for (int64_t r = 0; r < s_.kernel_h; ++r)
        for (int64_t q = 0; q < s_.kernel_w; ++q)
          step(c(r), c(q), weights[static_cast<size_t>(r * s_.kernel_w + q)], acc);
    } else {
      acc = loop_carried(c(0), c(s_.kernel_h), 1, acc, [&](Value* r, std::vector<Value*> acc) {
        return loop_carried(c(0), c(s_.kernel_w), 1, acc, [&](Value* q, std::vector<Value*> acc) {
          step(r, q, weight(r, q), acc);
          return acc;
        });
      });
    }
    Value* y = addr(c(s_.c_offset));
    for (int i = 0; i < s_.tile_h; ++i) {
      Value* oh = b_.CreateAdd(oh0, c(i));
      auto store_row = [&, i]() {
        Value* yrow = b_.CreateAdd(yplane, b_.CreateMul(oh, c(s_.out_w)));
        for (int j = 0; j < nv; ++j) {
          Value* ow = b_.CreateAdd(ow0, c(j * w));
          Value* index = b_.CreateAdd(yrow, ow);
          Value* v = acc[static_cast<size_t>(i * nv + j)];
          if (!s_.epilogue.empty()) {
            // Lanes past OW read at most tile_w − 1 floats past a residual row (slack).
            Value* res =
                has_residual() ? load_at(acc_type, s_.epilogue.residual_offset, index) : nullptr;
            v = epilogue(v, bias, res);
          }
          store_guarded(v, y, index, ow, s_.out_w, s_.out_w % s_.tile_w != 0);
        }
      };
      if (s_.out_h % s_.tile_h != 0)
        when(b_.CreateICmpSLT(oh, c(s_.out_h)), store_row);
      else
        store_row();
    }
  }

  /// Stores `v` (f32 or f32x4) at float `index` of `base`, where `col` is the column of its
  /// first lane and `limit` the row length: with `guard`, a scalar past the row is skipped and
  /// a vector straddling it is stored lane by lane (the scalar tail).
  void store_guarded(Value* v, Value* base, Value* index, Value* col, int64_t limit, bool guard) {
    auto full = [&]() { b_.CreateAlignedStore(v, at(base, index), llvm::Align(4)); };
    if (!guard) {
      full();
      return;
    }
    if (!v->getType()->isVectorTy()) {
      when(b_.CreateICmpSLT(col, c(limit)), full);
      return;
    }
    BasicBlock* whole = BasicBlock::Create(ctx_, "whole", fn_);
    BasicBlock* part = BasicBlock::Create(ctx_, "part", fn_);
    BasicBlock* done = BasicBlock::Create(ctx_, "stored", fn_);
    b_.CreateCondBr(b_.CreateICmpSLE(b_.CreateAdd(col, c(4)), c(limit)), whole, part);
    b_.SetInsertPoint(whole);
    full();
    b_.CreateBr(done);
    b_.SetInsertPoint(part);
    for (int l = 0; l < 4; ++l) {
      when(b_.CreateICmpSLT(b_.CreateAdd(col, c(l)), c(limit)), [&]() {
        store_f32(b_.CreateExtractElement(v, static_cast<uint64_t>(l)), base,
                  b_.CreateAdd(index, c(l)));
      });
    }
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  /// The epilogue (epilogue.hpp) on `v` (f32 or f32x4), with bias `bias` and residual `res` of
  /// the same type (null where the epilogue has none). relu = pmax(v, 0), clip =
  /// pmin(pmax(v, lo), hi), hard-swish = v · pmin(pmax(v + 3, 0), 6) · (1/6).
  Value* epilogue(Value* v, Value* bias, Value* res) {
    const WasmEpilogueSpec& e = s_.epilogue;
    llvm::Type* t = v->getType();
    auto k = [&](float x) { return llvm::ConstantFP::get(t, static_cast<double>(x)); };
    // The activations clamp with wasm's pseudo-min/max, pmax(a, b) = a < b ? b : a and
    // pmin(a, b) = b < a ? b : a, always with v first: a NaN in v stays NaN (the compare is
    // false) and −0 stays −0, as std::max/std::min in the CPU reference. f32x4.max/min would
    // also propagate NaN but order −0 below +0, and V8 lowers each to about eight x86
    // instructions for those corner cases; f32x4.pmax/pmin are one maxps/minps, as in
    // XNNPACK's "x86" wasmsimd kernels. An epilogue's clamp otherwise costs as much as the
    // whole reduction of a small-K pointwise layer. Scalars use the same compare and select.
    auto max = [&](Value* a, Value* b) -> Value* {
      if (t->isVectorTy()) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::wasm_pmax, a, b);
      return b_.CreateSelect(b_.CreateFCmpOLT(a, b), b, a);
    };
    auto min = [&](Value* a, Value* b) -> Value* {
      if (t->isVectorTy()) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::wasm_pmin, a, b);
      return b_.CreateSelect(b_.CreateFCmpOLT(b, a), b, a);
    };
    if (e.bias) v = b_.CreateFAdd(v, bias);
    if (e.residual == WasmEpilogueSpec::kBeforeActivation) v = b_.CreateFAdd(v, res);
    switch (e.activation) {
      case WasmEpilogueSpec::kRelu:
        v = max(v, k(0.0f));
        break;
      case WasmEpilogueSpec::kClip:
        v = min(max(v, k(e.clip_min)), k(e.clip_max));
        break;
      case WasmEpilogueSpec::kHardSwish:
        v = b_.CreateFMul(b_.CreateFMul(v, min(max(b_.CreateFAdd(v, k(3.0f)), k(0.0f)), k(6.0f))),
                          k(1.0f / 6.0f));
        break;
      case WasmEpilogueSpec::kSilu:
        // v / (1 + e^−v). −v is clamped to [−87, 88] so that exp stays a normal float; beyond,
        // the quotient's value is the same in float32 (v · 1e−38 or v itself).
        v = b_.CreateFDiv(
            v, b_.CreateFAdd(k(1.0f), exp(min(max(b_.CreateFNeg(v), k(-87.0f)), k(88.0f)))));
        break;
      case WasmEpilogueSpec::kSigmoid:
        // 1 / (1 + e^−v), −v clamped as for silu: 1 / (1 + e^88) is 6e−39, float32's 0 + ε.
        v = b_.CreateFDiv(
            k(1.0f), b_.CreateFAdd(k(1.0f), exp(min(max(b_.CreateFNeg(v), k(-87.0f)), k(88.0f)))));
        break;
      case WasmEpilogueSpec::kHardSigmoid:
        v = b_.CreateFMul(min(max(b_.CreateFAdd(v, k(3.0f)), k(0.0f)), k(6.0f)), k(1.0f / 6.0f));
        break;
      default:
        break;
    }
    if (e.residual == WasmEpilogueSpec::kAfterActivation) v = b_.CreateFAdd(v, res);
    return v;
  }
  /// e^x for x (f32 or f32x4) in [−87, 88]: wasm has no exp instruction and the module links
  /// no libm. Cephes' expf (S. L. Moshier, Cephes Math Library, expf.c): x = n·ln 2 + r with
  /// n = floor(x·log₂e + ½) and r in [−ln 2 / 2, ln 2 / 2] (ln 2 split in two for an exact
  /// reduction), e^r by its degree-7 polynomial, then 2^n put into the exponent bits;
  /// relative error about 1e−7. n converts with saturation (trunc_sat): a NaN x gives n = 0
  /// and a NaN result, where a plain i32.trunc_f32_s would trap.
  Value* exp(Value* x) {
    llvm::Type* t = x->getType();
    auto k = [&](double value) { return llvm::ConstantFP::get(t, value); };
    llvm::Type* it = t->isVectorTy()
                         ? static_cast<llvm::Type*>(llvm::FixedVectorType::get(b_.getInt32Ty(), 4))
                         : b_.getInt32Ty();
    Value* n = b_.CreateUnaryIntrinsic(
        llvm::Intrinsic::floor, b_.CreateFAdd(b_.CreateFMul(x, k(1.44269504088896341)), k(0.5)));
    Value* r = b_.CreateFSub(x, b_.CreateFMul(n, k(0.693359375)));
    r = b_.CreateFSub(r, b_.CreateFMul(n, k(-2.12194440e-4)));
    Value* p = k(1.9875691500e-4);
    for (double c :
         {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
      p = b_.CreateFAdd(b_.CreateFMul(p, r), k(c));
    p = b_.CreateFAdd(b_.CreateFAdd(b_.CreateFMul(b_.CreateFMul(p, r), r), r), k(1.0));
    Value* bits =
        b_.CreateShl(b_.CreateAdd(b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {it, t}, {n}),
                                  llvm::ConstantInt::get(it, 127)),
                     llvm::ConstantInt::get(it, 23));
    return b_.CreateFMul(p, b_.CreateBitCast(bits, t));
  }
  bool has_residual() const { return s_.epilogue.residual != WasmEpilogueSpec::kNoResidual; }
  /// Loads `type` (f32 or f32x4) at float `index` of the tensor at byte `offset`.
  Value* load_at(llvm::Type* type, int64_t offset, Value* index) {
    return b_.CreateAlignedLoad(type, at(addr(c(offset)), index), llvm::Align(4));
  }
  Value* splat_if(Value* v, bool vector) { return vector ? b_.CreateVectorSplat(4, v) : v; }

  /// dst[kk·NR + j] = B[kk·N + jb·NR + j], 0 past column N.
  void write_pack_block(Value* bsrc, Value* dst, Value* jb) {
    Value* col0 = b_.CreateMul(jb, c(s_.nr));
    loop(c(0), c(s_.k), 1, [&](Value* kk) {
      Value* src = b_.CreateAdd(b_.CreateMul(kk, c(s_.n)), col0);
      Value* row = b_.CreateMul(kk, c(s_.nr));
      for (int j = 0; j < s_.nr; ++j) {
        Value* v = load_f32(bsrc, b_.CreateAdd(src, c(j)));
        if (s_.n % s_.nr != 0) {
          // Past column N the load reads the next row (or the slack): replace it by 0.
          Value* inside = b_.CreateICmpSLT(b_.CreateAdd(col0, c(j)), c(s_.n));
          v = b_.CreateSelect(inside, v, llvm::ConstantFP::get(f32_, 0.0));
        }
        store_f32(v, dst, b_.CreateAdd(row, c(j)));
      }
    });
  }

  /// The im2col panel block of column block jb: dst[((ch·R + r)·S + q)·NR + j] =
  /// X_b[ch][oh·stride − pad + r][ow·stride − pad + q] for output pixel p = jb·NR + j =
  /// oh·OW + ow, 0 in the padding and past pixel N.
  ///
  /// With simd, NR a multiple of 4 and stride 1 or 2, the block goes in groups of 4 pixels. A
  /// group of 4 pixels of one output row whose columns all lie inside X_b (the interior: every
  /// group of a row but those touching its left or right padding) gathers each (ch, r, q) with
  /// v128 loads: stride 1 one unaligned load, stride 2 two loads of 8 consecutive floats and
  /// one shuffle keeping the even lanes (the second may read one float past the row: the next
  /// row's first, or the tensor's slack); a row in the vertical padding stores zeros. Other
  /// groups, and every pixel without simd, gather element by element with bounds selects:
  /// about ten scalar operations per element, which cost more than the GEMM itself where M is
  /// small (MobileNet's stem: M = 32, K = 27).
  void write_im2col_block(Value* x, Value* dst, Value* jb) {
    Value* p0 = b_.CreateMul(jb, c(s_.nr));
    auto gather_pixel = [&](Value* j) {
      Value* p = b_.CreateAdd(p0, j);
      Value* valid = b_.CreateICmpSLT(p, c(s_.n));
      Value* pc = b_.CreateSelect(valid, p, c(s_.n - 1));
      Value* oh = b_.CreateUDiv(pc, c(s_.out_w));
      Value* ow = b_.CreateURem(pc, c(s_.out_w));
      Value* h0 = b_.CreateSub(b_.CreateMul(oh, c(s_.stride)), c(s_.pad));
      Value* w0 = b_.CreateSub(b_.CreateMul(ow, c(s_.stride)), c(s_.pad));
      loop(c(0), c(s_.channels), 1, [&](Value* ch) {
        Value* plane = b_.CreateMul(ch, c(s_.height * s_.width));
        Value* row_base = b_.CreateMul(ch, c(s_.kernel_h * s_.kernel_w));
        for (int64_t r = 0; r < s_.kernel_h; ++r) {
          Value* ih = b_.CreateAdd(h0, c(r));
          // Unsigned compare: negative ih wraps to a huge value and fails too.
          Value* row_ok = b_.CreateAnd(valid, b_.CreateICmpULT(ih, c(s_.height)));
          for (int64_t q = 0; q < s_.kernel_w; ++q) {
            Value* iw = b_.CreateAdd(w0, c(q));
            Value* ok = b_.CreateAnd(row_ok, b_.CreateICmpULT(iw, c(s_.width)));
            Value* src = b_.CreateAdd(plane, b_.CreateAdd(b_.CreateMul(ih, c(s_.width)), iw));
            Value* v = load_f32(x, b_.CreateSelect(ok, src, c(0)));
            v = b_.CreateSelect(ok, v, llvm::ConstantFP::get(f32_, 0.0));
            Value* kk = b_.CreateAdd(row_base, c(r * s_.kernel_w + q));
            store_f32(v, dst, b_.CreateAdd(j, b_.CreateMul(kk, c(s_.nr))));
          }
        }
      });
    };
    if (!s_.simd || s_.nr % 4 != 0 || (s_.stride != 1 && s_.stride != 2)) {
      loop(c(0), c(s_.nr), 1, gather_pixel);
      return;
    }
    loop(c(0), c(s_.nr), 4, [&](Value* j0) {
      Value* p = b_.CreateAdd(p0, j0);
      // The group's first pixel; its oh, ow are meaningful only where the group is inside.
      Value* oh = b_.CreateUDiv(p, c(s_.out_w));
      Value* ow = b_.CreateURem(p, c(s_.out_w));
      Value* h0 = b_.CreateSub(b_.CreateMul(oh, c(s_.stride)), c(s_.pad));
      Value* w0 = b_.CreateSub(b_.CreateMul(ow, c(s_.stride)), c(s_.pad));
      // Inside: all 4 pixels exist, lie in one output row, and their input columns
      // w0 .. w0 + 3·stride + S − 1 lie in [0, W) (signed: w0 may be negative).
      Value* inside = b_.CreateAnd(
          b_.CreateAnd(b_.CreateICmpSLE(b_.CreateAdd(p, c(3)), c(s_.n - 1)),
                       b_.CreateICmpSLT(b_.CreateAdd(ow, c(3)), c(s_.out_w))),
          b_.CreateAnd(
              b_.CreateICmpSGE(w0, c(0)),
              b_.CreateICmpSLT(b_.CreateAdd(w0, c(3 * s_.stride + s_.kernel_w - 1)), c(s_.width))));
      BasicBlock* vector = BasicBlock::Create(ctx_, "im2col_v128", fn_);
      BasicBlock* scalar = BasicBlock::Create(ctx_, "im2col_scalar", fn_);
      BasicBlock* done = BasicBlock::Create(ctx_, "im2col_done", fn_);
      b_.CreateCondBr(inside, vector, scalar);
      b_.SetInsertPoint(vector);
      Value* zero4 = llvm::Constant::getNullValue(v4_);
      loop(c(0), c(s_.channels), 1, [&](Value* ch) {
        Value* plane = b_.CreateMul(ch, c(s_.height * s_.width));
        Value* row_base = b_.CreateMul(ch, c(s_.kernel_h * s_.kernel_w));
        for (int64_t r = 0; r < s_.kernel_h; ++r) {
          Value* ih = b_.CreateAdd(h0, c(r));
          Value* row_ok = b_.CreateICmpULT(ih, c(s_.height));
          // A row in the padding reads row 0 (any in-bounds address) and stores zeros.
          Value* row =
              b_.CreateAdd(plane, b_.CreateMul(b_.CreateSelect(row_ok, ih, c(0)), c(s_.width)));
          for (int64_t q = 0; q < s_.kernel_w; ++q) {
            Value* from = at(x, b_.CreateAdd(row, b_.CreateAdd(w0, c(q))));
            Value* v = b_.CreateAlignedLoad(v4_, from, llvm::Align(4));
            if (s_.stride == 2) {
              Value* hi = b_.CreateAlignedLoad(v4_, at(from, c(4)), llvm::Align(4));
              v = b_.CreateShuffleVector(v, hi, llvm::ArrayRef<int>{0, 2, 4, 6});
            }
            v = b_.CreateSelect(row_ok, v, zero4);
            Value* kk = b_.CreateAdd(row_base, c(r * s_.kernel_w + q));
            b_.CreateAlignedStore(v, at(dst, b_.CreateAdd(j0, b_.CreateMul(kk, c(s_.nr)))),
                                  llvm::Align(4));
          }
        }
      });
      b_.CreateBr(done);
      b_.SetInsertPoint(scalar);
      loop(j0, b_.CreateAdd(j0, c(4)), 1, gather_pixel);
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    });
  }

  /// One MR × NR tile of C_b at rows i0.., global column block jb, read from panel block
  /// `slot` (with pack_b) or from B_b itself.
  void write_micro_tile(Value* bsrc, Value* cdst, Value* rdst, Value* panel, Value* i0, Value* jb,
                        Value* slot) {
    const int w = width();
    const int nv = s_.nr / w;
    Value* a = addr(c(s_.a_offset));
    std::vector<Value*> a_row;  // float index of A[min(i0+i, M−1)][0]
    for (int i = 0; i < s_.mr; ++i) {
      Value* row = b_.CreateAdd(i0, c(i));
      if (s_.m % s_.mr != 0)
        row = b_.CreateSelect(b_.CreateICmpSLT(row, c(s_.m)), row, c(s_.m - 1));
      a_row.push_back(b_.CreateMul(row, c(s_.k)));
    }
    Value* col0 = b_.CreateMul(jb, c(s_.nr));
    Value* bbase;
    int64_t ldb;
    if (s_.pack_b) {
      bbase = at(panel, b_.CreateMul(slot, c(s_.k * s_.nr)));
      ldb = s_.nr;
    } else {
      bbase = at(bsrc, col0);
      ldb = s_.n;
    }
    llvm::Type* acc_type = s_.simd ? static_cast<llvm::Type*>(v4_) : f32_;
    Value* zero = llvm::Constant::getNullValue(acc_type);
    std::vector<Value*> init(static_cast<size_t>(s_.mr * nv), zero);
    // One reduction step kk: acc[i][j] += A[i][kk] · B[kk][j].
    auto step = [&](Value* kk, std::vector<Value*>& acc) {
      std::vector<Value*> bv;
      Value* brow = b_.CreateMul(kk, c(ldb));
      for (int j = 0; j < nv; ++j) {
        Value* p = at(bbase, b_.CreateAdd(brow, c(j * w)));
        bv.push_back(b_.CreateAlignedLoad(acc_type, p, llvm::Align(4)));
      }
      for (int i = 0; i < s_.mr; ++i) {
        Value* av = load_f32(a, b_.CreateAdd(a_row[i], kk));
        if (s_.simd) av = b_.CreateVectorSplat(4, av);
        for (int j = 0; j < nv; ++j) {
          Value*& slot = acc[static_cast<size_t>(i * nv + j)];
          slot = madd(av, bv[j], slot);
        }
      }
    };
    // The unrolled body over the largest multiple of unroll_k, then (only when unroll_k does
    // not divide K) a one-step tail loop over the K mod unroll_k remaining steps.
    const int64_t k_main = s_.k / s_.unroll_k * s_.unroll_k;
    std::vector<Value*> acc =
        loop_carried(c(0), c(k_main), s_.unroll_k, init, [&](Value* k0, std::vector<Value*> acc) {
          for (int u = 0; u < s_.unroll_k; ++u) step(b_.CreateAdd(k0, c(u)), acc);
          return acc;
        });
    if (k_main != s_.k) {
      acc = loop_carried(c(k_main), c(s_.k), 1, acc, [&](Value* kk, std::vector<Value*> acc) {
        step(kk, acc);
        return acc;
      });
    }
    // Stores: guards only where the shapes need them.
    for (int i = 0; i < s_.mr; ++i) {
      auto store_row = [&, i]() {
        Value* crow = b_.CreateMul(b_.CreateAdd(i0, c(i)), c(s_.n));
        Value* row_bias = nullptr;  // conv2d: one bias per row of C_b (output channel)
        if (s_.epilogue.bias && s_.bias_per_row)
          row_bias =
              splat_if(load_at(f32_, s_.epilogue.bias_offset, b_.CreateAdd(i0, c(i))), s_.simd);
        for (int j = 0; j < nv; ++j) {
          Value* v = acc[static_cast<size_t>(i * nv + j)];
          Value* col = b_.CreateAdd(col0, c(j * w));
          Value* index = b_.CreateAdd(crow, col);
          if (!s_.epilogue.empty()) {
            // Lanes past column N read up to NR − 1 floats past a row of bias or residual
            // (inside the slack after each tensor) and are never stored.
            Value* bias = row_bias;
            if (s_.epilogue.bias && !s_.bias_per_row)
              bias = load_at(acc_type, s_.epilogue.bias_offset, col);
            Value* res = nullptr;
            if (has_residual())
              res = b_.CreateAlignedLoad(acc_type, at(rdst, index), llvm::Align(4));
            v = epilogue(v, bias, res);
          }
          auto full = [&]() { b_.CreateAlignedStore(v, at(cdst, index), llvm::Align(4)); };
          if (s_.n % s_.nr == 0) {
            full();
            continue;
          }
          if (w == 1) {
            when(b_.CreateICmpSLT(col, c(s_.n)), full);
            continue;
          }
          // A vector straddling column N: the lanes inside, one by one.
          BasicBlock* whole = BasicBlock::Create(ctx_, "whole", fn_);
          BasicBlock* part = BasicBlock::Create(ctx_, "part", fn_);
          BasicBlock* done = BasicBlock::Create(ctx_, "stored", fn_);
          b_.CreateCondBr(b_.CreateICmpSLE(b_.CreateAdd(col, c(4)), c(s_.n)), whole, part);
          b_.SetInsertPoint(whole);
          full();
          b_.CreateBr(done);
          b_.SetInsertPoint(part);
          for (int l = 0; l < 4; ++l) {
            when(b_.CreateICmpSLT(b_.CreateAdd(col, c(l)), c(s_.n)), [&]() {
              store_f32(b_.CreateExtractElement(v, static_cast<uint64_t>(l)), cdst,
                        b_.CreateAdd(index, c(l)));
            });
          }
          b_.CreateBr(done);
          b_.SetInsertPoint(done);
        }
      };
      if (s_.m % s_.mr != 0)
        when(b_.CreateICmpSLT(b_.CreateAdd(i0, c(i)), c(s_.m)), store_row);
      else
        store_row();
    }
  }

  const WasmKernelSpec& s_;
  llvm::Module& module_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Type* i32_ = nullptr;
  llvm::Type* f32_ = nullptr;
  llvm::Type* v4_ = nullptr;
  llvm::PointerType* ptr_ = nullptr;
  llvm::Function* fn_ = nullptr;
};

void init_llvm_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeWebAssemblyTargetInfo();
    LLVMInitializeWebAssemblyTarget();
    LLVMInitializeWebAssemblyTargetMC();
    LLVMInitializeWebAssemblyAsmPrinter();
  });
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// IR → optimized IR → wasm32 object bytes; false with `error` set on failure.
bool compile_object(const WasmKernelSpec& spec, std::string* object, std::string* error) {
  init_llvm_once();
  const std::string triple = "wasm32-unknown-unknown";
  std::string lookup_error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, lookup_error);
  if (target == nullptr) {
    *error = "LLVM has no wasm32 target: " + lookup_error;
    return false;
  }
  std::string features = spec.simd ? "+simd128" : "";
  if (spec.simd && spec.fma) features += ",+relaxed-simd";
  if (spec.shared_memory || spec.threads > 1)
    features += std::string(features.empty() ? "" : ",") + "+atomics,+bulk-memory";
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(
      target->createTargetMachine(triple, "generic", features, options, llvm::Reloc::Static,
                                  llvm::None, llvm::CodeGenOpt::Aggressive));
  if (!machine) {
    *error = "LLVM could not create a wasm32 target machine";
    return false;
  }

  llvm::LLVMContext ctx;
  llvm::Module module("webtune_kernel", ctx);
  module.setTargetTriple(triple);
  module.setDataLayout(machine->createDataLayout());
  KernelWriter(spec, module).write();
  std::string verify;
  llvm::raw_string_ostream verify_os(verify);
  if (llvm::verifyModule(module, &verify_os)) {
    *error = "invalid kernel IR: " + verify_os.str();
    return false;
  }

  // The new pass manager's O3 pipeline, with the target's cost model (PassBuilder docs).
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(machine.get());
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);

  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr, llvm::CGFT_ObjectFile)) {
    *error = "the wasm32 target cannot emit object files";
    return false;
  }
  codegen.run(module);
  object->assign(buffer.data(), buffer.size());
  return true;
}

/// A file that removes itself.
struct TempFile {
  llvm::SmallString<128> path;
  ~TempFile() {
    if (!path.empty()) llvm::sys::fs::remove(path);
  }
};

void reset_lld_wasm_symbols() {
  void** const symbols[] = {
      &lld_wasm_sym_globalBase,
      &lld_wasm_sym_initMemory,
      &lld_wasm_sym_memoryBase,
      &lld_wasm_sym_tableBase32,
      &lld_wasm_sym_stackPointer,
      &lld_wasm_sym_startFunction,
      &lld_wasm_sym_initMemoryFlag,
      &lld_wasm_sym_applyDataRelocs,
      &lld_wasm_sym_definedTableBase,
      &lld_wasm_sym_applyGlobalRelocs,
      &lld_wasm_sym_definedMemoryBase,
      &lld_wasm_sym_definedTableBase32,
      &lld_wasm_sym_applyGlobalTLSRelocs,
      &lld_wasm_sym_indirectFunctionTable,
      &lld_wasm_sym_dataEnd,
      &lld_wasm_sym_initTLS,
      &lld_wasm_sym_tlsBase,
      &lld_wasm_sym_tlsSize,
      &lld_wasm_sym_heapBase,
      &lld_wasm_sym_tlsAlign,
      &lld_wasm_sym_callCtors,
      &lld_wasm_sym_callDtors,
      &lld_wasm_sym_dsoHandle,
      &lld_wasm_sym_tableBase,
  };
  for (void** symbol : symbols) *symbol = nullptr;
}

std::mutex& lld_mutex() {
  static std::mutex mutex;
  return mutex;
}

/// Links one object into the module the ABI asks for; false with `error` set on failure.
bool link_module(const WasmKernelSpec& spec, const std::string& object, std::string* module,
                 std::string* error) {
  TempFile in, out;
  if (llvm::sys::fs::createTemporaryFile("webtune-kernel", "o", in.path) ||
      llvm::sys::fs::createTemporaryFile("webtune-kernel", "wasm", out.path)) {
    *error = "cannot create temporary files for wasm-ld";
    return false;
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream file(in.path, ec);
    if (ec) {
      *error = "cannot write " + std::string(in.path) + ": " + ec.message();
      return false;
    }
    file << object;
  }
  const std::string memory = std::to_string(spec.memory_pages * 65536);
  const std::string initial = "--initial-memory=" + memory;
  const std::string maximum = "--max-memory=" + memory;
  std::vector<const char*> args = {"wasm-ld", in.path.c_str(), "-o", out.path.c_str(), "--no-entry",
                                   "--export=run", "--import-memory", initial.c_str(),
                                   maximum.c_str(),
                                   // The kernel keeps everything in locals; a small stack keeps
                                   // __heap_base far below the first tensor (64 KiB).
                                   "-z", "stack-size=4096", "--strip-all"};
  if (spec.shared_memory || spec.threads > 1) args.push_back("--shared-memory");
  std::string out_text, err_text;
  llvm::raw_string_ostream out_os(out_text), err_os(err_text);
  bool ok;
  {
    // lld 15 keeps its state in globals (the CommonLinkerContext): one link at a time, and the
    // context destroyed after each so that the next link starts clean.
    std::lock_guard<std::mutex> lock(lld_mutex());
    reset_lld_wasm_symbols();
    ok = lld::wasm::link(args, out_os, err_os, /*exitEarly=*/false, /*disableOutput=*/false);
    lld::CommonLinkerContext::destroy();
  }
  if (!ok) {
    *error = "wasm-ld failed: " + err_os.str() + out_os.str();
    return false;
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> bytes = llvm::MemoryBuffer::getFile(out.path);
  if (!bytes) {
    *error = "cannot read the linked module: " + bytes.getError().message();
    return false;
  }
  module->assign((*bytes)->getBufferStart(), (*bytes)->getBufferSize());
  return true;
}

}  // namespace

WasmBuildResult build_wasm_module(const WasmKernelSpec& spec) {
  WasmBuildResult result;
  std::string object;
  auto start = std::chrono::steady_clock::now();
  if (!compile_object(spec, &object, &result.error)) return result;
  result.codegen_ms = ms_since(start);
  start = std::chrono::steady_clock::now();
  std::string module;
  if (!link_module(spec, object, &module, &result.error)) return result;
  result.link_ms = ms_since(start);
  result.module = std::move(module);
  return result;
}

}  // namespace webtune
