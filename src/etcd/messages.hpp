// zaris's requests and results as etcd's messages, keys mapped through the
// client's Keyspace.
#pragma once

#include <string_view>

#include "etcd/keyspace.hpp"
#include "etcdserverpb/rpc.pb.h"
#include "zaris/kv.hpp"
#include "zaris/result.hpp"
#include "zaris/txn.hpp"

namespace zaris::etcd {

// A key read back; false if it lies outside the keyspace.
bool to_key_value(const Keyspace& keyspace, const mvccpb::KeyValue& stored, KeyValue& out);
std::vector<KeyValue> to_key_values(
    const Keyspace& keyspace, const google::protobuf::RepeatedPtrField<mvccpb::KeyValue>& kvs);

// The read of one key (get) and of every key under a prefix (range).
etcdserverpb::RangeRequest get_request(const Keyspace& keyspace, std::string_view key,
                                       bool keys_only);
etcdserverpb::RangeRequest range_request(const Keyspace& keyspace, std::string_view prefix,
                                         const RangeOptions& options);

// A Txn one to one; refused (invalid_argument) over kMaxTxnOps operations in
// a branch or compares, or kMaxTxnBytes, before anything is sent. A put over
// kMaxTxnBytes is too_large, before it is sent.
inline constexpr std::size_t kMaxTxnBytes = 3 * 1024 * 1024 / 2;  // etcd's default request limit
Result<etcdserverpb::TxnRequest> txn_request(const Keyspace& keyspace, const Txn& txn);
void to_txn_result(const Keyspace& keyspace, const Txn& txn, const etcdserverpb::TxnResponse& in,
                   TxnResult& out);

// An order zaris does not know is invalid_argument, before anything is sent.
Result<void> check_order(RangeOrder order);

// A key that is empty is refused on every engine.
Result<void> check_key(std::string_view key);

}  // namespace zaris::etcd
