#define BOOST_TEST_MODULE zaris_unit_tests
#include <boost/test/unit_test.hpp>
