// A compile key: the launcher and the values its kernel is compiled with (the rule's own
// fields, the arch and the shape constants).
//
// Canonical text form (docs/keys.md, "Key strings and defines"), used in the cache entry and its
// file name: the params sorted by name, "name=value" joined by ",", booleans as true/false:
//   arch=gfx942,batch=64,block_m=32,even_m=true,gemm=q_absorb,k=128,n=512
#ifndef PREWARM_LAUNCHERS_KEY_H_
#define PREWARM_LAUNCHERS_KEY_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "prewarm/launchers/step.h"

namespace prewarm {

using ParamValue = std::variant<int64_t, bool, std::string>;

struct Key {
  std::string launcher;
  std::map<std::string, ParamValue> params;  // sorted by name

  Key& Set(const std::string& name, ParamValue value) {
    params[name] = std::move(value);
    return *this;
  }
  // The canonical key string (the launcher is not part of it: it names the directory).
  std::string String() const;
  nlohmann::json ParamsJson() const;
  bool operator==(const Key&) const = default;
  bool operator<(const Key& o) const {
    return launcher != o.launcher ? launcher < o.launcher : String() < o.String();
  }
};

// The key whose String() is `text`, for `launcher`: values "true"/"false" are booleans, decimal
// integers integers, anything else a string. InvalidArgument naming the text when it is not a
// canonical key string (empty, a part without "=", names out of order, or not round-tripping).
absl::StatusOr<Key> ParseKeyString(std::string_view launcher, std::string_view text);

// A key with a step that reaches it.
struct PlannedKey {
  Key key;
  Step witness;
};

}  // namespace prewarm

#endif  // PREWARM_LAUNCHERS_KEY_H_
