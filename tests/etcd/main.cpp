#define BOOST_TEST_MODULE zaris_etcd_tests
#include <boost/test/unit_test.hpp>
