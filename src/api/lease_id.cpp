#include <cstdio>

#include "zaris/lease.hpp"

namespace zaris {

std::string LeaseId::to_string() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(value_));
  return buf;
}

std::string LeaseId::to_key_string() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(value_));
  return buf;
}

Result<LeaseId> LeaseId::parse(std::string_view text) {
  if (text.empty() || text.size() > 16)
    return Error{Errc::invalid_argument, "lease id must be 1 to 16 hex digits"};
  std::uint64_t value = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return Error{Errc::invalid_argument, "lease id must be 1 to 16 hex digits"};
    }
    value = value << 4 | static_cast<std::uint64_t>(digit);
  }
  if (value == 0) return Error{Errc::invalid_argument, "lease id 0 names no lease"};
  return LeaseId(value);
}

}  // namespace zaris
