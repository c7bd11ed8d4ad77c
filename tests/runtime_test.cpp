/// \file runtime_test.cpp
/// The native runtime on a real device (Mesa llvmpipe through headless EGL): context creation,
/// measuring hand-written kernels in-process, and the worker process that survives hangs.
///
/// The kernels here are written by hand, not emitted, so that a runtime bug cannot hide behind
/// an emitter bug (and the other way round): they follow the layout contract of
/// kernel_artifact.hpp literally.
#include <GLES3/gl32.h>
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "codegen/measure.hpp"
#include "codegen/reference.hpp"
#include "native_agent/egl_context.hpp"
#include "native_agent/gl_runtime.hpp"
#include "native_agent/isolated_runtime.hpp"

namespace webtune {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// ---- hand-written kernels for dense M = N = K = 8 ----

/// One output per fragment, R32F everywhere: texel (x, y) of the output is C[y][x], of the data
/// A[y][x], of the weight B[y][x]. `k_end` < 8 makes the deliberately wrong variant.
std::string dense8_fragment_source(int k_end) {
  return R"(#version 300 es
precision highp float;
precision highp int;
precision highp sampler2D;
uniform sampler2D in0;
uniform sampler2D in1;
layout(location = 0) out vec4 out0;
void main() {
  ivec2 p = ivec2(gl_FragCoord.xy);
  float acc = 0.0;
  for (int k = 0; k < )" +
         std::to_string(k_end) + R"(; ++k) {
    acc += texelFetch(in0, ivec2(k, p.y), 0).r * texelFetch(in1, ivec2(p.x, k), 0).r;
  }
  out0 = vec4(acc);
}
)";
}

/// Like the correct kernel, but leaves column 7 unwritten: only the NaN fill can catch it.
const char* const kDense8FragmentSkipsColumn = R"(#version 300 es
precision highp float;
precision highp int;
precision highp sampler2D;
uniform sampler2D in0;
uniform sampler2D in1;
layout(location = 0) out vec4 out0;
void main() {
  ivec2 p = ivec2(gl_FragCoord.xy);
  if (p.x == 7) discard;
  float acc = 0.0;
  for (int k = 0; k < 8; ++k) {
    acc += texelFetch(in0, ivec2(k, p.y), 0).r * texelFetch(in1, ivec2(p.x, k), 0).r;
  }
  out0 = vec4(acc);
}
)";

/// 2×4 outputs per fragment through two RGBA32F draw buffers, inputs packed 4-wide along their
/// last axis: data texel (kb, m) = A[m][4kb..4kb+3], weight texel (nb, k) = B[k][4nb..4nb+3];
/// output texel (x, y) is item 2y + x: rows 2y (target 0) and 2y+1 (target 1), cols 4x..4x+3.
const char* const kDense8FragmentPackedMrt = R"(#version 300 es
precision highp float;
precision highp int;
precision highp sampler2D;
uniform sampler2D in0;
uniform sampler2D in1;
layout(location = 0) out vec4 out0;
layout(location = 1) out vec4 out1;
void main() {
  ivec2 p = ivec2(gl_FragCoord.xy);
  int row0 = 2 * p.y;
  vec4 acc0 = vec4(0.0);
  vec4 acc1 = vec4(0.0);
  for (int kb = 0; kb < 2; ++kb) {
    vec4 a0 = texelFetch(in0, ivec2(kb, row0), 0);
    vec4 a1 = texelFetch(in0, ivec2(kb, row0 + 1), 0);
    for (int c = 0; c < 4; ++c) {
      vec4 b = texelFetch(in1, ivec2(p.x, 4 * kb + c), 0);
      acc0 += a0[c] * b;
      acc1 += a1[c] * b;
    }
  }
  out0 = acc0;
  out1 = acc1;
}
)";

/// One output per invocation over plain row-major buffers; `skip_last` leaves C[7][7] unwritten.
std::string dense8_compute_source(bool skip_last) {
  return std::string(R"(#version 310 es
layout(local_size_x = 8, local_size_y = 8, local_size_z = 1) in;
layout(std430, binding = 0) readonly buffer Data { float a[]; };
layout(std430, binding = 1) readonly buffer Weight { float b[]; };
layout(std430, binding = 2) writeonly buffer Output { float c[]; };
void main() {
  uint col = gl_GlobalInvocationID.x;
  uint row = gl_GlobalInvocationID.y;
)") + (skip_last ? "  if (row * 8u + col == 63u) return;\n" : "") +
         R"(  float acc = 0.0;
  for (uint k = 0u; k < 8u; ++k) acc += a[row * 8u + k] * b[k * 8u + col];
  c[row * 8u + col] = acc;
}
)";
}

// ---- hand-written vertex-stage (transform feedback) kernels for dense M = N = K = 16 ----

/// How a feedback kernel for dense 16 goes wrong, if it does.
enum class FeedbackFault { kNone, kWrongValue, kSyntaxError, kMissingVarying };

