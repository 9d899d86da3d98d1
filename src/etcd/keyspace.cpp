#include "etcd/keyspace.hpp"

namespace zaris::etcd {

void Keyspace::range(std::string_view prefix, std::string& begin, std::string& end) const {
  begin = key(prefix);
  // etcd's rule: the prefix with its last byte that is not 0xff plus one; a
  // prefix of 0xff bytes (or none) reads to "\0", the end of the keyspace.
  end = begin;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) {
    if (begin.empty()) begin.assign(1, '\0');
    end.assign(1, '\0');
    return;
  }
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
}

std::optional<std::string> Keyspace::strip(std::string_view stored) const {
  if (!stored.starts_with(stored_prefix_)) return std::nullopt;
  return std::string(stored.substr(stored_prefix_.size()));
}

}  // namespace zaris::etcd
