// zarisctl txn, the real binary: etcdctl's three blocks on standard input,
// both branches, every request, compare target and operator, the output
// formats, and malformed input, which is exit 2 and sends nothing.
#include "cli/cli_support.hpp"

namespace {

// zarisctl -s SEGMENT txn ARGS with `input` on its standard input (from a
// file: no pipe to fill).
Outcome txn(const Segment& s, const std::string& input, std::vector<std::string> args = {}) {
  TempDir dir;
  const std::string path = dir / "input";
  {
    std::ofstream out(path, std::ios::binary);
    out << input;
  }
  args.insert(args.begin(), "txn");
  return run(s.with(args), {"sh", "-c", "exec \"$@\" < \"$0\"", path});
}

// Every key with its revisions, and the store's revision: what a change
// would change.
std::string state(const Segment& s) {
  auto o = s({"get", "", "--prefix", "-w", "json"});
  BOOST_REQUIRE(o.status == 0);
  return o.out;
}

json get_json(const Segment& s, const std::string& key) {
  auto o = s({"get", key, "-w", "json"});
  BOOST_REQUIRE(o.status == 0);
  return json::parse(o.out);
}

std::string first_line(const Outcome& o) {
  auto lines = lines_of(o.out);
  return lines.empty() ? "" : lines[0];
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_txn)

BOOST_AUTO_TEST_CASE(success_branch_runs_every_request_in_simple_output) {
  Segment s;
  for (auto [k, v] : {std::pair{"a", "1"}, {"p/x", "1"}, {"p/y", "2"}, {"d", "4"}})
    BOOST_REQUIRE(s({"put", k, v}).status == 0);
  auto o = txn(s,
               "val(\"a\") = \"1\"\n"
               "\n"
               "put b \"two words\"\n"
               "get a\n"
               "get p/ --prefix --keys-only --limit=1\n"
               "get missing\n"
               "del d\n"
               "del p/ --prefix\n"
               "\n"
               "put never x\n");
  BOOST_TEST(o.status == 0, o.err);
  BOOST_TEST(o.err.empty());
  // As etcdctl: the outcome, then a blank line before each result.
  BOOST_TEST(o.out == "SUCCESS\n\nOK\n\na\n1\n\np/x\n\n\n1\n\n2\n");
  BOOST_TEST(s({"get", "b"}).out == "b\ntwo words\n");
  BOOST_TEST(s({"get", "d"}).out.empty());
  BOOST_TEST(s({"get", "p/", "--prefix"}).out.empty());
  BOOST_TEST(s({"get", "never"}).out.empty());
  // The puts and deletes share one revision.
  auto b = get_json(s, "b");
  BOOST_TEST(b["kvs"][0]["mod_revision"] == b["revision"]);

  // The same branch as JSON.
  auto j = json::parse(txn(s,
                           "ver(\"b\") = \"1\"\n\nput c 3\nget b\ndel b\ndel none/ --prefix\n\n"
                           "put never x\n",
                           {"-w", "json"})
                           .out);
  BOOST_TEST(j["succeeded"] == true);
  BOOST_TEST(j["revision"] == b["revision"].get<std::uint64_t>() + 1);
  auto& r = j["results"];
  BOOST_REQUIRE(r.size() == 4u);
  BOOST_TEST(r[0] == json({{"kind", "put"}}));
  BOOST_TEST(r[1]["kind"] == "get");
  BOOST_TEST(r[1]["kvs"][0]["value"] == "two words");
  BOOST_TEST(r[1]["more"] == false);
  BOOST_TEST(r[2] == json({{"kind", "del"}, {"deleted", 1}}));
  BOOST_TEST(r[3] == json({{"kind", "del"}, {"deleted", 0}}));
  BOOST_TEST(s({"get", "c"}).out == "c\n3\n");
  BOOST_TEST(s({"get", "never"}).out.empty());
}

BOOST_AUTO_TEST_CASE(failure_branch_and_json_output) {
  Segment s;
  BOOST_REQUIRE(s({"put", "a", "1"}).status == 0);
  BOOST_REQUIRE(s({"put", "r/1", "x"}).status == 0);
  BOOST_REQUIRE(s({"put", "r/2", "\xff\xfe"}).status == 0);
  BOOST_REQUIRE(s({"put", "gone", "g"}).status == 0);
  const std::string before = state(s);
  auto o = txn(s,
               "val(\"a\") = \"2\"\n"
               "\n"
               "put a changed\n"
               "\n"
               "get a --keys-only\n"
               "get r/ --prefix --limit=1\n"
               "get r/ --prefix\n"
               "del gone\n"
               "del nothing/ --prefix\n"
               "put new v\n",
               {"-w", "json"});
  BOOST_TEST(o.status == 0, o.err);
  auto lines = lines_of(o.out);
  BOOST_REQUIRE(lines.size() == 1u);                                   // one object
  BOOST_TEST(o.out.find("{\"succeeded\":false,\"revision\":") == 0u);  // in this order
  auto j = json::parse(o.out);
  BOOST_TEST(j["succeeded"] == false);
  auto revision = json::parse(before)["revision"].get<std::uint64_t>() + 1;
  BOOST_TEST(j["revision"] == revision);  // the failure branch wrote
  auto& r = j["results"];
  BOOST_REQUIRE(r.size() == 6u);
  BOOST_TEST(r[0]["kind"] == "get");
  BOOST_REQUIRE(r[0]["kvs"].size() == 1u);
  BOOST_TEST(r[0]["kvs"][0]["key"] == "a");
  BOOST_TEST(!r[0]["kvs"][0].contains("value"));  // --keys-only
  BOOST_TEST(r[0]["kvs"][0]["version"] == 1);
  BOOST_TEST(r[0]["kvs"][0]["lease"].is_null());
  BOOST_TEST(r[0]["more"] == false);
  BOOST_REQUIRE(r[1]["kvs"].size() == 1u);
  BOOST_TEST(r[1]["kvs"][0]["key"] == "r/1");
  BOOST_TEST(r[1]["kvs"][0]["value"] == "x");
  BOOST_TEST(r[1]["more"] == true);  // cut short by --limit
  BOOST_REQUIRE(r[2]["kvs"].size() == 2u);
  BOOST_TEST(r[2]["more"] == false);
  BOOST_TEST(r[2]["kvs"][1]["value_base64"] == base64_of("\xff\xfe"));  // not UTF-8
  BOOST_TEST(!r[2]["kvs"][1].contains("value"));
  BOOST_TEST(r[3]["kind"] == "del");
  BOOST_TEST(r[3]["deleted"] == 1);
  BOOST_TEST(r[4]["deleted"] == 0);
  BOOST_TEST(r[5]["kind"] == "put");
  BOOST_TEST(r[5].size() == 1u);
  // The success branch did not run; the failure branch did.
  BOOST_TEST(s({"get", "a"}).out == "a\n1\n");
  BOOST_TEST(s({"get", "gone"}).out.empty());
  BOOST_TEST(get_json(s, "new")["kvs"][0]["mod_revision"] == revision);
  // A branch of reads only takes no revision.
  auto reads = json::parse(txn(s, "\nget a\n", {"-w", "json"}).out);
  BOOST_TEST(reads["succeeded"] == true);
  BOOST_TEST(reads["revision"] == revision);
  BOOST_TEST(reads["results"][0]["kvs"][0]["value"] == "1");
}

BOOST_AUTO_TEST_CASE(table_output) {
  Segment s;
  BOOST_REQUIRE(s({"put", "t/a", "one"}).status == 0);
  BOOST_REQUIRE(s({"put", "t/b", "two"}).status == 0);
  auto o = txn(s, "\nget t/ --prefix\nput t/c three\ndel t/a\n", {"-w", "table"});
  BOOST_TEST(o.status == 0, o.err);
  auto lines = lines_of(o.out);
  BOOST_REQUIRE(lines.size() == 9u);
  BOOST_TEST(lines[0] == "SUCCESS");
  BOOST_TEST(lines[1].empty());
  BOOST_TEST(lines[2].find("KEY") == 0u);
  BOOST_TEST(lines[2].find("VALUE") != std::string::npos);
  BOOST_TEST(lines[3].find("t/a") == 0u);
  BOOST_TEST(lines[3].find("one") == lines[2].find("VALUE"));  // aligned as get's
  BOOST_TEST(lines[4].find("t/b") == 0u);
  BOOST_TEST(lines[5].empty());
  BOOST_TEST(lines[6] == "OK");
  BOOST_TEST(lines[7].empty());
  BOOST_TEST(lines[8] == "1");
}

BOOST_AUTO_TEST_CASE(every_compare_target_and_operator) {
  Segment s;
  const std::string lease = lease_of_grant(s({"lease", "grant", "600"}));
  BOOST_REQUIRE(s({"put", "k", "m", "--lease", lease}).status == 0);
  BOOST_REQUIRE(s({"put", "filler", "x"}).status == 0);
  BOOST_REQUIRE(s({"put", "k", "m", "--lease", lease}).status == 0);  // version 2
  auto kv = get_json(s, "k")["kvs"][0];
  const auto created = kv["create_revision"].get<std::uint64_t>();
  const auto modified = kv["mod_revision"].get<std::uint64_t>();
  BOOST_REQUIRE(modified > created + 1);
  auto n = [](std::uint64_t v) { return std::to_string(v); };
  struct Case {
    std::string compare;
    bool holds;
  };
  std::vector<Case> cases = {
      {"val(\"k\") = \"m\"", true},
      {"value(\"k\") = \"n\"", false},
      {"val(\"k\") != \"n\"", true},
      {"val(\"k\") != \"m\"", false},
      {"val(\"k\") < \"n\"", true},
      {"val(\"k\") < \"m\"", false},
      {"val(\"k\") > \"l\"", true},
      {"val(\"k\") > \"m\"", false},
      {"val(\"none\") != \"m\"", false},  // a missing key's value: no compare holds
      {"ver(\"k\") = \"2\"", true},
      {"version(\"k\") = \"1\"", false},
      {"ver(\"k\") != \"1\"", true},
      {"ver(\"k\") < \"3\"", true},
      {"ver(\"k\") < \"2\"", false},
      {"ver(\"k\") > \"1\"", true},
      {"ver(\"none\") = \"0\"", true},
      {"create(\"k\") = \"" + n(created) + "\"", true},
      {"c(\"k\") = \"" + n(created + 1) + "\"", false},
      {"create(\"k\") != \"" + n(created) + "\"", false},
      {"create(\"k\") < \"" + n(created + 1) + "\"", true},
      {"create(\"k\") > \"" + n(created) + "\"", false},
      {"mod(\"k\") = \"" + n(modified) + "\"", true},
      {"m(\"k\") > \"" + n(created) + "\"", true},
      {"mod(\"k\") < \"" + n(modified) + "\"", false},
      {"mod(\"k\") != \"" + n(created) + "\"", true},
      {"mod(\"none\") = \"0\"", true},
      {"lease(\"k\") = \"" + lease + "\"", true},
      {"lease(\"k\") != \"" + lease + "\"", false},
      {"lease(\"k\") < \"" + lease.substr(lease.find_first_not_of('0')) + "\"", false},
      {"lease(\"k\") > \"0\"", true},
      {"lease(\"filler\") = \"0\"", true},  // 0: no lease
      {"lease(\"k\") < \"ffffffffffffffff\"", true},
      // Blanks around the operator are optional; `raw` strings are Go's too.
      {"ver(`k`)=\"2\"", true},
      {"  ver( \"k\" )   >   \"2\"  ", false},
  };
  for (const Case& c : cases) {
    auto o = txn(s, c.compare + "\n\nget k --keys-only\n\nget filler --keys-only\n");
    BOOST_TEST(o.status == 0, c.compare << ": " << o.err);
    BOOST_TEST(o.out == (c.holds ? "SUCCESS\n\nk\n" : "FAILURE\n\nfiller\n"), c.compare);
  }
  // Several compares: all must hold.
  BOOST_TEST(first_line(txn(s, "ver(\"k\") = \"2\"\nval(\"k\") = \"m\"\n")) == "SUCCESS");
  BOOST_TEST(first_line(txn(s, "ver(\"k\") = \"2\"\nval(\"k\") = \"x\"\n")) == "FAILURE");
}

BOOST_AUTO_TEST_CASE(put_with_a_lease_and_a_lease_not_live) {
  Segment s;
  const std::string lease = lease_of_grant(s({"lease", "grant", "600"}));
  const std::string short_id = lease.substr(lease.find_first_not_of('0'));
  auto o = txn(s, "\nput a 1 --lease=" + lease + "\nput b 2 --lease " + short_id +
                      "\nput c 3 --lease=\"" + lease + "\"\nput d 4\n");
  BOOST_TEST(o.status == 0, o.err);
  BOOST_TEST(o.out == "SUCCESS\n\nOK\n\nOK\n\nOK\n\nOK\n");
  for (auto key : {"a", "b", "c"}) BOOST_TEST(get_json(s, key)["kvs"][0]["lease"] == lease, key);
  BOOST_TEST(get_json(s, "d")["kvs"][0]["lease"].is_null());
  BOOST_TEST(s({"lease", "timetolive", lease, "--keys"}).out.find("attached keys([a b c])") !=
             std::string::npos);

  // A lease that ended: exit 1, and none of the branch happened.
  const std::string ended = lease_of_grant(s({"lease", "grant", "600"}));
  BOOST_REQUIRE(s({"lease", "revoke", ended}).status == 0);
  const std::string before = state(s);
  auto lost = txn(s, "\nput a new\ndel d\nput e 5 --lease=" + ended + "\n");
  expect_failure(lost, "expired or was revoked");
  BOOST_TEST(lost.out.empty());
  BOOST_TEST(state(s) == before);
  // The failure branch is judged the same way.
  auto lost_else = txn(s, "ver(\"a\") = \"9\"\n\nput x 1\n\nput a new\nput e 5 --lease=" + ended);
  expect_failure(lost_else, "expired or was revoked");
  BOOST_TEST(state(s) == before);
  // One never granted.
  auto unknown = txn(s, "\nput a new\nput e 5 --lease=7777777\n");
  expect_failure(unknown, "not found");
  BOOST_TEST(state(s) == before);
}

BOOST_AUTO_TEST_CASE(malformed_input_is_a_usage_error_and_changes_nothing) {
  Segment s;
  BOOST_REQUIRE(s({"put", "k", "v"}).status == 0);
  const std::string before = state(s);
  struct Case {
    std::string input;
    int line;            // the line the message names
    std::string saying;  // and part of what it says
  };
  // Each input holds requests that would change k, were it sent.
  const std::string writes = "put k changed\ndel k\n";
  const std::vector<Case> cases = {
      {"foo(\"k\") = \"v\"\n\nput k changed\n", 1, "unknown compare target 'foo'"},
      {"ver(\"k\") == \"1\"\n\nput k changed\n", 1, "unknown operator '=='"},
      {"ver(\"k\") <= \"1\"\n\nput k changed\n", 1, "unknown operator '<='"},
      {"ver(\"k\") \"1\"\n\nput k changed\n", 1, "an operator"},
      {"ver(\"k\") = 1\n\nput k changed\n", 1, "the operand must be quoted"},
      {"ver(k) = \"1\"\n\nput k changed\n", 1, "the key must be quoted"},
      {"ver(\"k\" = \"1\"\n\nput k changed\n", 1, "')' expected"},
      {"ver \"k\" = \"1\"\n\nput k changed\n", 1, "a compare is TARGET"},
      {"ver(\"k\") = \"1\" and more\n\nput k changed\n", 1, "text after the operand"},
      {"ver(\"k\") = \"1\n\nput k changed\n", 1, "not closed"},
      {"val(\"k\") = \"\\q\"\n\nput k changed\n", 1, "unknown escape"},
      {"val(\"k\") = \"\\x4\"\n\nput k changed\n", 1, "2 hex digits"},
      {"val(\"k\") = \"\\400\"\n\nput k changed\n", 1, "above"},
      {"val(\"k\") = \"\\ud800\"\n\nput k changed\n", 1, "no Unicode character"},
      {"ver(\"\") = \"0\"\n\nput k changed\n", 1, "KEY is empty"},
      {"ver(\"k\") = \"-1\"\n\nput k changed\n", 1, "not a decimal number"},
      {"create(\"k\") = \"1.5\"\n\nput k changed\n", 1, "not a decimal number"},
      {"mod(\"k\") = \"18446744073709551616\"\n\nput k changed\n", 1, "out of range"},
      {"ver(\"k\") = \"\"\n\nput k changed\n", 1, "empty"},
      {"lease(\"k\") = \"xyz\"\n\nput k changed\n", 1, "not a lease id"},
      {"lease(\"k\") = \"11112222333344445\"\n\nput k changed\n", 1, "not a lease id"},
      {"\n" + writes + "set k v\n", 4, "unknown request 'set'"},
      {"\n" + writes + "\"put\" k v --if-absent\n", 4, "unknown flag --if-absent for put"},
      {"\n" + writes + "get k --rev=3\n", 4, "unknown flag --rev for get"},
      {"\n" + writes + "del k --keys-only\n", 4, "unknown flag --keys-only for del"},
      {"\n" + writes + "get k -p\n", 4, "unknown flag -p"},
      {"\n" + writes + "get k --prefix=yes\n", 4, "--prefix takes no value"},
      {"\n" + writes + "put k\n", 4, "put takes KEY VALUE"},
      {"\n" + writes + "put k v w\n", 4, "put takes KEY VALUE"},
      {"\n" + writes + "get\n", 4, "get takes one KEY"},
      {"\n" + writes + "del a b\n", 4, "del takes one KEY"},
      {"\n" + writes + "put \"\" v\n", 4, "KEY is empty"},
      {"\n" + writes + "get ''\n", 4, "KEY is empty"},
      {"\n" + writes + "put k \"v\n", 4, "not closed"},
      {"\n" + writes + "put k 'v\n", 4, "not closed"},
      {"\n" + writes + "put k \"\\'\"\n", 4, "unknown escape"},
      {"\n" + writes + "put j v --lease=xyz\n", 4, "'xyz' is not a lease id"},
      {"\n" + writes + "put j v --lease=0\n", 4, "not a lease id"},
      {"\n" + writes + "put j v --lease\n", 4, "--lease needs a value"},
      {"\n" + writes + "get k --prefix --limit=ten\n", 4, "--limit 'ten' is not a decimal"},
      {"\n" + writes + "get k --prefix --limit=-1\n", 4, "not a decimal"},
      {"\n" + writes + "\n" + writes + "\nput k x\n", 8, "more than three blocks"},
      {"\n\n\n" + writes, 4, "more than three blocks"},
  };
  for (const Case& c : cases) {
    auto o = txn(s, c.input);
    expect_usage_error(o);
    BOOST_TEST(o.out.empty(), c.input);
    BOOST_TEST(o.err.find("txn: line " + std::to_string(c.line) + " (") != std::string::npos,
               c.input << " gave " << o.err);
    BOOST_TEST(o.err.find(c.saying) != std::string::npos, c.input << " gave " << o.err);
    BOOST_TEST(state(s) == before, c.input);
  }
  // The message shows the line as it is, made printable.
  auto shown = txn(s, "\nput k v\nfrob\tk\n");
  BOOST_TEST(shown.err.find("line 3 (frob\\x09k): unknown request 'frob'") != std::string::npos,
             shown.err);
  // A long one is cut short.
  auto long_line = txn(s, "\nput k " + std::string(500, 'v') + " extra\n");
  BOOST_TEST(long_line.err.find("line 2 (put k " + std::string(114, 'v') + "...): put takes") !=
                 std::string::npos,
             long_line.err);
  // A request where a compare belongs (the blank line forgotten).
  BOOST_TEST(txn(s, "put k v\n").err.find("line 1 (put k v): not a compare") != std::string::npos);
  BOOST_TEST(state(s) == before);
  // --help shows the format.
  auto help = s({"txn", "--help"});
  BOOST_TEST(help.status == 0);
  BOOST_TEST(help.out.find("val|ver|create|mod|lease(\"KEY\") =|!=|<|> \"OPERAND\"") !=
             std::string::npos);
  // Arguments are a usage error too.
  expect_usage_error(s({"txn", "extra"}));
  // Nothing is sent: not even the segment is created.
  Segment fresh;
  expect_usage_error(txn(fresh, "\nput k v\nbogus\n"));
  expect_failure(fresh({"status"}), "does not exist");
}

BOOST_AUTO_TEST_CASE(empty_blocks) {
  Segment s;
  BOOST_REQUIRE(s({"put", "k", "v"}).status == 0);
  const std::string before = state(s);
  // No input at all: no compares (they hold), an empty success branch.
  auto nothing = txn(s, "");
  BOOST_TEST(nothing.status == 0, nothing.err);
  BOOST_TEST(nothing.out == "SUCCESS\n");
  auto nothing_json = json::parse(txn(s, "", {"-w", "json"}).out);
  BOOST_TEST(nothing_json["succeeded"] == true);
  BOOST_TEST(nothing_json["results"].empty());
  BOOST_TEST(nothing_json["revision"] == json::parse(before)["revision"]);
  // No compares, an empty success block: the failure block does not run.
  BOOST_TEST(txn(s, "\n\nput k f\n").out == "SUCCESS\n");
  BOOST_TEST(state(s) == before);
  // A compare that fails, and an empty failure block (end of input ends it).
  BOOST_TEST(txn(s, "ver(\"k\") = \"5\"\n\nput k s\n").out == "FAILURE\n");
  BOOST_TEST(txn(s, "ver(\"k\") = \"5\"\n\nput k s\n\n").out == "FAILURE\n");
  BOOST_TEST(state(s) == before);
  // A line of blanks is a blank line; blank lines after the third block,
  // and a last line without its newline, are fine.
  auto padded = txn(s, "ver(\"k\") = \"1\"\n \t\nget k\n\nput k e\n\n\n\n");
  BOOST_TEST(padded.out == "SUCCESS\n\nk\nv\n");
  BOOST_TEST(txn(s, "ver(\"k\") = \"1\"\n\nget k").out == "SUCCESS\n\nk\nv\n");
  // A block may be empty in the middle: the failure branch after it runs.
  auto middle = txn(s, "ver(\"k\") = \"9\"\n\n\nput k from-else\n");
  BOOST_TEST(middle.out == "FAILURE\n\nOK\n");
  BOOST_TEST(s({"get", "k"}).out == "k\nfrom-else\n");
}

BOOST_AUTO_TEST_CASE(quoting_and_escapes) {
  Segment s;
  auto o = txn(s,
               "\n"
               "put \"a b\" 'single \"q\" \\n'\n"
               "put esc \"t\\tn\\nq\\\"b\\\\x\\x41\\101\\x00\\xff\"\n"
               "put uni \"\\u00e9\\U0001F600\"\n"
               "put -- -dash --prefix\n"
               "put glued pre\"mid dle\"'post'\n");
  BOOST_TEST(o.status == 0, o.err);
  BOOST_TEST(get_json(s, "a b")["kvs"][0]["value"] == "single \"q\" \\n");  // '' as it is
  auto esc = get_json(s, "esc")["kvs"][0];
  BOOST_TEST(esc["value_base64"] == base64_of(std::string("t\tn\nq\"b\\xAA\0\xff", 13)));
  BOOST_TEST(get_json(s, "uni")["kvs"][0]["value"] == "\xc3\xa9\xf0\x9f\x98\x80");
  auto dash = json::parse(txn(s, "\nget -- -dash\n", {"-w", "json"}).out);
  BOOST_TEST(dash["results"][0]["kvs"][0]["value"] == "--prefix");
  BOOST_TEST(get_json(s, "glued")["kvs"][0]["value"] == "premid dlepost");
  // The same escapes in compares, and simple output made printable.
  auto cmp = txn(s,
                 "val(\"esc\") = \"t\\tn\\nq\\\"b\\\\x\\x41\\101\\x00\\xff\"\n"
                 "val(`a b`) = `single \"q\" \\n`\n"
                 "\nget esc\n");
  BOOST_TEST(cmp.out == "SUCCESS\n\nesc\nt\\x09n\\x0aq\"b\\\\xAA\\x00\\xff\n", cmp.out);
}

BOOST_AUTO_TEST_CASE(library_refusals_exit_1_and_change_nothing) {
  Segment s;
  BOOST_REQUIRE(s({"put", "k", "v"}).status == 0);
  const std::string before = state(s);
  // More operations than a branch may hold.
  std::string many = "\nput k changed\n";
  for (int i = 0; i < 128; ++i) many += "get k\n";
  auto too_many = txn(s, many);
  expect_failure(too_many, "at most 128");
  BOOST_TEST(state(s) == before);
  // A key put twice in a branch (etcd's rule).
  auto twice = txn(s, "\nput k 1\nput k 2\n");
  BOOST_TEST(twice.status == 1);
  BOOST_TEST(state(s) == before);
  // A value longer than the segment allows.
  auto long_value = txn(s, "\nput j " + std::string(2000, 'v') + "\n");
  BOOST_TEST(long_value.status == 1);
  BOOST_TEST(state(s) == before);
  // Input that cannot be read (a directory).
  auto unreadable = run(s.with({"txn"}), {"sh", "-c", "exec \"$0\" \"$@\" < /"});
  expect_failure(unreadable, "cannot read standard input");
  BOOST_TEST(state(s) == before);
  // Reads only on a missing segment: it is not created.
  Segment fresh;
  expect_failure(txn(fresh, "\nget k\n"), "does not exist");
  expect_failure(fresh({"status"}), "does not exist");
  // One that puts creates it, as put does.
  auto created = txn(fresh, "\nput k v\n");
  BOOST_TEST(created.status == 0, created.err);
  BOOST_TEST(fresh({"get", "k"}).out == "k\nv\n");
}

BOOST_AUTO_TEST_CASE(interactive_prompts_on_stderr) {
  Segment s;
  BOOST_REQUIRE(s({"put", "k", "v"}).status == 0);
  // It stops reading at the blank line that ends the third block: what comes
  // after is not read (without -i it would be a fourth block).
  const std::string input = "ver(\"k\") = \"1\"\n\nput k i\n\nput k e\n\nnot read\n";
  auto o = txn(s, input, {"-i"});
  BOOST_TEST(o.status == 0, o.err);
  BOOST_TEST(o.out == "SUCCESS\n\nOK\n");
  BOOST_TEST(o.err ==
             "compares:\nsuccess requests (get, put, del):\nfailure requests (get, put, del):\n");
  BOOST_TEST(s({"get", "k"}).out == "k\ni\n");
  expect_usage_error(txn(s, input));
  BOOST_TEST(txn(s, input, {"--interactive"}).status == 0);
}

BOOST_AUTO_TEST_SUITE_END()
