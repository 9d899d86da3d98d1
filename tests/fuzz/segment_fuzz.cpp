// libFuzzer target: any bytes as a segment image. Opening, repairing,
// checking and operating on it must never crash, hang or touch memory out of
// bounds; errors are the only acceptable answer to garbage.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "image.hpp"
#include "segment/mapping.hpp"

using namespace std::chrono_literals;

namespace {

using Engine = zaris::engine::Engine;

// What a Watcher's poll does (Watcher::read): read_events from a cursor, a
// few events at a time, so that paging through the ring is exercised too.
void poll_events(Engine& engine, std::string_view key, bool prefix, Engine::EventCursor& cursor) {
  for (int page = 0; page < 8; ++page) {
    auto events = engine.read_events(key, prefix, cursor, 3, 0ns);
    if (!events || events->empty()) return;
  }
}

// Reads a transaction script (image.hpp): every byte past its end is 0.
class Script {
 public:
  explicit Script(std::vector<std::uint8_t> bytes) : bytes_(std::move(bytes)) {}
  bool done() const { return at_ >= bytes_.size(); }
  std::uint8_t byte() { return at_ < bytes_.size() ? bytes_[at_++] : 0; }
  std::string raw(std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(static_cast<char>(byte()));
    return out;
  }

 private:
  std::vector<std::uint8_t> bytes_;
  std::size_t at_ = 0;
};

// What the script's references name, on this segment.
struct Known {
  std::uint64_t revision = 0;
  std::vector<std::uint64_t> leases;  // indexed by zaris::fuzz::ScriptLease
};

std::string script_key(Script& s) {
  const std::uint8_t b = s.byte();
  if (b < 0x80) return zaris::fuzz::kScriptKeys[b % std::size(zaris::fuzz::kScriptKeys)];
  if (b == 0xff) return std::string(5000, 'k');
  return s.raw(b & 0x0f);
}

std::string script_value(Script& s) {
  const std::uint8_t b = s.byte();
  if (b < 0x80) return zaris::fuzz::kScriptValues[b % std::size(zaris::fuzz::kScriptValues)];
  if (b == 0xff) return std::string(2'000'000, 'v');
  return s.raw(b & 0x0f);
}

std::uint64_t script_lease(Script& s, const Known& known) {
  return known.leases[s.byte() % known.leases.size()];
}

std::uint64_t script_number(Script& s, const Known& known) {
  using namespace zaris::fuzz;
  switch (s.byte() % number_kinds) {
    case number_revision: return known.revision;
    case number_next_revision: return known.revision + 1;
    case number_lease: return script_lease(s, known);
    case number_max: return ~std::uint64_t{0};
    case number_raw: {
      std::uint64_t n = 0;
      for (int i = 0; i < 8; ++i) n |= std::uint64_t{s.byte()} << (8 * i);
      return n;
    }
    case number_byte: return s.byte();
    default: return 0;
  }
}

// A branch of `count` (its header byte) operations.
void script_branch(Script& s, const Known& known, std::uint8_t count,
                   std::vector<zaris::TxnOp>& branch) {
  count &= 0x0f;
  if (count == zaris::fuzz::kTooManyOps) {
    branch.assign(zaris::kMaxTxnOps + 1, zaris::TxnOp::get("a"));
    return;
  }
  for (std::uint8_t i = 0; i < count; ++i) {
    zaris::TxnOp op;
    op.kind = static_cast<zaris::TxnOp::Kind>(s.byte());
    op.key = script_key(s);
    switch (op.kind) {
      case zaris::TxnOp::Kind::put:
        op.value = script_value(s);
        op.lease = zaris::LeaseId(script_lease(s, known));
        break;
      case zaris::TxnOp::Kind::get: op.options.keys_only = s.byte() & 1; break;
      case zaris::TxnOp::Kind::range: {
        const std::uint8_t flags = s.byte();
        op.options.keys_only = flags & 1;
        op.options.order = static_cast<zaris::RangeOrder>((flags >> 1) & 3);
        op.options.limit = (flags >> 3) & 3;
        op.options.min_create_revision = script_number(s, known);
        op.options.max_create_revision = script_number(s, known);
        break;
      }
      default: break;
    }
    branch.push_back(std::move(op));
  }
}

// Runs the script's transactions, reusing one result's buffers as a caller may.
void run_script(Engine& engine, Script& s, Known known) {
  zaris::TxnResult result;
  for (std::size_t n = 0; n < zaris::fuzz::kMaxScriptTxns && !s.done(); ++n) {
    if (auto info = engine.info()) known.revision = info->revision;
    zaris::Txn txn;
    // The counts come first, then the compares and the operations.
    const std::uint8_t compares = s.byte() & 7;
    const std::uint8_t then_count = s.byte();
    const std::uint8_t else_count = s.byte();
    for (std::uint8_t i = 0; i < compares; ++i) {
      zaris::Compare c;
      c.target = static_cast<zaris::CompareTarget>(s.byte());
      c.op = static_cast<zaris::CompareOp>(s.byte());
      c.key = script_key(s);
      if (c.target == zaris::CompareTarget::value) {
        c.bytes = script_value(s);
      } else {
        c.number = script_number(s, known);
      }
      txn.compares.push_back(std::move(c));
    }
    script_branch(s, known, then_count, txn.success);
    script_branch(s, known, else_count, txn.failure);
    (void)engine.txn(txn, result);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > (1u << 20)) return 0;
  zaris::fuzz::Image image = zaris::fuzz::expand(data, size);
  zaris::fuzz::make_attachable(image);
  // What follows the segment is the transaction script.
  std::vector<std::uint8_t> script_bytes;
  if (zaris::segment::Layout l; zaris::fuzz::claimed_layout(image.bytes.get(), image.size, l) &&
                                image.size > l.total_bytes)
    script_bytes.assign(image.bytes.get() + l.total_bytes, image.bytes.get() + image.size);
  if (script_bytes.empty()) script_bytes = zaris::fuzz::default_txn_script();
  auto mapping = zaris::segment::Mapping::attach_image(image.bytes.get(), image.size);
  if (!mapping) return 0;
  zaris::ClientOptions options;
  options.clock = std::make_shared<zaris::ManualClock>(5'000'000'000);
  options.lock_timeout = 1ms;
  zaris::engine::Engine engine(std::move(*mapping), options);

  (void)engine.repair();
  (void)engine.check();
  // Watchers of everything from the first revision, of one key, and of what
  // comes next (positioned at the end); each resumes after the writes below.
  Engine::EventCursor everything{0, 1, false, 0};
  Engine::EventCursor one_key{0, 1, false, 0};
  Engine::EventCursor next{0, ~std::uint64_t{0} >> 1, false, 0};
  poll_events(engine, "", true, everything);
  poll_events(engine, "x/2", false, one_key);
  poll_events(engine, "q/", true, next);
  (void)engine.wait_for_change("x/2", 0, 0ns);
  std::uint64_t revoked = 0;
  zaris::KeyValue kv;
  (void)engine.get("a", kv);
  (void)engine.range("", {});
  (void)engine.info();
  if (auto leases = engine.list(); leases) {
    for (std::size_t i = 0; i < leases->size() && i < 4; ++i) {
      (void)engine.keep_alive((*leases)[i].id);
      (void)engine.time_to_live((*leases)[i].id, true);
    }
    if (!leases->empty()) (void)engine.revoke(leases->front().id);
    if (!leases->empty()) revoked = leases->front().id.value();
  }
  Known known;
  known.leases.assign(zaris::fuzz::lease_kinds, 0);
  known.leases[zaris::fuzz::lease_unknown] = 0x12345;
  if (auto leases = engine.list(); leases && !leases->empty()) {
    known.leases[zaris::fuzz::lease_first] = leases->front().id.value();
    known.leases[zaris::fuzz::lease_last] = leases->back().id.value();
  }
  for (std::uint64_t id : {0x1ULL, 0x2ULL, 0x11ULL, 0x12ULL})
    (void)engine.keep_alive(zaris::LeaseId(id));
  auto granted = engine.grant(1s, {});
  (void)engine.put("a", "value", {});
  if (granted) (void)engine.put("b", "leased", zaris::Put::with_lease(*granted));
  (void)engine.put("c", "x", zaris::Put::absent());
  // A lock's join (a put, then a range that walks the back links out from
  // the key's own slot) and its look again; a delete leaves a vacant slot,
  // the next put revives it.
  {
    zaris::RangeOptions newest;
    newest.keys_only = true;
    newest.limit = 4;
    newest.order = zaris::RangeOrder::create_revision_descending;
    zaris::TxnResult out;
    (void)engine.txn(zaris::Txn()
                         .when(zaris::Compare::create_revision("q/1") == 0)
                         .then(zaris::TxnOp::put("q/1", ""))
                         .then(zaris::TxnOp::range("q/", newest)),
                     out);
    newest.max_create_revision = 5;
    (void)engine.txn(zaris::Txn()
                         .when(zaris::Compare::create_revision("q/1") != 0)
                         .then(zaris::TxnOp::get("q/1"))
                         .then(zaris::TxnOp::range("q/", newest)),
                     out);
  }
  (void)engine.del("q/1", false);
  (void)engine.put("q/1", "again", {});
  // Transactions of the script, on what the operations above left, each
  // watcher then reading their events too.
  if (granted) known.leases[zaris::fuzz::lease_granted] = granted->value();
  known.leases[zaris::fuzz::lease_revoked] = revoked;
  Script script(std::move(script_bytes));
  run_script(engine, script, known);
  (void)engine.del("a", false);
  (void)engine.del("", true);
  poll_events(engine, "", true, everything);
  poll_events(engine, "x/2", false, one_key);
  poll_events(engine, "q/", true, next);
  (void)engine.check();
  return 0;
}
