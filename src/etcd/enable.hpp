// Makes Client::open("etcd://...") reach this backend. Linking zaris_etcd
// does it (a static initializer, and the target's --undefined pulls its
// object in); a program linked another way calls enable() once.
#pragma once

namespace zaris::etcd {

void enable() noexcept;

}  // namespace zaris::etcd

// Referenced by zaris_etcd's link options so that the linker keeps the
// registering object of the static archive.
extern "C" void zaris_etcd_backend() noexcept;