/// Item t = gl_VertexID covers rows 2·(t / col_blocks) + j (varying oj, j = 0, 1) and cols
/// channels·(t mod col_blocks) … +channels−1, with col_blocks = 16 / channels; inputs are R32F
/// textures in the natural layout: texel (x, y) of the data is A[y][x], of the weight B[y][x].
std::string dense16_feedback_source(int channels, FeedbackFault fault) {
  const std::string type = channels == 1 ? "float" : "vec4";
  std::string b = "texelFetch(in1, ivec2(col0, k), 0).r";
  if (channels == 4) {
    b = "vec4(texelFetch(in1, ivec2(col0, k), 0).r, texelFetch(in1, ivec2(col0 + 1, k), 0).r,\n"
        "                  texelFetch(in1, ivec2(col0 + 2, k), 0).r, "
        "texelFetch(in1, ivec2(col0 + 3, k), 0).r)";
  }
  std::string source = R"(#version 300 es
precision highp float;
precision highp int;
precision highp sampler2D;
uniform sampler2D in0;
uniform sampler2D in1;
out )" + type + R"( o0;
)";
  if (fault != FeedbackFault::kMissingVarying) source += "out " + type + " o1;\n";
  source += R"(void main() {
  int col_blocks = 16 / )" +
            std::to_string(channels) +
            R"(;
  int row0 = 2 * (gl_VertexID / col_blocks);
  int col0 = )" +
            std::to_string(channels) +
            R"( * (gl_VertexID % col_blocks);
  )" + type +
            " acc0 = " + type + "(0.0);\n  " + type + " acc1 = " + type + R"((0.0);
  for (int k = 0; k < 16; ++k) {
    )" + type +
            " b = " + b + R"(;
    acc0 += texelFetch(in0, ivec2(k, row0), 0).r * b;
    acc1 += texelFetch(in0, ivec2(k, row0 + 1), 0).r * b;
  }
  o0 = acc0;
)";
  if (fault == FeedbackFault::kWrongValue) {
    source += "  o1 = acc1 + 1.0;\n";  // every odd row, so the last sample (C[15][15]) too
  } else if (fault == FeedbackFault::kSyntaxError) {
    source += "  o1 = acc1\n";  // no semicolon
  } else if (fault != FeedbackFault::kMissingVarying) {
    source += "  o1 = acc1;\n";
  }
  return source + "  gl_Position = vec4(0.0, 0.0, 0.0, 1.0);\n}\n";
}

/// A "hang" for llvmpipe. Mesa caps every shader invocation at 65535 loop iterations in total
/// (nested loops share the count), so no loop runs forever there; instead each of the
/// 512×512 fragments does 65535 × 16 dependent FMAs on values the compiler cannot know:
/// measured 1.9 s for 64×64 fragments, so about 2 minutes here — far past a 1 s timeout.
const char* const kSlowFragment = R"(#version 300 es
precision highp float;
precision highp int;
precision highp sampler2D;
uniform sampler2D in0;
uniform sampler2D in1;
layout(location = 0) out vec4 out0;
void main() {
  ivec2 p = ivec2(gl_FragCoord.xy);
  float x = texelFetch(in0, ivec2(0, p.y), 0).r;
  float y = texelFetch(in1, ivec2(p.x, 0), 0).r;
  float acc = x;
  for (int i = 0; i < 1000000; ++i) {
    acc = acc * y + x; acc = acc * y + x; acc = acc * y + x; acc = acc * y + x;
    acc = acc * y + x; acc = acc * y + x; acc = acc * y + x; acc = acc * y + x;
    acc = acc * y + x; acc = acc * y + x; acc = acc * y + x; acc = acc * y + x;
    acc = acc * y + x; acc = acc * y + x; acc = acc * y + x; acc = acc * y + x;
  }
  out0 = vec4(acc);
}
)";

TensorLayout natural_layout(std::vector<int64_t> shape) {
  TensorLayout layout;
  layout.shape = shape;
  layout.pack_axis = -1;
  layout.width = shape[1];
  layout.height = shape[0];
  return layout;
}

OutputLayout plain_output(int64_t rows, int64_t cols) {
  OutputLayout output;
  output.rows = rows;
  output.cols = cols;
  output.rows_per_item = 1;
  output.channels = 1;
  output.width = cols;
  output.height = rows;
  return output;
}

MeasureInput make_input(const Workload& workload, KernelArtifact artifact, uint64_t seed = 42) {
  MeasureInput input;
  input.workload = workload;
  input.artifact = std::move(artifact);
  input.seed = seed;
  input.samples = reference_samples(workload, seed, 16);
  input.options.number = 2;
  input.options.repeat = 3;
  input.options.min_repeat_ms = 0;
  input.options.timeout_s = 10;
  return input;
}

MeasureInput dense8_fragment(const std::string& source) {
  KernelArtifact artifact;
  artifact.target = Target::kGlesFrag;
  artifact.source = source;
  artifact.inputs = {natural_layout({8, 8}), natural_layout({8, 8})};
  artifact.output = plain_output(8, 8);
  return make_input(Workload::dense(8, 8, 8), std::move(artifact));
}

