#include "ampkit/errors.h"

#include <charconv>
#include <cmath>

namespace ampkit {

std::string must_be(const std::string& name, const std::string& rule, const std::string& got) {
  return "`" + name + "` must be " + rule + ", got " + got + ".";
}

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

}  // namespace ampkit
