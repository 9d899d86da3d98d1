#include "etcd/messages.hpp"

namespace zaris::etcd {

namespace {

namespace pb = etcdserverpb;

std::uint64_t unsigned_of(std::int64_t wire) {
  return static_cast<std::uint64_t>(wire);
}
std::int64_t signed_of(std::uint64_t number) {
  return static_cast<std::int64_t>(number);
}

void set_compare(const Keyspace& keyspace, const Compare& compare, pb::Compare& out) {
  out.set_key(keyspace.key(compare.key));
  switch (compare.op) {
    case CompareOp::equal:
      out.set_result(pb::Compare::EQUAL);
      break;
    case CompareOp::not_equal:
      out.set_result(pb::Compare::NOT_EQUAL);
      break;
    case CompareOp::less:
      out.set_result(pb::Compare::LESS);
      break;
    case CompareOp::greater:
      out.set_result(pb::Compare::GREATER);
      break;
  }
  switch (compare.target) {
    case CompareTarget::value:
      out.set_target(pb::Compare::VALUE);
      out.set_value(compare.bytes);
      break;
    case CompareTarget::version:
      out.set_target(pb::Compare::VERSION);
      out.set_version(signed_of(compare.number));
      break;
    case CompareTarget::create_revision:
      out.set_target(pb::Compare::CREATE);
      out.set_create_revision(signed_of(compare.number));
      break;
    case CompareTarget::mod_revision:
      out.set_target(pb::Compare::MOD);
      out.set_mod_revision(signed_of(compare.number));
      break;
    case CompareTarget::lease:
      out.set_target(pb::Compare::LEASE);
      out.set_lease(signed_of(compare.number));
      break;
  }
}

void set_op(const Keyspace& keyspace, const TxnOp& op, pb::RequestOp& out) {
  switch (op.kind) {
    case TxnOp::Kind::put: {
      auto* put = out.mutable_request_put();
      put->set_key(keyspace.key(op.key));
      put->set_value(op.value);
      put->set_lease(signed_of(op.lease.value()));
      break;
    }
    case TxnOp::Kind::get:
      *out.mutable_request_range() = get_request(keyspace, op.key, op.options.keys_only);
      break;
    case TxnOp::Kind::range:
      *out.mutable_request_range() = range_request(keyspace, op.key, op.options);
      break;
    case TxnOp::Kind::del:
      out.mutable_request_delete_range()->set_key(keyspace.key(op.key));
      break;
    case TxnOp::Kind::del_prefix: {
      auto* del = out.mutable_request_delete_range();
      keyspace.range(op.key, *del->mutable_key(), *del->mutable_range_end());
      break;
    }
  }
}

}  // namespace

bool to_key_value(const Keyspace& keyspace, const mvccpb::KeyValue& stored, KeyValue& out) {
  auto key = keyspace.strip(stored.key());
  if (!key) return false;
  out.key = std::move(*key);
  out.value = stored.value();
  out.lease = LeaseId(unsigned_of(stored.lease()));
  out.create_revision = unsigned_of(stored.create_revision());
  out.mod_revision = unsigned_of(stored.mod_revision());
  out.version = unsigned_of(stored.version());
  return true;
}

std::vector<KeyValue> to_key_values(
    const Keyspace& keyspace, const google::protobuf::RepeatedPtrField<mvccpb::KeyValue>& kvs) {
  std::vector<KeyValue> out;
  out.reserve(static_cast<std::size_t>(kvs.size()));
  for (const auto& stored : kvs) {
    KeyValue kv;
    if (to_key_value(keyspace, stored, kv)) out.push_back(std::move(kv));
  }
  return out;
}

pb::RangeRequest get_request(const Keyspace& keyspace, std::string_view key, bool keys_only) {
  pb::RangeRequest request;
  request.set_key(keyspace.key(key));
  request.set_keys_only(keys_only);
  return request;
}

Result<void> check_order(RangeOrder order) {
  switch (order) {
    case RangeOrder::key:
    case RangeOrder::create_revision_ascending:
    case RangeOrder::create_revision_descending:
      return {};
  }
  return Error{Errc::invalid_argument, "unknown range order"};
}

namespace {

// A compare or an operation of a kind zaris knows, refused before sending.
Result<void> check_compare(const Compare& compare) {
  if (compare.key.empty()) return Error{Errc::invalid_argument, "a compare's key is empty"};
  if (compare.op != CompareOp::equal && compare.op != CompareOp::not_equal &&
      compare.op != CompareOp::less && compare.op != CompareOp::greater)
    return Error{Errc::invalid_argument, "a compare has an unknown operator"};
  switch (compare.target) {
    case CompareTarget::value:
    case CompareTarget::version:
    case CompareTarget::create_revision:
    case CompareTarget::mod_revision:
    case CompareTarget::lease:
      return {};
  }
  return Error{Errc::invalid_argument, "a compare has an unknown target"};
}

Result<void> check_op(const TxnOp& op) {
  switch (op.kind) {
    case TxnOp::Kind::put:
    case TxnOp::Kind::get:
    case TxnOp::Kind::del:
      if (op.key.empty()) return Error{Errc::invalid_argument, "an operation's key is empty"};
      return {};
    case TxnOp::Kind::range:
      return check_order(op.options.order);
    case TxnOp::Kind::del_prefix:
      return {};
  }
  return Error{Errc::invalid_argument, "an operation of unknown kind"};
}

}  // namespace

pb::RangeRequest range_request(const Keyspace& keyspace, std::string_view prefix,
                               const RangeOptions& options) {
  pb::RangeRequest request;
  keyspace.range(prefix, *request.mutable_key(), *request.mutable_range_end());
  request.set_limit(static_cast<std::int64_t>(options.limit));
  request.set_keys_only(options.keys_only);
  switch (options.order) {
    case RangeOrder::key:
      break;
    case RangeOrder::create_revision_ascending:
      request.set_sort_target(pb::RangeRequest::CREATE);
      request.set_sort_order(pb::RangeRequest::ASCEND);
      break;
    case RangeOrder::create_revision_descending:
      request.set_sort_target(pb::RangeRequest::CREATE);
      request.set_sort_order(pb::RangeRequest::DESCEND);
      break;
  }
  request.set_min_create_revision(signed_of(options.min_create_revision));
  request.set_max_create_revision(signed_of(options.max_create_revision));
  return request;
}

Result<pb::TxnRequest> txn_request(const Keyspace& keyspace, const Txn& txn) {
  if (txn.compares.size() > kMaxTxnOps || txn.success.size() > kMaxTxnOps ||
      txn.failure.size() > kMaxTxnOps)
    return Error{Errc::invalid_argument, "a transaction has more than " +
                                             std::to_string(kMaxTxnOps) +
                                             " compares or operations in a branch (etcd's limit)"};
  pb::TxnRequest request;
  for (const auto& compare : txn.compares) {
    if (auto checked = check_compare(compare); !checked) return std::move(checked).error();
    set_compare(keyspace, compare, *request.add_compare());
  }
  for (const auto& op : txn.success) {
    if (auto checked = check_op(op); !checked) return std::move(checked).error();
    set_op(keyspace, op, *request.add_success());
  }
  for (const auto& op : txn.failure) {
    if (auto checked = check_op(op); !checked) return std::move(checked).error();
    set_op(keyspace, op, *request.add_failure());
  }
  if (request.ByteSizeLong() > kMaxTxnBytes)
    return Error{Errc::invalid_argument,
                 "a transaction of " + std::to_string(request.ByteSizeLong()) +
                     " bytes is over etcd's request limit of " + std::to_string(kMaxTxnBytes)};
  return request;
}

void to_txn_result(const Keyspace& keyspace, const Txn& txn, const pb::TxnResponse& in,
                   TxnResult& out) {
  out.succeeded = in.succeeded();
  out.revision = unsigned_of(in.header().revision());
  out.results.clear();
  const auto& ops = in.succeeded() ? txn.success : txn.failure;
  for (int i = 0; i < in.responses_size(); ++i) {
    const auto& response = in.responses(i);
    TxnOpResult result;
    result.kind = ops.at(static_cast<std::size_t>(i)).kind;
    if (response.has_response_range()) {
      result.kvs = to_key_values(keyspace, response.response_range().kvs());
      result.more = response.response_range().more();
    } else if (response.has_response_delete_range()) {
      result.deleted = unsigned_of(response.response_delete_range().deleted());
    }
    out.results.push_back(std::move(result));
  }
}

Result<void> check_key(std::string_view key) {
  if (key.empty()) return Error{Errc::invalid_argument, "key is empty"};
  return {};
}

}  // namespace zaris::etcd
