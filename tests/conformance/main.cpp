#define BOOST_TEST_MODULE zaris_conformance_tests
#include <boost/test/unit_test.hpp>
