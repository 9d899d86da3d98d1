#define BOOST_TEST_MODULE zaris_process_tests
#include <boost/test/unit_test.hpp>
