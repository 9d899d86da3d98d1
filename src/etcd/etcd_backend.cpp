#include "etcd/etcd_backend.hpp"

#include "etcd/messages.hpp"
#include "etcd/status.hpp"

namespace zaris::etcd {

namespace {

namespace pb = etcdserverpb;

std::uint64_t unsigned_of(std::int64_t wire) {
  return static_cast<std::uint64_t>(wire);
}

}  // namespace

Result<std::unique_ptr<Client::Impl>> EtcdBackend::open(std::string_view address,
                                                        const ClientOptions& options) {
  if (options.clock)
    return Error{Errc::invalid_argument,
                 "a client clock applies to shared memory only: etcd keeps time on its servers"};
  auto parsed = parse_address(address);
  if (!parsed) return std::move(parsed).error();
  auto connection = Connection::open(*parsed);
  if (!connection) return std::move(connection).error();
  return std::unique_ptr<Client::Impl>(
      new EtcdBackend(std::string(address), std::move(parsed->prefix), std::move(*connection)));
}

EtcdBackend::~EtcdBackend() {
  if (!connection_->forked()) return;
  // The streams' threads are the parent's and gRPC's state is its: releasing
  // any of it here would write to its streams or wait for threads the child
  // does not have. The child's copy is left alone.
  (void)watches_.release();
  (void)leases_.release();
  (void)connection_.release();
}

Result<PutResult> EtcdBackend::put(std::string_view key, std::string_view value,
                                   const Put& options) {
  if (auto checked = check_key(key); !checked) return std::move(checked).error();
  pb::PutRequest request;
  request.set_key(keyspace_.key(key));
  request.set_value(std::string(value));
  request.set_lease(static_cast<std::int64_t>(options.lease.value()));
  // As a segment refuses a value over its maximum: before anything is sent.
  if (request.ByteSizeLong() > kMaxTxnBytes)
    return Error{Errc::too_large, "put: " + std::to_string(request.ByteSizeLong()) +
                                      " bytes is over etcd's request limit of " +
                                      std::to_string(kMaxTxnBytes)};
  if (options.if_absent || options.if_mod_revision) return conditional_put(request, options);
  pb::PutResponse response;
  const auto status = connection_->call(
      [&](grpc::ClientContext* c) { return connection_->kv().Put(c, request, &response); });
  if (status.error_code() == grpc::StatusCode::NOT_FOUND)
    return Error{Errc::lease_lost, "put: lease " + options.lease.to_string() + " has ended"};
  if (!status.ok()) return connection_->error(status, "put");
  return PutResult{unsigned_of(response.header().revision())};
}

Result<PutResult> EtcdBackend::conditional_put(const pb::PutRequest& put, const Put& options) {
  pb::TxnRequest request;
  if (options.if_absent) {
    auto* absent = request.add_compare();
    absent->set_key(put.key());
    absent->set_target(pb::Compare::CREATE);
    absent->set_result(pb::Compare::EQUAL);
    absent->set_create_revision(0);
  }
  if (options.if_mod_revision) {
    auto* at = request.add_compare();
    at->set_key(put.key());
    at->set_target(pb::Compare::MOD);
    at->set_result(pb::Compare::EQUAL);
    at->set_mod_revision(static_cast<std::int64_t>(*options.if_mod_revision));
  }
  *request.add_success()->mutable_request_put() = put;
  // On failure, whether the key lives tells which condition failed.
  auto* look = request.add_failure()->mutable_request_range();
  look->set_key(put.key());
  look->set_keys_only(true);
  pb::TxnResponse response;
  const auto status = connection_->call(
      [&](grpc::ClientContext* c) { return connection_->kv().Txn(c, request, &response); });
  if (status.error_code() == grpc::StatusCode::NOT_FOUND)
    return Error{Errc::lease_lost, "put: lease " + options.lease.to_string() + " has ended"};
  if (!status.ok()) return connection_->error(status, "put");
  if (response.succeeded()) return PutResult{unsigned_of(response.header().revision())};
  const bool lives =
      response.responses_size() == 1 && response.responses(0).response_range().kvs_size() > 0;
  if (options.if_absent && (lives || !options.if_mod_revision))
    return Error{Errc::already_exists, "put: the key already exists"};
  return Error{Errc::revision_mismatch,
               "put: the key's mod revision is not " + std::to_string(*options.if_mod_revision)};
}

Result<bool> EtcdBackend::get(std::string_view key, KeyValue& out) {
  if (auto checked = check_key(key); !checked) return std::move(checked).error();
  const pb::RangeRequest request = get_request(keyspace_, key, false);
  pb::RangeResponse response;
  const auto status = connection_->call(
      [&](grpc::ClientContext* c) { return connection_->kv().Range(c, request, &response); });
  if (!status.ok()) return connection_->error(status, "get");
  if (response.kvs_size() == 0) return false;
  return to_key_value(keyspace_, response.kvs(0), out);
}

Result<RangeResult> EtcdBackend::range(std::string_view prefix, const RangeOptions& options) {
  if (auto checked = check_order(options.order); !checked) return std::move(checked).error();
  const pb::RangeRequest request = range_request(keyspace_, prefix, options);
  pb::RangeResponse response;
  const auto status = connection_->call(
      [&](grpc::ClientContext* c) { return connection_->kv().Range(c, request, &response); });
  if (!status.ok()) return connection_->error(status, "range");
  RangeResult result;
  result.revision = unsigned_of(response.header().revision());
  result.kvs = to_key_values(keyspace_, response.kvs());
  result.more = response.more();
  return result;
}

Result<DeleteResult> EtcdBackend::del(std::string_view key, bool prefix) {
  pb::DeleteRangeRequest request;
  if (prefix) {
    keyspace_.range(key, *request.mutable_key(), *request.mutable_range_end());
  } else {
    if (auto checked = check_key(key); !checked) return std::move(checked).error();
    request.set_key(keyspace_.key(key));
  }
  pb::DeleteRangeResponse response;
  const auto status = connection_->call(
      [&](grpc::ClientContext* c) { return connection_->kv().DeleteRange(c, request, &response); });
  if (!status.ok()) return connection_->error(status, prefix ? "delete prefix" : "delete");
  return DeleteResult{unsigned_of(response.header().revision()), unsigned_of(response.deleted())};
}

Result<void> EtcdBackend::txn(const Txn& txn, TxnResult& out) {
  auto request = txn_request(keyspace_, txn);
  if (!request) return std::move(request).error();
  pb::TxnResponse response;
  const auto status = connection_->call(
      [&](grpc::ClientContext* c) { return connection_->kv().Txn(c, *request, &response); });
  if (status.error_code() == grpc::StatusCode::NOT_FOUND)
    return Error{Errc::lease_lost,
                 "txn: a lease put with has ended (" + status.error_message() + ")"};
  if (!status.ok()) return connection_->error(status, "txn");
  to_txn_result(keyspace_, txn, response, out);
  return {};
}

Result<SegmentInfo> EtcdBackend::info() {
  if (connection_->forked()) return connection_->forked_error();
  return cluster_status(address_);
}

Result<std::vector<std::string>> EtcdBackend::check() {
  return Error{Errc::unsupported,
               "check verifies a shared-memory segment; an etcd cluster checks itself"};
}

}  // namespace zaris::etcd
