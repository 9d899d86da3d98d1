// etcd:// addresses and where their keys live in etcd: no etcd needed.
#include <boost/test/unit_test.hpp>
#include <string>

#include "etcd/address.hpp"
#include "etcd/keyspace.hpp"

using zaris::Errc;
using zaris::etcd::Keyspace;
using zaris::etcd::parse_address;

namespace {

// The message of the error parsing `text` gives; fails the test if it parses.
std::string fault_of(const std::string& text) {
  auto parsed = parse_address(text);
  BOOST_REQUIRE_MESSAGE(!parsed, text << " parsed");
  BOOST_CHECK(parsed.code() == Errc::invalid_argument);
  return parsed.error().message;
}

bool mentions(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(etcd_address)

BOOST_AUTO_TEST_CASE(one_ipv4_endpoint_without_a_prefix_parses) {
  auto parsed = parse_address("etcd://127.0.0.1:2379");
  BOOST_REQUIRE(parsed);
  BOOST_REQUIRE_EQUAL(parsed->endpoints.size(), 1u);
  BOOST_CHECK_EQUAL(parsed->endpoints[0].host, "127.0.0.1");
  BOOST_CHECK(!parsed->endpoints[0].ipv6);
  BOOST_CHECK_EQUAL(parsed->endpoints[0].port, 2379);
  BOOST_CHECK(parsed->prefix.empty());
}

BOOST_AUTO_TEST_CASE(names_ipv4_and_bracketed_ipv6_endpoints_parse_with_a_prefix) {
  auto parsed = parse_address("etcd://etcd-1.example:1,10.0.0.2:65535,[::1]:2379/app/locks");
  BOOST_REQUIRE(parsed);
  BOOST_REQUIRE_EQUAL(parsed->endpoints.size(), 3u);
  BOOST_CHECK_EQUAL(parsed->endpoints[0].host, "etcd-1.example");
  BOOST_CHECK_EQUAL(parsed->endpoints[0].port, 1);
  BOOST_CHECK_EQUAL(parsed->endpoints[1].to_string(), "10.0.0.2:65535");
  BOOST_CHECK_EQUAL(parsed->endpoints[2].host, "::1");
  BOOST_CHECK(parsed->endpoints[2].ipv6);
  BOOST_CHECK_EQUAL(parsed->endpoints[2].to_string(), "[::1]:2379");
  BOOST_CHECK_EQUAL(parsed->prefix, "app/locks");
}

BOOST_AUTO_TEST_CASE(the_prefix_is_taken_as_bytes_not_decoded) {
  auto parsed = parse_address("etcd://h:2379/a%20b?c#d");
  BOOST_REQUIRE(parsed);
  BOOST_CHECK_EQUAL(parsed->prefix, "a%20b?c#d");
}

BOOST_AUTO_TEST_CASE(a_missing_or_out_of_range_port_is_refused_naming_the_endpoint) {
  BOOST_CHECK(mentions(fault_of("etcd://h"), "\"h\" has no port"));
  BOOST_CHECK(mentions(fault_of("etcd://h:"), "\"h:\" has no port"));
  BOOST_CHECK(mentions(fault_of("etcd://h:0"), "port"));
  BOOST_CHECK(mentions(fault_of("etcd://h:65536"), "port"));
  BOOST_CHECK(mentions(fault_of("etcd://h:12x"), "port"));
  BOOST_CHECK(mentions(fault_of("etcd://h:-1"), "port"));
  BOOST_CHECK(mentions(fault_of("etcd://a:1,b"), "\"b\" has no port"));
  BOOST_CHECK(mentions(fault_of("etcd://[::1]"), "\"[::1]\" has no port"));
}

BOOST_AUTO_TEST_CASE(a_malformed_host_is_refused_naming_it) {
  BOOST_CHECK(mentions(fault_of("etcd://:2379"), "has no host"));
  BOOST_CHECK(mentions(fault_of("etcd://::1:2379"), "IPv6 address goes in brackets"));
  BOOST_CHECK(mentions(fault_of("etcd://[::1:2379"), "no closing ']'"));
  BOOST_CHECK(mentions(fault_of("etcd://[zz]:2379"), "not an IPv6 address"));
  BOOST_CHECK(mentions(fault_of("etcd://[]:2379"), "not an IPv6 address"));
  BOOST_CHECK(mentions(fault_of("etcd://user@h:2379"), "user"));
}

BOOST_AUTO_TEST_CASE(no_endpoint_or_an_empty_one_is_refused) {
  BOOST_CHECK(mentions(fault_of("etcd://"), "no endpoint"));
  BOOST_CHECK(mentions(fault_of("etcd:///app"), "no endpoint"));
  BOOST_CHECK(mentions(fault_of("etcd://a:1,,b:2"), "an endpoint is empty"));
  BOOST_CHECK(mentions(fault_of("etcd://a:1,"), "an endpoint is empty"));
}

BOOST_AUTO_TEST_CASE(an_empty_prefix_or_one_ending_in_a_slash_is_refused) {
  BOOST_CHECK(mentions(fault_of("etcd://h:2379/"), "prefix after '/' is empty"));
  BOOST_CHECK(mentions(fault_of("etcd://h:2379/app/"), "prefix ends in '/'"));
}

BOOST_AUTO_TEST_CASE(another_scheme_is_refused) {
  BOOST_CHECK(mentions(fault_of("etcds://h:2379"), "scheme"));
  BOOST_CHECK(mentions(fault_of("h:2379"), "scheme"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(etcd_keyspace)

BOOST_AUTO_TEST_CASE(a_prefixed_key_is_stored_under_the_prefix_and_a_slash) {
  const Keyspace keys("app");
  BOOST_CHECK_EQUAL(keys.key("k"), "app/k");
  BOOST_CHECK_EQUAL(*keys.strip("app/k"), "k");
  BOOST_CHECK(!keys.strip("apple/k"));
  BOOST_CHECK(!keys.strip("other"));
}

BOOST_AUTO_TEST_CASE(without_a_prefix_keys_are_stored_as_they_are) {
  const Keyspace keys("");
  BOOST_CHECK_EQUAL(keys.key("k"), "k");
  BOOST_CHECK_EQUAL(*keys.strip("k"), "k");
}

BOOST_AUTO_TEST_CASE(a_range_ends_after_the_last_byte_that_is_not_0xff) {
  std::string begin, end;
  Keyspace("app").range("", begin, end);
  BOOST_CHECK_EQUAL(begin, "app/");
  BOOST_CHECK_EQUAL(end, "app0");
  Keyspace("app").range("l\xff\xff", begin, end);
  BOOST_CHECK_EQUAL(begin, "app/l\xff\xff");
  BOOST_CHECK_EQUAL(end, "app/m");
  Keyspace("").range("\xff", begin, end);
  BOOST_CHECK_EQUAL(end, std::string(1, '\0'));
}

BOOST_AUTO_TEST_CASE(an_empty_range_without_a_prefix_covers_every_key) {
  std::string begin, end;
  Keyspace("").range("", begin, end);
  BOOST_CHECK_EQUAL(begin, std::string(1, '\0'));
  BOOST_CHECK_EQUAL(end, std::string(1, '\0'));
}

BOOST_AUTO_TEST_SUITE_END()
