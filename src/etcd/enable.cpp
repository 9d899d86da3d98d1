#include "etcd/enable.hpp"

#include "etcd/etcd_backend.hpp"

namespace zaris::etcd {

void enable() noexcept {
  detail::set_etcd_opener(&EtcdBackend::open);
}

namespace {

// Registers the backend before main when this object is linked.
[[maybe_unused]] const bool registered = (enable(), true);

}  // namespace

}  // namespace zaris::etcd

extern "C" void zaris_etcd_backend() noexcept {
  zaris::etcd::enable();
}