MeasureInput dense8_packed_mrt() {
  KernelArtifact artifact;
  artifact.target = Target::kGlesFrag;
  artifact.source = kDense8FragmentPackedMrt;
  for (int i = 0; i < 2; ++i) {
    TensorLayout layout;
    layout.shape = {8, 8};
    layout.pack_axis = 1;
    layout.width = 2;
    layout.height = 8;
    artifact.inputs.push_back(layout);
  }
  artifact.output.rows = 8;
  artifact.output.cols = 8;
  artifact.output.rows_per_item = 2;
  artifact.output.channels = 4;
  artifact.output.width = 2;
  artifact.output.height = 4;
  return make_input(Workload::dense(8, 8, 8), std::move(artifact));
}

/// Dense 16×16×16 through transform feedback: two rows per item (rows_per_item = 2),
/// `channels` cols per item, width = items, height = 1.
MeasureInput dense16_feedback(int channels, FeedbackFault fault = FeedbackFault::kNone) {
  KernelArtifact artifact;
  artifact.target = Target::kGlesFrag;
  artifact.source = dense16_feedback_source(channels, fault);
  artifact.inputs = {natural_layout({16, 16}), natural_layout({16, 16})};
  artifact.output.rows = 16;
  artifact.output.cols = 16;
  artifact.output.rows_per_item = 2;
  artifact.output.channels = channels;
  artifact.output.width = (16 / 2) * (16 / channels);
  artifact.output.height = 1;
  artifact.output.feedback = true;
  return make_input(Workload::dense(16, 16, 16), std::move(artifact));
}

MeasureInput dense8_compute(bool skip_last) {
  KernelArtifact artifact;
  artifact.target = Target::kGlesCompute;
  artifact.source = dense8_compute_source(skip_last);
  artifact.inputs = {natural_layout({8, 8}), natural_layout({8, 8})};
  artifact.output = plain_output(8, 8);
  artifact.dispatch = {1, 1, 1};
  artifact.workgroup = {8, 8, 1};
  return make_input(Workload::dense(8, 8, 8), std::move(artifact));
}

MeasureInput slow_fragment() {
  Workload workload = Workload::dense(512, 512, 1);
  KernelArtifact artifact;
  artifact.target = Target::kGlesFrag;
  artifact.source = kSlowFragment;
  artifact.inputs = {natural_layout({512, 1}), natural_layout({1, 512})};
  artifact.output = plain_output(512, 512);
  MeasureInput input = make_input(workload, std::move(artifact));
  input.options.number = 1;
  input.options.repeat = 1;
  input.options.timeout_s = 1;
  return input;
}

void expect_ok(const MeasureResult& result, int repeat) {
  EXPECT_EQ(result.error, MeasureErrorNo::kNoError) << result.message;
  EXPECT_EQ(result.message, "");
  ASSERT_EQ(result.costs.size(), static_cast<size_t>(repeat));
  for (double cost : result.costs) {
    EXPECT_GT(cost, 0.0);
    EXPECT_LT(cost, 1.0);  // an 8×8×8 dense is microseconds, even on llvmpipe
  }
  EXPECT_GE(result.all_cost, result.costs[0]);
  EXPECT_NEAR(result.timestamp, unix_now(), 60.0);
}

// ---------------------------------------------------------------------------------------------

TEST(GlDeviceInfoTest, ShortNameKeepsTheDeviceNameOnly) {
  GlDeviceInfo info;
  const std::pair<const char*, const char*> cases[] = {
      {"llvmpipe (LLVM 15.0.6, 256 bits)", "llvmpipe"},
      {"NVIDIA H200/PCIe/SSE2", "nvidia-h200"},
      {"NVIDIA GeForce RTX 4090/PCIe/SSE2", "nvidia-geforce-rtx-4090"},
      {"Mesa Intel(R) UHD Graphics 620 (KBL GT2)", "mesa-intel-uhd-graphics-620"},
      {"AMD Radeon RX 7900 XTX (radeonsi, navi31, LLVM 15.0.7)", "amd-radeon-rx-7900-xtx"},
      {"", "unknown"},
  };
  for (const auto& [renderer, expected] : cases) {
    info.renderer = renderer;
    EXPECT_EQ(info.short_name(), expected) << renderer;
  }
}

