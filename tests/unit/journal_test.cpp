// The undo journal: rollback restores, and replay refuses records it cannot trust.
#include <cstdlib>
#include <cstring>
#include <memory>

#include "segment/journal.hpp"
#include "segment/mapping.hpp"
#include "support.hpp"

using namespace zaris::segment;

namespace {

struct Image {
  Image() {
    BOOST_REQUIRE(Layout::compute(to_capacities(zaris::test::small_segment()), layout));
    bytes.reset(static_cast<std::uint8_t*>(std::aligned_alloc(64, layout.total_bytes)));
    std::memset(bytes.get(), 0, layout.total_bytes);
    BOOST_REQUIRE(initialise(bytes.get(), layout).ok());
  }
  StoreState& state() {
    return reinterpret_cast<Control*>(bytes.get() + layout.control_offset)->state;
  }
  JournalHeader& journal() {
    return *reinterpret_cast<JournalHeader*>(bytes.get() + layout.journal_offset);
  }
  // Writes a raw record {offset, length, prev} + data at `at` in the record area.
  void raw_record(std::uint64_t at, std::uint64_t offset, std::uint32_t length,
                  std::uint32_t prev) {
    std::uint8_t* rec = bytes.get() + layout.records_offset + at;
    std::memcpy(rec, &offset, 8);
    std::memcpy(rec + 8, &length, 4);
    std::memcpy(rec + 12, &prev, 4);
  }
  Layout layout;
  std::unique_ptr<std::uint8_t, decltype(&std::free)> bytes{nullptr, &std::free};
};

}  // namespace

BOOST_AUTO_TEST_SUITE(journal)

BOOST_AUTO_TEST_CASE(rollback_restores_in_reverse_order) {
  Image image;
  StoreState& st = image.state();
  st.revision = 7;
  Tx tx(image.bytes.get(), image.layout);
  tx.set(st.revision, std::uint64_t{8});
  tx.set(st.revision, std::uint64_t{9});
  tx.set(st.key_count, 5u);
  BOOST_TEST(image.journal().used_bytes.load() != 0u);
  tx.rollback();
  BOOST_TEST(st.revision == 7u);
  BOOST_TEST(st.key_count == 0u);
  BOOST_TEST(image.journal().used_bytes.load() == 0u);
}

BOOST_AUTO_TEST_CASE(commit_keeps_the_changes) {
  Image image;
  StoreState& st = image.state();
  Tx tx(image.bytes.get(), image.layout);
  tx.set(st.revision, std::uint64_t{42});
  tx.commit();
  BOOST_TEST(image.journal().used_bytes.load() == 0u);
  BOOST_TEST(replay(image.bytes.get(), image.layout).ok());
  BOOST_TEST(st.revision == 42u);
}

BOOST_AUTO_TEST_CASE(replay_refuses_untrusted_records_and_writes_nothing) {
  struct Bad {
    const char* what;
    std::uint64_t offset;
    std::uint32_t length;
    std::uint32_t prev;
  };
  Image probe;
  const Layout& l = probe.layout;
  std::uint64_t state_offset = l.control_offset + offsetof(Control, state);
  for (Bad bad : {Bad{"beyond the segment", l.total_bytes + 65536, 400, 0},
                  Bad{"wrapping around", ~std::uint64_t{0} - 7, 16, 0},
                  Bad{"into the header", 0, 8, 0}, Bad{"into the mutex", l.control_offset, 8, 0},
                  Bad{"state plus overflow", state_offset + 8, 400, 0},
                  Bad{"into the undo records", l.records_offset, 8, 0},
                  Bad{"bad back-link", state_offset, 8, 24}}) {
    Image image;
    image.state().revision = 5;
    image.raw_record(0, bad.offset, bad.length, bad.prev);
    image.journal().used_bytes.store(16 + (std::uint64_t{bad.length} + 7) / 8 * 8);
    auto replayed = replay(image.bytes.get(), image.layout);
    BOOST_TEST(replayed.code() == zaris::Errc::corrupt_segment, bad.what);
    BOOST_TEST(image.state().revision == 5u, bad.what);
  }
  Image image;
  image.journal().used_bytes.store(image.layout.journal_capacity + 8);
  BOOST_TEST(replay(image.bytes.get(), image.layout).code() == zaris::Errc::corrupt_segment);
  image.journal().used_bytes.store(8);  // shorter than a record header
  BOOST_TEST(replay(image.bytes.get(), image.layout).code() == zaris::Errc::corrupt_segment);
}

BOOST_AUTO_TEST_CASE(one_bad_record_stops_the_whole_replay) {
  // A good record first, then a bad one: replay validates everything before
  // it restores anything, so the good one is not applied either.
  Image image;
  StoreState& st = image.state();
  st.revision = 9;
  Tx tx(image.bytes.get(), image.layout);
  tx.set(st.revision, std::uint64_t{10});
  std::uint64_t used = image.journal().used_bytes.load();
  image.raw_record(used, image.layout.total_bytes, 8, 0);
  image.journal().used_bytes.store(used + 24);
  BOOST_TEST(replay(image.bytes.get(), image.layout).code() == zaris::Errc::corrupt_segment);
  BOOST_TEST(st.revision == 10u);
}

BOOST_AUTO_TEST_CASE(record_bounds_are_exact) {
  Image probe;
  const Layout& l = probe.layout;
  std::uint64_t state_end = l.control_offset + offsetof(Control, state) + sizeof(StoreState);
  struct Case {
    std::uint64_t offset;
    std::uint32_t length;
    bool ok;
  };
  for (Case c : {Case{state_end - 8, 8, true}, Case{state_end - 8, 16, false},
                 Case{l.total_bytes - 8, 8, true}, Case{l.total_bytes - 8, 9, false},
                 Case{l.total_bytes, 0, true}, Case{l.leases_offset - 8, 8, false}}) {
    Image image;
    image.raw_record(0, c.offset, c.length, 0);
    image.journal().used_bytes.store(16 + (std::uint64_t{c.length} + 7) / 8 * 8);
    BOOST_TEST(replay(image.bytes.get(), image.layout).ok() == c.ok,
               "offset " << c.offset << " length " << c.length);
  }
  Image image;
  image.journal().used_bytes.store(12);  // not a whole number of words
  BOOST_TEST(replay(image.bytes.get(), image.layout).code() == zaris::Errc::corrupt_segment);
}

BOOST_AUTO_TEST_CASE(a_transaction_too_large_for_the_journal_aborts) {
  Image image;
  Tx tx(image.bytes.get(), image.layout);
  StoreState& st = image.state();
  bool aborted = false;
  try {
    for (std::uint64_t i = 0;; ++i) tx.set(st.revision, i);
  } catch (const TxAbort& abort) {
    aborted = abort.code == zaris::Errc::no_space;
  }
  BOOST_TEST(aborted);
  tx.rollback();
  BOOST_TEST(st.revision == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
