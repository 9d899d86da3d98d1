#define BOOST_TEST_MODULE zaris_process_tests
#include <boost/test/unit_test.hpp>

#include "segment/crash_point.hpp"

// Every segment these programs create takes one hash seed: the crash sweeps
// count an operation's steps on several segments, and tests that count the
// steps of one operation to kill another at the same step rely on it too.
struct FixedHashSeed {
  FixedHashSeed() { zaris::segment::crash::fix_hash_seed(); }
};
BOOST_TEST_GLOBAL_FIXTURE(FixedHashSeed);