TEST(EglContextTest, CreatesHeadlessEs31ContextOnLlvmpipe) {
  auto start = Clock::now();
  std::unique_ptr<EglContext> context = EglContext::create();
  double create_s = seconds_since(start);
  ASSERT_NE(context, nullptr);
  const GlDeviceInfo& info = context->info();
  RecordProperty("create_ms", std::to_string(1e3 * create_s));

  EXPECT_GE(info.major * 10 + info.minor, 31) << info.version;
  EXPECT_THAT(info.renderer, HasSubstr("llvmpipe"));
  EXPECT_EQ(info.short_name(), "llvmpipe");
  EXPECT_THAT(info.version, HasSubstr("OpenGL ES 3."));
  EXPECT_THAT(info.glsl_version, HasSubstr("OpenGL ES GLSL ES"));
  EXPECT_TRUE(info.platform == "device" || info.platform == "surfaceless" ||
              info.platform == "default")
      << info.platform;
  EXPECT_TRUE(info.color_buffer_float);
  EXPECT_GE(info.limits.max_texture_size, 2048);
  EXPECT_GE(info.limits.max_draw_buffers, 4);
  EXPECT_GE(info.limits.max_workgroup_invocations, 128);
  EXPECT_GE(info.limits.max_workgroup_size_x, 128);
  EXPECT_GE(info.limits.max_workgroup_size_y, 128);
  EXPECT_GE(info.limits.max_workgroup_size_z, 64);
  EXPECT_GE(info.limits.max_shared_memory_bytes, 16384);
  // The OpenGL ES 3.0 minimums, which vertex-stage (transform feedback) kernels rely on.
  EXPECT_GE(info.limits.max_varying_vectors, 15);
  EXPECT_GE(info.limits.max_feedback_components, 64);

  // The context is current: GL answers on this thread.
  GLint texture_size = 0;
  glGetIntegerv(GL_MAX_TEXTURE_SIZE, &texture_size);
  EXPECT_EQ(texture_size, info.limits.max_texture_size);

  // The hello of an agent carries this JSON; it must come back unchanged.
  GlDeviceInfo back = GlDeviceInfo::from_json(boost::json::value(info.to_json()));
  EXPECT_EQ(back.platform, info.platform);
  EXPECT_EQ(back.renderer, info.renderer);
  EXPECT_EQ(back.version, info.version);
  EXPECT_EQ(back.major, info.major);
  EXPECT_EQ(back.minor, info.minor);
  EXPECT_EQ(back.color_buffer_float, info.color_buffer_float);
  EXPECT_EQ(back.limits.max_texture_size, info.limits.max_texture_size);
  EXPECT_EQ(back.limits.max_shared_memory_bytes, info.limits.max_shared_memory_bytes);
  EXPECT_EQ(back.limits.max_varying_vectors, info.limits.max_varying_vectors);
  EXPECT_EQ(back.limits.max_feedback_components, info.limits.max_feedback_components);
  EXPECT_EQ(info.to_json().at("short_name").as_string(), "llvmpipe");
}

/// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { old_.empty() ? unsetenv(name_) : setenv(name_, old_.c_str(), 1); }

 private:
  const char* name_;
  std::string old_;
};

TEST(EglContextTest, EachHeadlessPathWorksOnItsOwn) {
  // Device enumeration and Mesa's surfaceless platform both reach llvmpipe here; the default
  // display does not (it needs EGL_PLATFORM=surfaceless before EGL's first use).
  for (const char* platform : {"device", "surfaceless"}) {
    ScopedEnv env("WEBTUNE_EGL_PLATFORM", platform);
    auto context = EglContext::create();
    EXPECT_EQ(context->info().platform, platform);
    EXPECT_THAT(context->info().renderer, HasSubstr("llvmpipe"));
  }
}

TEST(EglContextTest, UnknownForcedPlatformIsRefused) {
  ScopedEnv env("WEBTUNE_EGL_PLATFORM", "x11");
  try {
    EglContext::create();
    FAIL() << "created a context on an unknown platform";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("WEBTUNE_EGL_PLATFORM must be"));
  }
}

