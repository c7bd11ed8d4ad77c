/// \file shader_text.hpp
/// Helpers the compute-shader emitters (GLSL ES 3.10 and WGSL) share: an indenting text writer
/// and the checked reading of a config entity's knobs. Private to codegen.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/config_space.hpp"

namespace webtune::shader_text {

/// Indented shader source; `open` and `close` bracket a block.
class ShaderWriter {
 public:
  void line(const std::string& text) {
    out_ << std::string(static_cast<size_t>(indent_) * 2, ' ') << text << '\n';
  }
  /// `head {` and one level deeper; an empty head opens a bare scope.
  void open(const std::string& head) {
    line(head.empty() ? "{" : head + " {");
    ++indent_;
  }
  void close() {
    --indent_;
    line("}");
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  int indent_ = 0;
};

/// Throws MeasureError(kInstantiation) with the message "<target>: <why>".
[[noreturn]] void refuse(std::string_view target, const std::string& why);

/// The `parts` factors of split `name`, checked to multiply to `extent`; refuses (as above)
/// a missing knob or factors that do not fit.
std::vector<int64_t> read_split(const ConfigEntity& entity, const std::string& name, size_t parts,
                                int64_t extent, std::string_view target);

/// The value of integer knob `name`; refuses a missing or non-integer knob.
int64_t read_int(const ConfigEntity& entity, const std::string& name, std::string_view target);

}  // namespace webtune::shader_text
