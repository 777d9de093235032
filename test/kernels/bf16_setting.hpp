#pragma once
// PTRAIN_CPU_BF16 (or PTRAIN_CPU_AMX) set to a value (or unset, for null) for a scope, restored
// after: the bfloat16 kernels read it at each call.
#include <cstdlib>
#include <optional>
#include <string>

namespace ptrain::test {

class Bf16Setting {
 public:
  explicit Bf16Setting(const char* value, const char* name = "PTRAIN_CPU_BF16") : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~Bf16Setting() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  Bf16Setting(const Bf16Setting&) = delete;
  Bf16Setting& operator=(const Bf16Setting&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace ptrain::test