TEST(EglContextDeathTest, NoDriverExplainsEveryPathTried) {
  // With no EGL vendor library, every path fails. A fresh process is needed (libglvnd reads its
  // vendor list once per process): the "threadsafe" style re-executes this test binary, which
  // inherits the variable set here.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ScopedEnv env("__EGL_VENDOR_LIBRARY_FILENAMES", "/nonexistent/egl_vendor.json");
  EXPECT_EXIT(
      {
        try {
          EglContext::create();
        } catch (const std::runtime_error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::_Exit(3);
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(3), "tried:.*device: .*surfaceless: .*default: ");
}

TEST(EglContextTest, TwoContextsCoexistAndOutliveEachOther) {
  // Both share one EGL display; destroying the first must not terminate it under the second.
  auto first = EglContext::create();
  auto second = EglContext::create();
  first.reset();
  second->make_current();
  GlRuntime runtime(std::move(second));
  expect_ok(runtime.measure(dense8_fragment(dense8_fragment_source(8))), 3);
}

// ---------------------------------------------------------------------------------------------
// GlRuntime, in this process. One context for the suite (creating one costs ~0.1 s); it is
// destroyed before the IsolatedRuntime tests, which must fork from a process without one.

class GlRuntimeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { runtime_ = std::make_unique<GlRuntime>(EglContext::create()); }
  static void TearDownTestSuite() { runtime_.reset(); }
  static std::unique_ptr<GlRuntime> runtime_;
};
std::unique_ptr<GlRuntime> GlRuntimeTest::runtime_;

TEST_F(GlRuntimeTest, CorrectFragmentKernelMeasures) {
  MeasureInput input = dense8_fragment(dense8_fragment_source(8));
  auto start = Clock::now();
  MeasureResult result = runtime_->measure(input);
  RecordProperty("dense8_measure_ms", std::to_string(1e3 * seconds_since(start)));
  expect_ok(result, 3);
  EXPECT_LE(result.all_cost, seconds_since(start));
  EXPECT_TRUE(std::isfinite(result.mean_cost()));
  EXPECT_GT(result.gflops(input.workload.flops()), 0.0);
}

TEST_F(GlRuntimeTest, OffByOneFragmentKernelIsWrongAnswer) {
  MeasureResult result = runtime_->measure(dense8_fragment(dense8_fragment_source(7)));
  EXPECT_EQ(result.error, MeasureErrorNo::kWrongAnswer);
  EXPECT_THAT(result.message, HasSubstr("differ from the reference"));
  EXPECT_THAT(result.message, HasSubstr("expected"));
  EXPECT_TRUE(result.costs.empty());
  EXPECT_GT(result.all_cost, 0.0);
}

TEST_F(GlRuntimeTest, UnwrittenFragmentOutputsAreCaughtAsNaN) {
  MeasureResult result = runtime_->measure(dense8_fragment(kDense8FragmentSkipsColumn));
  EXPECT_EQ(result.error, MeasureErrorNo::kWrongAnswer);
  // Sample 63 (always taken: the last element) is C[7][7], in the skipped column.
  EXPECT_THAT(result.message, HasSubstr("output[63] = nan"));
}

TEST_F(GlRuntimeTest, PackedMultiTargetFragmentKernelMeasures) {
  expect_ok(runtime_->measure(dense8_packed_mrt()), 3);
}

TEST_F(GlRuntimeTest, SyntaxErrorIsCompileDeviceWithDriverLog) {
  MeasureResult result = runtime_->measure(dense8_fragment(R"(#version 300 es
precision highp float;
layout(location = 0) out vec4 out0;
void main() { out0 = vec4(1.0) }
)"));
  EXPECT_EQ(result.error, MeasureErrorNo::kCompileDevice);
  EXPECT_THAT(result.message, HasSubstr("fragment shader failed to compile"));
  EXPECT_THAT(result.message, HasSubstr("syntax error"));  // Mesa's own words
  EXPECT_TRUE(result.costs.empty());
}

TEST_F(GlRuntimeTest, LinkErrorIsCompileDeviceWithDriverLog) {
  // A fragment input that the full-screen vertex shader does not write compiles, but must not
  // link.
  MeasureResult result = runtime_->measure(dense8_fragment(R"(#version 300 es
precision highp float;
in vec2 uv;
layout(location = 0) out vec4 out0;
void main() { out0 = vec4(uv, 0.0, 1.0); }
)"));
  EXPECT_EQ(result.error, MeasureErrorNo::kCompileDevice);
  EXPECT_THAT(result.message, HasSubstr("failed to link"));
  EXPECT_THAT(result.message, HasSubstr("uv"));
}

TEST_F(GlRuntimeTest, CorrectComputeKernelMeasures) {
  expect_ok(runtime_->measure(dense8_compute(false)), 3);
}

TEST_F(GlRuntimeTest, UnwrittenComputeOutputIsCaughtAsNaN) {
  MeasureResult result = runtime_->measure(dense8_compute(true));
  EXPECT_EQ(result.error, MeasureErrorNo::kWrongAnswer);
  EXPECT_THAT(result.message, HasSubstr("output[63] = nan"));
}

TEST_F(GlRuntimeTest, FeedbackKernelMeasuresWithBothChannelCounts) {
  EXPECT_GE(runtime_->info().limits.max_varying_vectors, 15);
  EXPECT_GE(runtime_->info().limits.max_feedback_components, 64);
  for (int channels : {1, 4}) {
    SCOPED_TRACE("channels = " + std::to_string(channels));
    MeasureInput input = dense16_feedback(channels);
    ASSERT_FALSE(input.samples.empty());
    expect_ok(runtime_->measure(input), 3);
  }
}

TEST_F(GlRuntimeTest, WrongFeedbackKernelIsWrongAnswer) {
  for (int channels : {1, 4}) {
    SCOPED_TRACE("channels = " + std::to_string(channels));
    MeasureResult result =
        runtime_->measure(dense16_feedback(channels, FeedbackFault::kWrongValue));
    EXPECT_EQ(result.error, MeasureErrorNo::kWrongAnswer) << result.message;
    EXPECT_THAT(result.message, HasSubstr("differ from the reference"));
    EXPECT_TRUE(result.costs.empty());
  }
}

TEST_F(GlRuntimeTest, FeedbackVertexSyntaxErrorIsCompileDeviceWithDriverLog) {
  MeasureResult result = runtime_->measure(dense16_feedback(4, FeedbackFault::kSyntaxError));
  EXPECT_EQ(result.error, MeasureErrorNo::kCompileDevice);
  EXPECT_THAT(result.message, HasSubstr("vertex shader failed to compile"));
  EXPECT_THAT(result.message, HasSubstr("syntax error"));  // Mesa's own words
  EXPECT_TRUE(result.costs.empty());
}

TEST_F(GlRuntimeTest, MissingFeedbackVaryingIsLinkError) {
  // rows_per_item = 2 captures o0 and o1; a shader without o1 compiles but must not link.
  MeasureResult result = runtime_->measure(dense16_feedback(1, FeedbackFault::kMissingVarying));
  EXPECT_EQ(result.error, MeasureErrorNo::kCompileDevice);
  EXPECT_THAT(result.message, HasSubstr("failed to link"));
  EXPECT_THAT(result.message, HasSubstr("o1"));
}

TEST_F(GlRuntimeTest, FeedbackLayoutBeyondLimitsIsRefusedBeforeGl) {
  const DeviceLimits& limits = runtime_->info().limits;
  struct Case {
    const char* what;
    void (*edit)(OutputLayout&, const DeviceLimits&);
    const char* message;
  };
  const Case cases[] = {
      {"too few items", [](OutputLayout& o, const DeviceLimits&) { o.width -= 1; },
       "items but its width draws"},
      {"height 2", [](OutputLayout& o, const DeviceLimits&) { o.height = 2; }, "has height 1"},
      {"too many varyings",
       [](OutputLayout& o, const DeviceLimits& l) {
         o.rows_per_item = static_cast<int>(l.max_varying_vectors) + 1;
       },
       "GL_MAX_VARYING_VECTORS"},
      {"too many components",
       [](OutputLayout& o, const DeviceLimits& l) {
         o.rows_per_item = static_cast<int>(l.max_feedback_components / 4) + 1;
       },
       "GL_MAX_TRANSFORM_FEEDBACK_INTERLEAVED_COMPONENTS"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    MeasureInput input = dense16_feedback(4);
    c.edit(input.artifact.output, limits);
    MeasureResult result = runtime_->measure(input);
    EXPECT_EQ(result.error, MeasureErrorNo::kInstantiation) << result.message;
    EXPECT_THAT(result.message, HasSubstr(c.message));
  }
  // A wide feedback output needs no texture: only its inputs are textures.
  MeasureInput wide = dense16_feedback(1);
  wide.artifact.output.width = limits.max_texture_size + 1;
  expect_ok(runtime_->measure(wide), 3);
}

TEST_F(GlRuntimeTest, FragmentKernelAfterFeedbackKernelIsUnaffected) {
  // The feedback trial enables rasterizer discard and binds a feedback buffer; neither may
  // outlive it, or the next fragment kernel would draw nothing (and fail as NaN).
  expect_ok(runtime_->measure(dense16_feedback(4)), 3);
  EXPECT_EQ(glIsEnabled(GL_RASTERIZER_DISCARD), GL_FALSE);
  GLint bound = -1;
  glGetIntegerv(GL_TRANSFORM_FEEDBACK_BUFFER_BINDING, &bound);
  EXPECT_EQ(bound, 0);
  glGetIntegerv(GL_TRANSFORM_FEEDBACK_BINDING, &bound);
  EXPECT_EQ(bound, 0);
  expect_ok(runtime_->measure(dense8_fragment(dense8_fragment_source(8))), 3);
  expect_ok(runtime_->measure(dense8_packed_mrt()), 3);
  // And the other way round.
  expect_ok(runtime_->measure(dense16_feedback(1)), 3);
}

TEST_F(GlRuntimeTest, MinRepeatMsGrowsNumber) {
  MeasureInput input = dense8_fragment(dense8_fragment_source(8));
  input.options.number = 1;
  input.options.repeat = 3;
  input.options.min_repeat_ms = 20;
  MeasureResult result = runtime_->measure(input);
  expect_ok(result, 3);
  // Three repeats of at least 20 ms each...
  EXPECT_GE(result.all_cost, 0.060);
  // ...of a kernel far shorter than that: each cost is the mean of many runs.
  for (double cost : result.costs) EXPECT_LT(cost, 0.010);
}

TEST_F(GlRuntimeTest, SoftTimeoutStopsTiming) {
  MeasureInput input = dense8_fragment(dense8_fragment_source(8));
  input.options.timeout_s = 1e-6;
  MeasureResult result = runtime_->measure(input);
  EXPECT_EQ(result.error, MeasureErrorNo::kRunTimeout);
  EXPECT_THAT(result.message, HasSubstr("ran past its timeout of 1e-06 s"));
  EXPECT_TRUE(result.costs.empty());
}

TEST_F(GlRuntimeTest, TextureBeyondDeviceLimitIsRefusedBeforeGl) {
  MeasureInput input = dense8_fragment(dense8_fragment_source(8));
  int64_t max = runtime_->info().limits.max_texture_size;
  input.artifact.output.width = max + 1;
  input.artifact.output.height = 1;
  MeasureResult result = runtime_->measure(input);
  EXPECT_EQ(result.error, MeasureErrorNo::kInstantiation);
  EXPECT_THAT(result.message, HasSubstr("GL_MAX_TEXTURE_SIZE is " + std::to_string(max)));
}

TEST_F(GlRuntimeTest, LayoutThatDisagreesWithWorkloadIsInstantiation) {
  MeasureInput input = dense8_fragment(dense8_fragment_source(8));
  input.artifact.inputs[1].shape = {8, 4};
  MeasureResult result = runtime_->measure(input);
  EXPECT_EQ(result.error, MeasureErrorNo::kInstantiation);
  EXPECT_THAT(result.message,
              HasSubstr("input 1 (weight) has shape [8,4] but the workload's weight is [8,8]"));
}

TEST_F(GlRuntimeTest, EpilogueTensorsOfTheWrongShapeOrCountAreRefusedByName) {
  // The workload says bias + residual; the artifact must bring their layouts, shaped right.
  MeasureInput input = dense8_fragment(dense8_fragment_source(8));
  input.workload.epilogue.bias = true;
  input.workload.epilogue.residual = Residual::kBeforeActivation;
  input.samples = reference_samples(input.workload, input.seed, 8);
  MeasureResult missing = runtime_->measure(input);
  EXPECT_EQ(missing.error, MeasureErrorNo::kInstantiation);
  EXPECT_THAT(missing.message, HasSubstr("has 4 inputs (data, weight, bias, residual)"));

  TensorLayout bias;
  bias.shape = {7};
  bias.width = 7;
  bias.height = 1;
  TensorLayout residual;
  residual.shape = {8, 8};
  residual.width = 8;
  residual.height = 8;
  input.artifact.inputs.push_back(bias);
  input.artifact.inputs.push_back(residual);
  MeasureResult wrong_bias = runtime_->measure(input);
  EXPECT_EQ(wrong_bias.error, MeasureErrorNo::kInstantiation);
  EXPECT_THAT(wrong_bias.message,
              HasSubstr("input 2 (bias) has shape [7] but the workload's bias is [8]"));

  input.artifact.inputs[2].shape = {8};
  input.artifact.inputs[3].shape = {8, 7};
  MeasureResult wrong_residual = runtime_->measure(input);
  EXPECT_EQ(wrong_residual.error, MeasureErrorNo::kInstantiation);
  EXPECT_THAT(wrong_residual.message,
              HasSubstr("input 3 (residual) has shape [8,7] but the workload's residual is [8,8]"));
}

TEST_F(GlRuntimeTest, OversizedWorkgroupIsInstantiation) {
  MeasureInput input = dense8_compute(false);
  input.artifact.workgroup = {runtime_->info().limits.max_workgroup_size_x + 1, 1, 1};
  MeasureResult result = runtime_->measure(input);
  EXPECT_EQ(result.error, MeasureErrorNo::kInstantiation);
  EXPECT_THAT(result.message, HasSubstr("workgroup size"));
}

TEST_F(GlRuntimeTest, TrialsLeaveNoGlObjectsBehind) {
  // Every kind of trial: success, wrong answer, compile failure, both targets.
  runtime_->measure(dense8_fragment(dense8_fragment_source(8)));
  runtime_->measure(dense8_packed_mrt());
  runtime_->measure(dense8_fragment(dense8_fragment_source(7)));
  runtime_->measure(dense8_fragment("#version 300 es\nvoid main() { syntax error }\n"));
  runtime_->measure(dense8_compute(false));
  runtime_->measure(dense8_compute(true));
  runtime_->measure(dense16_feedback(4));
  runtime_->measure(dense16_feedback(1, FeedbackFault::kWrongValue));
  runtime_->measure(dense16_feedback(4, FeedbackFault::kSyntaxError));
  runtime_->measure(dense16_feedback(1, FeedbackFault::kMissingVarying));
  // The suite's context is current on this thread; names are small integers, and a deleted
  // object's name answers false to glIs*.
  int alive = 0;
  for (GLuint name = 1; name <= 256; ++name) {
    alive += glIsTexture(name) + glIsBuffer(name) + glIsFramebuffer(name) + glIsVertexArray(name) +
             glIsProgram(name) + glIsShader(name) + glIsRenderbuffer(name) +
             glIsTransformFeedback(name);
  }
  EXPECT_EQ(alive, 0);
  EXPECT_EQ(glGetError(), static_cast<GLenum>(GL_NO_ERROR));
}

TEST_F(GlRuntimeTest, ThousandTrialsKeepWorking) {
  // An agent runs thousands of trials in one context; the last must measure like the first.
  MeasureInput input = dense8_fragment(dense8_fragment_source(8));
  input.options.number = 1;
  input.options.repeat = 1;
  MeasureResult result;
  for (int i = 0; i < 1000 && (i == 0 || result.ok()); ++i) result = runtime_->measure(input);
  expect_ok(result, 1);
}

// ---------------------------------------------------------------------------------------------
// IsolatedRuntime

/// The pids of this process's children, from /proc (no /proc/<pid>/task/*/children here).
std::vector<pid_t> child_pids() {
  std::vector<pid_t> children;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return children;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // "pid (comm) state ppid ...": comm may hold spaces, so parse after the last ')'.
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    char state = 0;
    long parent = 0;
    rest >> state >> parent;
    if (parent == getpid() && state != 'Z') children.push_back(static_cast<pid_t>(pid));
  }
  closedir(dir);
  return children;
}

TEST(IsolatedRuntimeTest, MeasuresInWorkerAndReportsDevice) {
  IsolatedRuntime runtime;
  EXPECT_THAT(runtime.info().renderer, HasSubstr("llvmpipe"));
  EXPECT_GE(runtime.info().limits.max_texture_size, 2048);
  expect_ok(runtime.measure(dense8_fragment(dense8_fragment_source(8))), 3);
  expect_ok(runtime.measure(dense8_compute(false)), 3);
  // The feedback flag of the output layout travels through the JSON request.
  expect_ok(runtime.measure(dense16_feedback(4)), 3);

  // Errors and driver logs travel through the JSON reply unchanged.
  MeasureResult wrong = runtime.measure(dense8_fragment(dense8_fragment_source(7)));
  EXPECT_EQ(wrong.error, MeasureErrorNo::kWrongAnswer);
  EXPECT_THAT(wrong.message, HasSubstr("differ from the reference"));
  MeasureResult broken =
      runtime.measure(dense8_fragment("#version 300 es\nvoid main() { syntax error }\n"));
  EXPECT_EQ(broken.error, MeasureErrorNo::kCompileDevice);
  EXPECT_THAT(broken.message, HasSubstr("error"));
  EXPECT_EQ(runtime.restarts(), 0);
}

TEST(IsolatedRuntimeTest, HangingKernelIsKilledAndTheWorkerReplaced) {
  IsolatedRuntime runtime;
  auto start = Clock::now();
  MeasureResult result = runtime.measure(slow_fragment());
  double elapsed = seconds_since(start);
  EXPECT_EQ(result.error, MeasureErrorNo::kRunTimeout) << result.message;
  EXPECT_THAT(result.message, HasSubstr("kernel ran past its timeout of 1 s"));
  EXPECT_TRUE(result.costs.empty());
  // 1 s timeout, plus the compile margin, plus a fresh worker: a few seconds, not minutes.
  EXPECT_LT(elapsed, 10.0);
  EXPECT_GE(result.all_cost, 1.0);
  EXPECT_EQ(runtime.restarts(), 1);

  // The replacement worker measures the next candidate normally.
  expect_ok(runtime.measure(dense8_fragment(dense8_fragment_source(8))), 3);
  EXPECT_EQ(runtime.restarts(), 1);
}

TEST(IsolatedRuntimeTest, DeadWorkerIsRuntimeDeviceAndTheWorkerReplaced) {
  IsolatedRuntime runtime;
  std::vector<pid_t> children = child_pids();
  ASSERT_EQ(children.size(), 1u);
  ASSERT_EQ(kill(children[0], SIGKILL), 0);
  // Wait until it is a zombie (not reaped: that is the runtime's job).
  for (int i = 0; i < 200 && !child_pids().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  MeasureResult result = runtime.measure(dense8_fragment(dense8_fragment_source(8)));
  EXPECT_EQ(result.error, MeasureErrorNo::kRuntimeDevice);
  EXPECT_THAT(result.message, HasSubstr("killed by signal 9"));
  EXPECT_EQ(runtime.restarts(), 1);
  expect_ok(runtime.measure(dense8_fragment(dense8_fragment_source(8))), 3);
}

TEST(IsolatedRuntimeTest, StartsFromAMultithreadedProcess) {
  // An agent forks its worker while its network and logging threads run; fork then only runs
  // the worker loop, which must not trip over locks those threads held (malloc, stdio).
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&stop] {
      while (!stop) {
        std::vector<std::string> garbage(64, std::string(100, 'x'));
        std::snprintf(garbage[0].data(), garbage[0].size(), "%d", static_cast<int>(garbage.size()));
      }
    });
  }
  for (int round = 0; round < 3; ++round) {
    IsolatedRuntime runtime;
    expect_ok(runtime.measure(dense8_fragment(dense8_fragment_source(8))), 3);
  }
  stop = true;
  for (std::thread& thread : threads) thread.join();
}

TEST(IsolatedRuntimeTest, DestructorReapsTheWorker) {
  {
    IsolatedRuntime runtime;
    EXPECT_EQ(child_pids().size(), 1u);
  }
  EXPECT_TRUE(child_pids().empty());
}

TEST(IsolatedRuntimeTest, RefusesToForkWhileThisProcessHoldsAContext) {
  // A worker forked now would inherit llvmpipe's initialised screen without its threads and
  // hang in its first draw; the runtime says so instead.
  auto context = EglContext::create();
  try {
    IsolatedRuntime runtime;
    FAIL() << "IsolatedRuntime started despite a live EGL context";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("live EGL context"));
  }
}

}  // namespace
}  // namespace webtune
