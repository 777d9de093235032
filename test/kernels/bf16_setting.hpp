#pragma once
// PTRAIN_CPU_BF16 set to a value (or unset, for null) for a scope, restored after: the bfloat16
// kernels read it at each call.
#include <cstdlib>
#include <optional>
#include <string>

namespace ptrain::test {

class Bf16Setting {
 public:
  explicit Bf16Setting(const char* value) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~Bf16Setting() {
    if (old_) ::setenv(name, old_->c_str(), 1);
    else ::unsetenv(name);
  }
  Bf16Setting(const Bf16Setting&) = delete;
  Bf16Setting& operator=(const Bf16Setting&) = delete;

 private:
  static constexpr const char* name = "PTRAIN_CPU_BF16";
  std::optional<std::string> old_;
};

}  // namespace ptrain::test
